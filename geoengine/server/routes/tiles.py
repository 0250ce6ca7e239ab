"""GET /sources, GET /tiles/{source}, GET /tiles/{source}/{z}/{x}/{y}[.pbf|.mvt],
POST /tiles/{source}/cache/clear.

The tile endpoint is the hottest path of the service: it is a plain Starlette route (no FastAPI
dependency solving or validation layer) that makes one engine call and answers with the stored bytes.
A FastAPI route with the same path and parameters is declared after it for the OpenAPI document only.
"""

from __future__ import annotations

import gzip

from fastapi import APIRouter, Depends, Path, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.responses import Response
from starlette.routing import Route

from geoengine.engine import Engine
from geoengine.errors import GeoengineError, InvalidRequest
from geoengine.server.deps import get_engine
from geoengine.server.problems import PROBLEM_JSON

router = APIRouter(tags=["Tiles"])

CACHE_CONTROL = "public, max-age=86400"
MEDIA_TYPES = {"pbf": "application/x-protobuf", "mvt": "application/x-protobuf", "png": "image/png",
               "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp", "avif": "image/avif"}


# ---------------------------------------------------------------------------------------- models
class SourceEntry(BaseModel):
    id: str = Field(description="Source id, used as {source} in tile paths (the archive's file stem)")
    name: str
    format: str = Field(description="Tile format (pbf)")
    minzoom: int
    maxzoom: int
    bounds: str = Field(description="min lon,min lat,max lon,max lat")
    center: str = Field(description="lon,lat,zoom")
    tiles: str = Field(description="Absolute tile URL template containing {z}, {x}, {y}")
    tilejson: str = Field(description="Absolute URL of the source's TileJSON document")


class SourceList(BaseModel):
    sources: list[SourceEntry]


class VectorLayer(BaseModel):
    id: str
    fields: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    minzoom: int | None = None
    maxzoom: int | None = None


class TileJSON(BaseModel):
    tilejson: str = Field(description="TileJSON format version (3.0.0)")
    name: str
    description: str | None = None
    attribution: str
    scheme: str = Field(description="xyz")
    format: str
    tiles: list[str]
    minzoom: int
    maxzoom: int
    bounds: list[float] = Field(min_length=4, max_length=4)
    center: list[float] = Field(min_length=3, max_length=3)
    vector_layers: list[VectorLayer]


class CacheCleared(BaseModel):
    cleared: int = Field(description="Number of cache entries dropped")
    source: str


# ------------------------------------------------------------------------------------- base URL
def base_url(request: Request) -> str:
    """The public base URL: Settings.public_url, else the proxy headers, else the request itself."""
    settings = request.app.state.settings
    if settings.public_url:
        return settings.public_url.rstrip("/")
    headers = request.headers
    proto = headers.get("x-forwarded-proto")
    host = headers.get("x-forwarded-host")
    scheme = proto.split(",")[0].strip() if proto else request.url.scheme
    netloc = host.split(",")[0].strip() if host else (headers.get("host") or request.url.netloc)
    prefix = (headers.get("x-forwarded-prefix") or request.scope.get("root_path") or "").rstrip("/")
    return f"{scheme}://{netloc}{prefix}"


# ------------------------------------------------------------------------------------ endpoints
@router.get("/sources", response_model=SourceList, summary="List vector tile sources")
def list_sources(request: Request, engine: Engine = Depends(get_engine)) -> dict:
    base = base_url(request)
    return {"sources": [engine.tiles.entry(s.id, base) for s in engine.tiles.sources()]}


@router.get("/tiles/{source}", response_model=TileJSON, summary="TileJSON document of a source",
            responses={404: {"description": "Unknown source"}})
def tilejson(request: Request, source: str = Path(description="An id returned by /sources"),
             engine: Engine = Depends(get_engine)) -> dict:
    return engine.tiles.tilejson(source, base_url(request))


@router.post("/tiles/{source}/cache/clear", response_model=CacheCleared, summary="Clear the tile cache of a source",
             responses={404: {"description": "Unknown source"}})
def clear_cache(source: str = Path(description="An id returned by /sources"),
                engine: Engine = Depends(get_engine)) -> dict:
    return {"cleared": engine.tiles.clear(source), "source": source}


# -------------------------------------------------------------------------- the tile hot path
def _accepts_gzip(value: str | None) -> bool:
    if not value:
        return False
    for part in value.split(","):
        token, _, params = part.partition(";")
        if token.strip().lower() not in ("gzip", "x-gzip", "*"):
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, val = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val)
                except ValueError:
                    q = 0.0
        return q > 0
    return False


def _etag_matches(header: str, etag: str) -> bool:
    if header.strip() == "*":
        return True
    for tag in header.split(","):
        tag = tag.strip()
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


def _problem(exc: GeoengineError) -> Response:
    import json

    body = json.dumps(exc.to_problem()).encode()
    return Response(body, status_code=exc.status, media_type=PROBLEM_JSON, headers=exc.headers or None)


def _parse_int(name: str, text: str) -> int:
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 12:
        raise InvalidRequest.field(name, f"{name} must be an integer, got '{text}'")
    return int(text)


async def tile_endpoint(request: Request) -> Response:
    p = request.path_params
    try:
        y_text = p["y"]
        if y_text.endswith((".pbf", ".mvt")):
            y_text = y_text[:-4]
        z, x, y = _parse_int("z", p["z"]), _parse_int("x", p["x"]), _parse_int("y", y_text)
        tile = request.app.state.engine.tiles.tile(p["source"], z, x, y)
    except GeoengineError as exc:
        return _problem(exc)
    headers = request.headers
    if tile is None:
        return Response(status_code=204, headers={"Cache-Control": CACHE_CONTROL})
    data, etag = tile.data, tile.etag
    encoded = tile.gzip
    if encoded and not _accepts_gzip(headers.get("accept-encoding")):
        data, encoded = gzip.decompress(data), False
        etag = etag[:-1] + '-identity"'
    out = {"Cache-Control": CACHE_CONTROL, "ETag": etag, "Vary": "Accept-Encoding"}
    inm = headers.get("if-none-match")
    if inm is not None and _etag_matches(inm, etag):
        return Response(status_code=304, headers=out)
    if encoded:
        out["Content-Encoding"] = "gzip"
    return Response(data, headers=out, media_type="application/x-protobuf")


router.routes.append(Route("/tiles/{source}/{z}/{x}/{y}", tile_endpoint, methods=["GET", "HEAD"],
                           include_in_schema=False))


# The same path for the OpenAPI document only (the Starlette route above answers every request).
def _tile_doc(
    source: str = Path(description="An id returned by /sources"),
    z: int = Path(ge=0, le=22, description="Zoom, 0 to 22"),
    x: int = Path(ge=0, description="Column, 0 to 2^z - 1"),
    y: str = Path(description="Row, 0 to 2^z - 1, optionally with a .pbf or .mvt suffix"),
):  # pragma: no cover - never routed
    raise AssertionError("served by tile_endpoint")


router.routes.append(APIRoute(
    "/tiles/{source}/{z}/{x}/{y}", _tile_doc, methods=["GET"], summary="A vector tile",
    response_class=Response,
    responses={
        200: {"description": "Vector tile (Content-Encoding gzip when stored compressed and accepted); "
                             "Cache-Control public, max-age=86400; ETag",
              "content": {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}}},
        204: {"description": "Valid coordinate without a tile"},
        304: {"description": "Not modified (If-None-Match matched the ETag)"},
        404: {"description": "Unknown source"},
    },
))
