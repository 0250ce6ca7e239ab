"""Nominatim's API at Nominatim's paths (docs/geocoding.md): GET /reverse, /lookup and /details, and GET
/search and /status when the request carries Nominatim's `format` parameter. Thin: the query parameters
and the Accept-Language header go to geoengine.dialects.nominatim, whose Reply is sent as it is.

/search and /status are also the spec's search and Valhalla's status: the table's routes of this dialect
(server/endpoints.py) come first and take a request of those paths only with a `format` parameter
(`takes`); any other goes on to the route that follows for the same path. The fast dispatch answers
GET /reverse and /search with `format` itself (`call`).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import Request

from geoengine.dialects import nominatim as N
from geoengine.server.framing import body_answer, reply_answer
from geoengine.server.routes import json_responses
from geoengine.server.routes import query_param as _string

TAG = "Nominatim dialect"
HIDDEN = {"include_in_schema": False}

ENDPOINTS = {"/search": N.search, "/reverse": N.reverse, "/lookup": N.lookup, "/details": N.details,
             "/status": N.status}
CACHED_PATHS = ("/search", "/reverse", "/lookup")  # answers kept in the app's answer cache (server/answers.py)
_JSON = (b"content-type", N.JSON.encode())


def _takes(path: str, query_string: bytes) -> bool:
    """Whether a request of `path` is this dialect's: /search and /status only with Nominatim's `format`
    parameter (the dialect's switch)."""
    if path not in ("/search", "/status"):
        return True
    return b"format" in query_string and any(k == "format" for k, _ in pairs(query_string))


def pairs(query_string: bytes) -> list[tuple[str, str]]:
    """The query string's (name, value) pairs, in order, blank values kept (the dialects' parameters)."""
    return parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)


def header(headers, name: bytes) -> bytes | None:
    for k, v in headers:
        if k == name:
            return v
    return None


def takes(scope) -> bool:
    """Whether a request is this dialect's: /reverse, /lookup and /details always, /search and /status
    with `format`."""
    return _takes(_path(scope), scope["query_string"])


def _path(scope) -> str:
    """The path as the router matches it (without the root path a proxy mounts the service under)."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def request(request: Request) -> tuple[str, bytes, bytes | None]:
    """(path, query string, Accept-Language) of a request this dialect answers."""
    scope = request.scope
    return _path(scope), scope["query_string"], header(scope["headers"], b"accept-language")


def parse(req) -> tuple[str, bytes, bytes | None] | None:
    """The fast parse step (the table's Request): `request`'s triple, for GET /reverse, and /search with
    `format`."""
    path = req.params[0]
    return (path, req.query, header(req.headers, b"accept-language")) if _takes(path, req.query) else None


def call(state, req):
    """(path, query string, Accept-Language) of a Nominatim request answered (the routes and the fast
    dispatch), through the app's answer cache (server/answers.py): a 200 JSON answer is kept by path,
    query string and Accept-Language header (the only header the answer depends on)."""
    path, query_string, language = req
    engine = state.engine
    cache = state.answers if path in CACHED_PATHS else None
    key = query_string if language is None else query_string + b"\x00" + language
    body = None if cache is None else cache.get(engine, "nominatim" + path, key)
    if body is not None:
        return body_answer(body, 200, _JSON)
    # the query parameters as Nominatim reads them: the last value of a repeated one
    reply = ENDPOINTS[path](engine, dict(pairs(query_string)), None if language is None else language.decode("latin-1"))
    answer = reply_answer(reply, _JSON)
    if cache is not None and reply.status == 200:
        cache.put(engine, "nominatim" + path, key, answer[2])
    return answer


_NUMBER = {"type": "number"}
_FORMAT = _string("format", "json, jsonv2, geojson or geocodejson (Nominatim's xml is not offered)", required=True,
                  enum=list(N.FORMATS))
_COMMON = [
    _string("accept-language", "Preferred languages (as the Accept-Language header, which is read when this "
            "is absent): names and the address in the first available"),
    _string("addressdetails", "1 adds `address` (Nominatim's keys); any value but 0 is true"),
    _string("extratags", "1 adds `extratags`"), _string("namedetails", "1 adds `namedetails`"),
    _string("polygon_geojson", "1 adds `geojson`: the point where the bundle holds no polygon (polygon_text, "
            "polygon_kml and polygon_svg are taken too, one polygon output at a time)"),
]
_SEARCH_PARAMS = [
    _string("q", "Free-form query (not together with the structured fields)"),
    *[_string(k, f"Structured query field {k}") for k in N.STRUCTURED],
    _string("limit", "Number of results, clamped to 1..50 (default 10)", pattern=r"^[+-]?[0-9]+$"),
    _string("viewbox", "x1,y1,x2,y2: preferred area (with bounded=1: results inside only)"),
    _string("bounded", "1 keeps results inside the viewbox"),
    _string("countrycodes", "Comma-separated ISO 3166-1 alpha-2 codes; other values are ignored"),
    _string("layer", "Comma-separated: address, poi, railway, natural, manmade (any case)"),
    _string("featureType", "country, state, city or settlement (any value keeps the address layer only)"),
    _string("exclude_place_ids", "Comma-separated place ids or OSM ids (N123, W45, R6) to leave out"),
    _string("dedupe", "0 keeps duplicates (default 1)"),
]
_RESULT = {"type": "object", "additionalProperties": True,
           "description": "place_id, licence, osm_type, osm_id, lat, lon, class (json) or category (jsonv2), type, "
                          "place_rank, importance, addresstype, name, display_name, address, boundingbox"}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}}}}
_ANY_ANSWER = {"anyOf": [{"type": "array", "items": _RESULT}, {"type": "object", "additionalProperties": True}]}


def _responses(ok_description: str, not_found: bool = False) -> dict:
    out = json_responses(ok_description, _ANY_ANSWER, "Nominatim's error object", _ERROR)
    if not_found:
        out[404] = {"description": "No place with that id", "content": {"application/json": {"schema": _ERROR}}}
    return out


REVERSE_DOC = dict(
    summary="Nominatim reverse: the place at a point, at a zoom's detail",
    description="Nominatim's /reverse: `lat`, `lon`, `zoom` (0-18, clamped; 18 = the address, 16 = the street, "
    "10 = the city, 3 = the country), `layer` (address, poi, railway, natural, manmade). One object (json/jsonv2) or a FeatureCollection, or "
    "`{\"error\": \"Unable to geocode\"}`. See docs/geocoding.md.",
    responses=_responses("The place (addressdetails default 1)"),
    openapi_extra={"parameters": [
        _string("lat", "Latitude (outside -90..90: `{\"error\": \"Unable to geocode\"}`, as Nominatim)",
                _NUMBER, True),
        _string("lon", "Longitude", _NUMBER, True), _FORMAT,
        _string("zoom", "0-18, clamped (default 18)", {"type": "integer"}), *_COMMON]})
LOOKUP_DOC = dict(
    summary="Nominatim lookup: places by OSM id",
    description="Nominatim's /lookup: `osm_ids` N123,W456,R789 (at most 50; malformed ids are skipped).",
    responses=_responses("The places found, in the order asked"),
    openapi_extra={"parameters": [_string("osm_ids", "Comma-separated OSM ids: N123,W456,R789", required=True),
                                  _FORMAT, *_COMMON]})
DETAILS_DOC = dict(
    summary="Nominatim details: one place with its names and address",
    description="Nominatim's /details: `place_id` (a place_id of a result), or instead of it `osmtype` (N, W, R) "
    "and `osmid` (`/details?osmtype=N&osmid=123`).",
    responses=_responses("The place", not_found=True),
    openapi_extra={"parameters": [
        _string("place_id", "A result's place_id", required=True, pattern=r"^[+-]?0*[1-9][0-9]{0,17}$"),
        {"name": "format", "in": "query", "required": False, "schema": {"type": "string", "enum": ["json"]}},
        _string("accept-language", "Preferred languages"), _string("polygon_geojson", "1 adds the geometry")]})

# /search and /status: the shared paths (documented by the spec's /search and Valhalla's /status, whose
# descriptions name this dialect; openapi.py adds `x-nominatim-parameters`)
NOMINATIM_SEARCH_PARAMETERS = [_FORMAT, *_SEARCH_PARAMS, *_COMMON]
NOMINATIM_STATUS_PARAMETERS = [{"name": "format", "in": "query", "required": True,
                                "schema": {"type": "string", "enum": ["text", "json"]}}]
