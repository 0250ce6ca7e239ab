"""Photon's API under /photon (docs/geocoding.md): GET /photon/api and GET /photon/reverse. Thin: the query
string's pairs (in order: Photon repeats osm_tag and layer) and the Accept-Language header go to
geoengine.dialects.photon; its (status, document) is sent as JSON."""

from __future__ import annotations

from geoengine.dialects import photon as P
from geoengine.server.framing import reply_answer
from geoengine.server.routes import json_responses
from geoengine.server.routes import query_param as _p
from geoengine.server.routes.nominatim import pairs

TAG = "Photon dialect"


def call(state, req):
    """A Photon request, (path, query string, Accept-Language) as the Nominatim dialect's, answered."""
    path, query_string, language = req
    fn = P.search if path.rstrip("/") == "/photon/api" else P.reverse
    return reply_answer(fn(state.engine, pairs(query_string), None if language is None else language.decode("latin-1")))


_FEATURES = {"type": "object", "required": ["type", "features"], "properties": {
    "type": {"type": "string", "enum": ["FeatureCollection"]},
    "features": {"type": "array", "items": {"type": "object", "required": ["type", "properties", "geometry"],
                                            "properties": {"properties": {
                                                "type": "object",
                                                "description": "osm_id, osm_type (N/W/R), osm_key, osm_value, type, "
                                                "housenumber, name, street, locality, district, city, county, state, "
                                                "country, postcode, countrycode, extent"}}}}}}
_ERROR = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
_RESPONSES = json_responses("Photon's GeoJSON FeatureCollection", _FEATURES, "Photon's error: {\"message\": ...}",
                            _ERROR)
_LAT = {"type": "number", "minimum": -90, "maximum": 90}
_LON = {"type": "number", "minimum": -180, "maximum": 180}
_BASE = [
    _p("lang", "Language of names: default, en, de, fr, it (else the Accept-Language header)",
       {"type": "string", "enum": ["default", *P.LANGUAGES]}),
    _p("limit", "Number of results, clamped to 1..50", {"type": "integer"}),
    _p("osm_tag", "key, key:value, !key, key:!value, :value (repeatable)", {"type": "string"}),
    _p("layer", "house, street, locality, district, city, county, state, country, other",
       {"type": "string", "enum": list(P.LAYERS)}),
]

SEARCH_DOC = dict(
    summary="Photon search",
    description="Photon's /api: `q`, an optional location bias (`lat` and `lon` together, "
    "`location_bias_scale` 0-1, `zoom`), `bbox` minLon,minLat,maxLon,maxLat, `osm_tag`, `layer`, `lang`, `limit`. "
    "Unknown parameters are a 400, as in Photon.",
    responses=_RESPONSES,
    openapi_extra={"parameters": [
        _p("q", "Search text", {"type": "string", "pattern": r"\S", "maxLength": 255}, required=True),
        _p("lat", "Latitude of the location bias (with lon)", _LAT),
        _p("lon", "Longitude of the location bias (with lat)", _LON),
        _p("location_bias_scale", "0-1: how much prominence counts against distance", {"type": "number"}),
        _p("zoom", "Map zoom of the bias (0-18, clamped)", {"type": "integer"}),
        _p("bbox", "minLon,minLat,maxLon,maxLat", {"type": "string"}),
        *_BASE]})
REVERSE_DOC = dict(
    summary="Photon reverse",
    description="Photon's /reverse: `lat` and `lon` (required), `radius` km, `limit`, `lang`, `osm_tag`, `layer`.",
    responses=_RESPONSES,
    openapi_extra={"parameters": [
        _p("lat", "Latitude", _LAT, required=True), _p("lon", "Longitude", _LON, required=True),
        _p("radius", "Search radius in km (above 0)", {"type": "number", "exclusiveMinimum": 0}), *_BASE]})
