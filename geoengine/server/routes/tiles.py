"""GET /sources, GET /tiles/{source}, GET /tiles/{source}/{z}/{x}/{y}[.pbf|.mvt],
POST /tiles/{source}/cache/clear.

The tile endpoint is the hottest path of the service. `tile_answer` holds its whole behaviour (one
engine call, then headers); the endpoint table's dispatcher (server/dispatch.py, below ASGI and inside
it) answers tile requests with it before FastAPI's router, and the table's FastAPI route with it too.
"""

from __future__ import annotations

import gzip
from typing import Annotated

from fastapi import Header, Path, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from geoengine.errors import GeoengineError, InvalidRequest
from geoengine.server.deps import require_scope
from geoengine.server.framing import NO_TILE, error_answer, tile_headers


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
    """The public base URL: Settings.public_url, else the request itself, with the forwarded host and
    prefix only when the peer is a trusted proxy (GEOENGINE_FORWARDED_ALLOW_IPS; see server/proxy.py,
    which also applies X-Forwarded-Proto to the request's scheme)."""
    settings = request.app.state.settings
    if settings.public_url:
        return settings.public_url.rstrip("/")
    fwd = request.scope.get("state", {}).get("forwarded") or {}
    netloc = fwd.get("host") or request.headers.get("host") or request.url.netloc
    prefix = (fwd.get("prefix") or request.scope.get("root_path") or "").rstrip("/")
    return f"{request.url.scheme}://{netloc}{prefix}"


# ------------------------------------------------------------------------------------ endpoints
def sources_doc(engine, base: str) -> dict:
    """GET /sources's document, as its response model writes it (the route and the hot path)."""
    doc = {"sources": [engine.tiles.entry(s.id, base) for s in engine.tiles.sources()]}
    return SourceList.model_validate(doc).model_dump(mode="json")


def tilejson_doc(engine, source: str, base: str) -> dict:
    """GET /tiles/{source}'s TileJSON document, as its response model writes it; NotFound for an
    unknown source."""
    return TileJSON.model_validate(engine.tiles.tilejson(source, base)).model_dump(mode="json")


def meta(engine, req) -> dict:
    """GET /sources (source None) or GET /tiles/{source} (TileJSON) for (source, base URL)."""
    source, base = req
    return sources_doc(engine, base) if source is None else tilejson_doc(engine, source, base)


_SOURCE = Path(description="An id returned by /sources")


def sources_params(request: Request):
    return None, base_url(request)


def tilejson_params(request: Request, source: Annotated[str, _SOURCE]):
    return source, base_url(request)


def clear_params(request: Request, source: Annotated[str, _SOURCE]) -> str:
    require_scope(request, "admin")
    return source


def clear(engine, source: str) -> dict:
    return {"cleared": engine.tiles.clear(source), "source": source}


SOURCES_DOC = {"summary": "List vector tile sources", "response_model": SourceList}
TILEJSON_DOC = {"summary": "TileJSON document of a source", "response_model": TileJSON,
                "responses": {404: {"description": "Unknown source"}}}
CLEAR_DOC = {"summary": "Clear the tile cache of a source", "response_model": CacheCleared,
             "description": "Needs a key with the `admin` scope (`geoengine keys create --scope admin`); "
             "counts against the key's non-tile pools.",
             "responses": {403: {"description": "The key lacks the admin scope"}, 404: {"description": "Unknown source"}}}


# -------------------------------------------------------------------------- the tile endpoint
def accepts_gzip(value: str | None) -> bool:
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


def _parse_int(name: str, text: str) -> int:
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        raise InvalidRequest.field(name, f"{name} must be an integer, got '{text}'")
    if len(digits) > 12:  # an integer, but beyond any zoom's range (2^22 columns at zoom 22)
        shown = text if len(text) <= 24 else text[:21] + "..."
        raise InvalidRequest.field(name, f"{name} is out of range (0 to 2^z - 1), got {shown}")
    return int(text)


def tile_answer(engine, source: str, z_text: str, x_text: str, y_text: str, accept_encoding: str | None,
                if_none_match: str | None) -> tuple[int, list, bytes]:
    """(status, raw headers, body) of a tile request: the whole behaviour of the endpoint."""
    try:
        if y_text.endswith((".pbf", ".mvt")):
            y_text = y_text[:-4]
        z, x, y = _parse_int("z", z_text), _parse_int("x", x_text), _parse_int("y", y_text)
        tile = engine.tiles.tile(source, z, x, y)
    except GeoengineError as exc:
        return error_answer(exc)
    if tile is None:
        return 204, NO_TILE, b""
    data, etag = tile.data, tile.etag
    encoded = tile.gzip
    if encoded and not accepts_gzip(accept_encoding):
        data, encoded = gzip.decompress(data), False
        etag = etag[:-1] + '-identity"'
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        return 304, tile_headers(tile.format, etag, None, False), b""
    return 200, tile_headers(tile.format, etag, len(data), encoded), data


def tile_params(
    source: Annotated[str, _SOURCE],
    z: Annotated[int, Path(ge=0, le=22, description="Zoom, 0 to 22")],
    x: Annotated[int, Path(ge=0, description="Column, 0 to 2^z - 1")],
    y: Annotated[str, Path(description="Row, 0 to 2^z - 1, optionally with a .pbf or .mvt suffix")],
    accept_encoding: Annotated[str | None, Header(include_in_schema=False)] = None,
    if_none_match: Annotated[str | None, Header(include_in_schema=False)] = None,
):
    """The tile route's parameters as documented (the fast dispatch answers every tile request itself)."""
    return source, str(z), str(x), y, accept_encoding, if_none_match


TILE_DOC = {
    "summary": "A vector tile", "response_class": Response,
    "responses": {
        200: {"description": "Vector tile (Content-Encoding gzip when stored compressed and accepted); "
                             "Cache-Control public, max-age=86400; ETag",
              "content": {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}}},
        204: {"description": "Valid coordinate without a tile"},
        304: {"description": "Not modified (If-None-Match matched the ETag)"},
        404: {"description": "Unknown source"},
    },
}
