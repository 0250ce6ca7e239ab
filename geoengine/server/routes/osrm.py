"""The OSRM dialect (docs/osrm.md): `GET /{service}/v1/{profile}/{coordinates}` for route, table, match,
nearest and trip, with OSRM's query options and response shapes. Thin: one dialect call
(geoengine.dialects.osrm.run) in the thread pool; its errors are OSRM's `{code, message}` bodies with
HTTP 400 (docs/errors.md). One entry of the endpoint table (server/endpoints.py) with one FastAPI route
per service; a two-coordinate route or a nearest runs on the event loop (`inline`), the rest in the
thread pool."""

from __future__ import annotations

from fastapi import Request

from geoengine.dialects import osrm as O
from geoengine.server.framing import reply_answer
from geoengine.server.routes import json_responses, query_param

TAG = "OSRM dialect"
SERVICES = O.SERVICES

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


def inline(req) -> bool:
    """Whether a request is cheap enough for the event loop (as a point-to-point POST /route is): a
    route between two coordinates without alternatives, or a nearest. The rest go to the thread pool."""
    service, _version, _profile, coordinates, query = req
    if service == "nearest":
        return True
    return (service == "route" and coordinates.count(";") == 1
            and query.get("alternatives", "false") in ("false", "0"))


def call(state, req) -> tuple:
    """(service, version, profile, coordinates, query) answered: the document or OSRM's error."""
    service, *rest = req
    return reply_answer(O.run(service, state.engine, *rest))


def error_answer(exc, req) -> tuple:
    """The thread pool's timeout as OSRM's {code, message}."""
    return reply_answer(O.OsrmError.of(exc, req[0]).reply())


def quota(path: str) -> str:
    """nearest is no routing request; the other services are (the entry's quota class)."""
    return "non_tile" if path.startswith("/nearest/") else "routing"


def unauthorized(path: str) -> bool:
    """/table, the matrix's twin: a missing key is a 401, as on /matrix."""
    return path.startswith("/table/")


def params(service: str):
    """The FastAPI parse step of one service's route."""
    def parse(request: Request, version: str, profile: str, coordinates: str):
        return service, version, profile, coordinates, dict(request.query_params)

    return parse


def doc(service: str) -> dict:
    return dict(
        summary=_SUMMARIES[service],
        description="`profile`: driving, walking, cycling, car, foot, bike or a costing name. `coordinates`: "
        "`lon,lat;lon,lat...`, `polyline(...)` or `polyline6(...)`, optionally with `.json`. See docs/osrm.md.",
        responses=json_responses("code Ok", _OK, "OSRM error (HTTP 400 for every OSRM code)", ERROR_SCHEMA),
        openapi_extra={"parameters": [query_param(p, _DESCRIPTIONS.get(p, "")) for p in sorted(O.OPTIONS[service])]})
