"""The OSRM dialect (docs/osrm.md): `GET /{service}/v1/{profile}/{coordinates}` for route, table, match,
nearest and trip, with OSRM's query options and response shapes. Thin: one dialect call
(geoengine.dialects.osrm.run, through `answer`) in the thread pool; its errors are OSRM's
`{code, message}` bodies with HTTP 400 (docs/errors.md). The hot path and the front door answer the
requests with a plain query string themselves, with the same `answer`: a two-coordinate route or a
nearest on the event loop (`inline`), the rest in the thread pool."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from geoengine.dialects import osrm as O
from geoengine.engine import Engine
from geoengine.errors import GeoengineError
from geoengine.server.deps import get_engine, run_engine

router = APIRouter(tags=["OSRM dialect"])

ERROR_SCHEMA = {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string", "example": "NoSegment",
                            "description": "InvalidUrl, InvalidService, InvalidVersion, InvalidOptions, InvalidQuery, "
                            "InvalidValue, NoSegment, TooBig, NoRoute, NoTable, NoMatch, NoTrips, NotImplemented"},
                   "message": {"type": "string"}},
}
_OK = {"type": "object", "required": ["code"], "properties": {"code": {"type": "string", "example": "Ok"}},
       "additionalProperties": True}

_DESCRIPTIONS = {
    "bearings": "{bearing},{range};... (0-360, 0-180) per coordinate, empty for none",
    "radiuses": "{radius};... metres per coordinate or 'unlimited' (snapping radius, clamped to 1-100)",
    "approaches": "curb|opposite|unrestricted;... per coordinate",
    "hints": "accepted and ignored", "generate_hints": "true (default) adds an empty hint to waypoints",
    "exclude": "comma-separated: toll, motorway, ferry", "snapping": "default|any (accepted)",
    "skip_waypoints": "true omits the waypoints", "steps": "true|false (default false)",
    "annotations": "true|false or a comma-separated list of duration, distance, speed, weight, datasources",
    "geometries": "polyline (default), polyline6, geojson", "overview": "simplified (default), full, false",
    "alternatives": "true|false|number (up to 3)", "continue_straight": "default|true|false",
    "waypoints": "indices of the coordinates that end legs (first and last included)",
    "sources": "indices or all", "destinations": "indices or all",
    "fallback_speed": "m/s: crow-fly estimates for unreachable pairs", "fallback_coordinate": "input|snapped",
    "scale_factor": "multiplies the durations", "number": "1-100 nearest segments",
    "timestamps": "seconds since the epoch per coordinate", "gaps": "split|ignore", "tidy": "true|false",
    "roundtrip": "true (default)|false", "source": "any|first", "destination": "any|last",
}
_SUMMARIES = {
    "route": "OSRM route: the fastest route through the coordinates in order",
    "table": "OSRM table: durations and distances between sources and destinations",
    "match": "OSRM match: a GPS trace matched to the roads",
    "nearest": "OSRM nearest: the nearest road segments to a coordinate",
    "trip": "OSRM trip: the coordinates visited in the best order",
}


def parse_path(path: str) -> tuple[str, str, str, str] | None:
    """(service, version, profile, coordinates) of a path this router serves, else None (the hot path
    and the front door: the path as the router matches it, already percent-decoded)."""
    parts = path.split("/")
    if len(parts) != 5 or parts[0] or parts[1] not in O.SERVICES or not (parts[2] and parts[3] and parts[4]):
        return None
    return parts[1], parts[2], parts[3], parts[4]


def answer(engine, service: str, version: str, profile: str, coordinates: str, query: dict) -> tuple[int, dict]:
    """(HTTP status, body) of one request: the service's document, or OSRM's `{code, message}`."""
    try:
        return 200, O.run(service, engine, version, profile, coordinates, query)
    except O.OsrmError as exc:
        return exc.status, exc.body()


def inline(service: str, coordinates: str, query: dict) -> bool:
    """Whether a request is cheap enough for the event loop (as a point-to-point POST /route is): a
    route between two coordinates without alternatives, or a nearest. The rest go to the thread pool."""
    if service == "nearest":
        return True
    return (service == "route" and coordinates.count(";") == 1
            and query.get("alternatives", "false") in ("false", "0"))


def _handler(service: str):
    async def handler(request: Request, version: str, profile: str, coordinates: str,
                      engine: Engine = Depends(get_engine)):
        query = dict(request.query_params)
        try:
            status, body = await run_engine(request, answer, engine, service, version, profile, coordinates, query)
        except GeoengineError as exc:  # the timeout of run_engine
            err = O.from_engine_error(exc, service)
            status, body = err.status, err.body()
        return body if status == 200 else JSONResponse(body, status_code=status)

    handler.__name__ = f"osrm_{service}"
    return handler


for _service in O.SERVICES:
    router.add_api_route(
        f"/{_service}/{{version}}/{{profile}}/{{coordinates}}", _handler(_service), methods=["GET"],
        summary=_SUMMARIES[_service],
        description="`profile`: driving, walking, cycling, car, foot, bike or a costing name. `coordinates`: "
        "`lon,lat;lon,lat...`, `polyline(...)` or `polyline6(...)`, optionally with `.json`. See docs/osrm.md.",
        responses={200: {"description": "code Ok", "content": {"application/json": {"schema": _OK}}},
                   400: {"description": "OSRM error (HTTP 400 for every OSRM code)",
                         "content": {"application/json": {"schema": ERROR_SCHEMA}}}},
        openapi_extra={"parameters": [{"name": p, "in": "query", "required": False, "schema": {"type": "string"},
                                       "description": _DESCRIPTIONS.get(p, "")}
                                      for p in sorted(O.OPTIONS[_service])]},
    )
