"""The request rules the models' own JSON schema cannot carry, added to the OpenAPI document so that it
states what the server enforces: cross-field rules (oneOf / dependentRequired / if-then, OpenAPI 3.1 =
JSON Schema 2020-12), patterns for the string grammars the server parses (language tags, comma lists,
tile rows, OSRM coordinates and options), and the query form of Valhalla's GET actions.

What no schema can say is listed in `UNEXPRESSIBLE` (and docs/errors.md): the server answers such a
request 400 naming the rule, and the in-suite schemathesis run (tests/api) accepts that 400 for
schema-valid data only when its detail names one of these rules.

`tighten(schema, settings)` is called once when the document is first built (server/app.py); a
component it expects but does not find is an error, so a renamed model cannot silently drop a rule.
"""

from __future__ import annotations

from typing import Any

from geoengine.dialects import osrm as O
from geoengine.narrative.locales import LANGUAGE_PATTERN
from geoengine.services.models import ENDPOINT_COSTINGS

#: rules the server enforces that JSON Schema cannot state (they depend on a decoded value, on the length
#: of another field, or on the bundle); each is a 400 (OSRM: its InvalidOptions/InvalidValue) whose
#: detail contains the given text. tests/api accepts 400 on schema-valid data only for these.
UNEXPRESSIBLE: dict[str, str] = {
    "matrix cells": "cells;",  # sources x targets <= GEOENGINE matrix cell limit: a product of two lengths
    "encoded polyline point count and range": "encoded_polyline",  # known only after decoding
    "OSRM polyline coordinates": "coordinates:",
    "OSRM per-coordinate lists": "elements but there are",  # bearings/radiuses/... count = coordinates
    "OSRM indices": "is outside 0..",  # sources/destinations/waypoints index < coordinate count
    "OSRM waypoints order": "waypoints must be increasing",
    "OSRM timestamps order": "timestamps must be monotonically increasing",
    "OSRM size limits": "service takes at most",  # coordinates per service, known after parsing
    "OSRM polyline point count": "service needs at least",  # a polyline's points are known after decoding
    "OSRM polyline coordinate range": "is outside longitude -180..180",  # decimal pairs: the pattern says
    "search proximity bias": "lat and lon must be given together",  # no rule across query parameters
    "search bbox order": "with -180 <= min_lon",  # min <= max inside one string
    # x and y below 2^z: the spec's parameter range (400), not a JSON Schema bound (it depends on z)
    "tile column/row at its zoom": "at zoom",
    "trip times": "the trip's times fall outside",  # date_time plus waiting_secs along the route
    "elevation interval per leg": "elevation_interval",
    "resampled elevation size": "resampling gives",
    "expansion size": "the expansion has",
    "OSRM trip roundtrip with source/destination": "is supported with",  # across query parameters
    "OSRM exclude classes of the profile": "profile's classes",  # the query's classes depend on the path
    "reverse radius": "radius must be above 0 and at most",  # a number range inside '2km' / '500m'
    # the search filters name what the bundle knows: a country code of ISO 3166-1 (not any two letters),
    # a category of the vocabulary (a preset id, a tag or a category word in one of seven languages)
    "search countries known to ISO 3166-1": "comma-separated ISO 3166-1 alpha-2 codes such as",
    "search categories of the vocabulary": "is not a category",
    # Photon's rules across or inside its parameters (its {"message"} body): lat and lon together, the
    # four numbers of bbox and their ranges, the osm_tag grammar (docs/geocoding.md)
    "Photon lat and lon together": "Missing parameter 'l",
    "Photon bbox numbers": "Invalid number of supplied coordinates for parameter 'bbox'",
    "Photon bbox ranges": "Invalid bounds for parameter 'bbox'",
    "Photon osm_tag grammar": "Invalid format for osm_tag parameter.",

}

_LON = r"-?(180(\.0+)?|(1[0-7][0-9]|[0-9]{1,2})(\.[0-9]+)?)"
_LAT = r"-?(90(\.0+)?|[0-8]?[0-9](\.[0-9]+)?)"
_NUM = r"[0-9]+(\.[0-9]+)?"
_POSITIVE = r"([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)"
_BEARING = r"(360(\.0+)?|(3[0-5][0-9]|[12]?[0-9]{1,2})(\.[0-9]+)?),(180(\.0+)?|(1[0-7][0-9]|[0-9]{1,2})(\.[0-9]+)?)"
_VALUE = r"[_-~]{0,6}[?-^]"  # one encoded number: continuation characters, then a final one


def _polyline(min_points: int) -> str:
    """An encoded polyline of at least `min_points` (lat, lon) points (their range: UNEXPRESSIBLE)."""
    return rf"({_VALUE}{_VALUE}){{{min_points},}}"



def _osrm_coordinates(service: str) -> str:
    """The coordinate grammar with the service's count bounds (route, match, trip: at least 2; nearest: 1;
    at most osrm-routed's default limits, O.MAX_LOCATIONS)."""
    pair = f"{_LON},{_LAT}"
    low = {"route": 2, "match": 2, "trip": 2}.get(service, 1)
    more = f"{{{low - 1},{O.MAX_LOCATIONS[service] - 1}}}"
    return rf"^({pair}(;{pair}){more}|polyline6?\({_polyline(low)}\))(\.json)?$"


def _list(item: str, sep: str = ";") -> str:
    return rf"^({item})({sep}({item}))*$"


def _osrm_option_patterns(service: str) -> dict[str, dict[str, Any]]:
    enum = lambda *v: {"type": "string", "enum": list(v)}  # noqa: E731
    pat = lambda p: {"type": "string", "pattern": p}  # noqa: E731
    annotations = ("duration", "distance") if service == "table" else O.ANNOTATIONS
    ann_item = "|".join(annotations)
    ann = _list(ann_item, ",") if service == "table" else rf"^(true|false|({ann_item})(,({ann_item}))*)$"
    return {
        "radiuses": pat(_list(rf"|unlimited|{_NUM}")),
        "bearings": pat(_list(rf"|{_BEARING}")),
        "approaches": pat(_list("|curb|opposite|unrestricted")),
        "hints": pat(r"^[^;]*(;[^;]*)*$"),
        **{name: enum(*words) for name, words in O.CHOICES.items()},
        "exclude": pat(r"^((toll|motorway|ferry)(,(toll|motorway|ferry))*)?$"),
        "annotations": pat(ann),
        "alternatives": pat(r"^(true|false|[0-9]{1,6})$"),
        "waypoints": pat(r"^[0-9]{1,6}(;[0-9]{1,6})*$"),
        "sources": pat(r"^(all|[0-9]{1,6}(;[0-9]{1,6})*)$"),
        "destinations": pat(r"^(all|[0-9]{1,6}(;[0-9]{1,6})*)$"),
        "fallback_speed": pat(rf"^{_POSITIVE}$"),
        "scale_factor": pat(rf"^{_POSITIVE}$"),
        "number": pat(r"^(100|[1-9][0-9]?)$"),
        "timestamps": pat(_list(r"[0-9]{1,12}")),
    }


def _non_null(name: str) -> dict:
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


def _exactly_one(*names: str) -> dict:
    return {"oneOf": [_non_null(n) for n in names]}


def tighten(schema: dict, settings) -> dict:
    comps = schema["components"]["schemas"]

    def comp(name: str) -> dict:
        if name not in comps:
            raise KeyError(f"OpenAPI component {name!r} is gone: update geoengine/server/openapi.py")
        return comps[name]

    # -- shape xor encoded_polyline (map matching, Valhalla trace_*, elevation, height) ------------------
    for name in ("MapMatchRequest", "TraceRequest", "ElevationRequest", "HeightRequest"):
        c = comp(name)
        c["allOf"] = [*c.get("allOf", []), _exactly_one("shape", "encoded_polyline")]
        least = 2 if name in ("MapMatchRequest", "TraceRequest") else 1
        c["properties"]["encoded_polyline"] = {
            **c["properties"]["encoded_polyline"],
            "anyOf": [{"type": "string", "pattern": rf"^{_polyline(least)}$"}, {"type": "null"}]}
    # Valhalla's trace_options: ours (unknown keys refused) plus Valhalla's accepted-and-ignored ones
    from geoengine.dialects.valhalla import VALHALLA_ONLY_TRACE_OPTIONS
    from geoengine.services.matching import MAX_SHAPE_POINTS

    ours = comp("TraceOptions")
    comp("TraceRequest")["properties"]["trace_options"]["anyOf"] = [
        {"type": "object", "additionalProperties": False,
         "properties": {**ours["properties"], **{k: {} for k in VALHALLA_ONLY_TRACE_OPTIONS}}},
        {"type": "null"}]
    for name in ("MapMatchRequest", "TraceRequest"):
        shape = comp(name)["properties"]["shape"]
        for alt in shape["anyOf"]:
            if alt.get("type") == "array":
                alt.update(minItems=2, maxItems=MAX_SHAPE_POINTS)
    for name in ("ElevationRequest", "HeightRequest"):
        for alt in comp(name)["properties"]["shape"]["anyOf"]:
            if alt.get("type") == "array":
                alt["minItems"] = 1
                if name == "ElevationRequest":
                    alt["maxItems"] = settings.elevation_max_points

    # -- isochrone contours: exactly one of time and distance; expansion: per action -----------------------
    comp("Contour").update(_exactly_one("time", "distance"))
    comp("ExpansionContour").update(_exactly_one("time", "distance"))
    ref = "#/components/schemas/ExpansionContour"
    same_metric = {"anyOf": [{"items": _non_null("time")}, {"items": _non_null("distance")}]}
    comp("ExpansionRequest")["allOf"] = [
        {"if": {"properties": {"action": {"const": "isochrone"}}},
         "then": {"required": ["contours"],
                  "properties": {"contours": {"type": "array", "minItems": 1, "items": {"$ref": ref},
                                              **same_metric}}}},
        {"if": {"properties": {"action": {"const": "route"}}},
         "then": {"properties": {"locations": {"minItems": 2}}}},
    ]

    # -- language tags (route/matrix/... directions_options, directions) ---------------------------------
    comp("DirectionsOptions")["properties"]["language"]["pattern"] = LANGUAGE_PATTERN
    comp("DirectionsRequest")["properties"]["language"]["pattern"] = LANGUAGE_PATTERN

    # -- date_time: {type 0..3, value 'YYYY-MM-DDTHH:MM' 1900..2199, required for types 1..3} --------------
    from geoengine.services.route_options import date_time_schema

    for name in ("RouteRequest", "DirectionsRequest", "MatrixRequest", "SourcesToTargetsRequest",
                 "OptimisedRouteRequest", "IsochroneRequest"):
        props = comp(name)["properties"]
        if "date_time" in props:  # /matrix departs: no arrive_by
            types = (0, 1, 3) if name in ("MatrixRequest", "SourcesToTargetsRequest") else (0, 1, 2, 3)
            props["date_time"] = {"anyOf": [date_time_schema(types), {"type": "null"}], "title": "Date Time"}

    # -- costing_options: the option names and bounds of the request's costing (flat, or under its key) ---
    from geoengine.costing.schema import request_options_rule

    for name, c in comps.items():
        props = c.get("properties", {})
        if "costing_options" in props and "costing" in props and "enum" in props["costing"]:
            # /matrix also takes its departure as a costing option (where the spec puts it)
            extra = ({"date_time": props["date_time"]["anyOf"][0]}
                     if name in ("MatrixRequest", "SourcesToTargetsRequest") else {})
            rule = request_options_rule(props["costing"]["enum"], props["costing"].get("default", "auto"), extra)
            c["allOf"] = [*c.get("allOf", []), rule]

    # -- expansion properties ---------------------------------------------------------------------------------
    from geoengine.dialects.valhalla import _PLURAL, EXPANSION_PROPERTIES

    comp("ExpansionRequest")["properties"]["expansion_properties"]["items"] = {
        "type": "string", "enum": sorted({*EXPANSION_PROPERTIES, *_PLURAL})}

    _fix_constraint_names(schema)

    # -- paths: query and path parameters ------------------------------------------------------------------
    paths = schema["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            _tighten_params(path, method, op.get("parameters", []))
    _shared_paths(paths)
    return schema


def _shared_paths(paths: dict) -> None:
    """GET /search and GET /status are also Nominatim's (with its `format` parameter): one operation per
    path and method is all OpenAPI has, so the spec's operation stays and names the dialect, listing
    Nominatim's parameters under `x-nominatim-parameters` (docs/geocoding.md)."""
    from geoengine.server.routes.nominatim import NOMINATIM_SEARCH_PARAMETERS, NOMINATIM_STATUS_PARAMETERS

    for path, params, what in (
            ("/search", NOMINATIM_SEARCH_PARAMETERS, "Nominatim's /search (format json, jsonv2, geojson or "
             "geocodejson): its parameters and answers, as GET /reverse and /lookup"),
            ("/status", NOMINATIM_STATUS_PARAMETERS, "Nominatim's /status (format text: `OK`; json: {status, "
             "message, data_updated, software_version, database_version})")):
        op = paths.get(path, {}).get("get")
        if op is None:
            raise KeyError(f"OpenAPI operation GET {path} is gone: update geoengine/server/openapi.py")
        op["description"] = (op.get("description") or op.get("summary", "")) + (
            f"\n\nWith a `format` parameter this path answers {what}; see docs/geocoding.md.")
        op["x-nominatim-parameters"] = params


def _fix_constraint_names(node) -> None:
    """pydantic leaves `ge`/`le` (not JSON Schema) where a validator-annotated int is optional: rename."""
    names = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
    if isinstance(node, dict):
        if "type" in node:
            for bad, good in names.items():
                if bad in node and not isinstance(node[bad], dict):
                    node[good] = node.pop(bad)
        for v in node.values():
            _fix_constraint_names(v)
    elif isinstance(node, list):
        for v in node:
            _fix_constraint_names(v)


# what `search.requests.parse_types` accepts: blank is every type; items are trimmed and empty ones
# skipped, but one must be named
_TYPES_PATTERN = r"^\s*$|^(\s*,)*\s*(place|poi)\s*(,\s*((place|poi)\s*)?)*$"
def _tighten_params(path: str, method: str, params: list[dict]) -> None:
    by_name = {p["name"]: p for p in params}
    if path in ("/search", "/search/reverse") and "types" in by_name:
        by_name["types"]["schema"] = {"type": "string", "pattern": _TYPES_PATTERN,
                                      "description": by_name["types"].get("description", "")}
    if path == "/search" and "bbox" in by_name:
        # empty is no bbox (as for an absent parameter: `search.requests.parse_bbox`)
        by_name["bbox"]["schema"] = {"type": "string", "pattern": rf"^({_LON},{_LAT},{_LON},{_LAT})?$",
                                     "description": by_name["bbox"].get("description", "")}
    if path.startswith("/tiles/{source}/{z}/{x}/{y}"):
        by_name["y"]["schema"] = {"type": "string", "pattern": r"^[0-9]{1,7}(\.(pbf|mvt))?$",
                                  "description": "Row, 0 to 2^z - 1 (a row outside is 404, as a missing tile)"}
        by_name["x"]["schema"]["maximum"] = 2**22 - 1
    service = path.split("/")[1] if path.count("{") == 3 and path.endswith("{coordinates}") else None
    if service in O.SERVICES:
        by_name["version"]["schema"] = {"type": "string", "enum": ["v1"]}
        endpoint = {"table": "matrix", "match": "map_match", "trip": "optimised_route"}.get(service, "route")
        by_name["profile"]["schema"] = {"type": "string", "enum": sorted(
            p for p, c in O.PROFILES.items() if c in ENDPOINT_COSTINGS[endpoint])}
        by_name["coordinates"]["schema"] = {"type": "string", "pattern": _osrm_coordinates(service)}
        pats = _osrm_option_patterns(service)
        for name, p in by_name.items():
            if p["in"] == "query" and name in pats:
                p["schema"] = pats[name]
