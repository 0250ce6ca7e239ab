"""The OSRM HTTP API (v1) over the engine: route, table, match, nearest and trip.

`/{service}/v1/{profile}/{coordinates}?option=value...` is parsed here into the engine's request models;
the engine's answers are put in OSRM's response shapes (`code`, `routes`, `waypoints`, legs, steps with
`maneuver`, `intersections`) by geoengine/services/osrm_steps.py, which computes them from the typed
Route (bearings, junction arms, annotations, street names). Errors are OSRM's: HTTP 400 with `{"code", "message"}` (see
docs/osrm.md for the mapping of every field and docs/errors.md for the error shape).

No HTTP here: `geoengine/server/routes/osrm.py` calls `run(service, engine, version, profile,
coordinates, query)` and sends the `Reply` it gives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from geoengine.costing.schema import COSTINGS
from geoengine.dialects import DialectError, Reply, replies
from geoengine.errors import GeoengineError, InvalidRequest, NotFound, Unprocessable, Unsnappable
from geoengine.geo import decode_polyline
from geoengine.services.models import PROFILE_COSTING, Location
from geoengine.services.osrm_steps import (
    matchings_and_tracepoints,
    nearest_waypoints,
    route_object,
    table_document,
    waypoints,
)

SERVICES = ("route", "table", "match", "nearest", "trip")

# OSRM profile names (and the car/foot/bike aliases of osrm-backend's profiles) -> costing. Every costing
# name is also a profile of its own.
PROFILES: dict[str, str] = {
    **PROFILE_COSTING, "car": "auto", "foot": "pedestrian", "bike": "bicycle", **{c: c for c in COSTINGS},
}
_MODE = {"pedestrian": "walking", "bicycle": "cycling"}

# osrm-routed's default request size limits (--max-viaroute-size, --max-table-size, ...).
MAX_LOCATIONS = {"route": 500, "table": 100, "match": 100, "nearest": 1, "trip": 100}
MAX_NEAREST = 100
MAX_ALTERNATIVES = 3

_GENERAL = {"bearings", "radiuses", "generate_hints", "hints", "approaches", "exclude", "snapping",
            "skip_waypoints"}
_ROUTE_LIKE = {"steps", "annotations", "geometries", "overview"}
OPTIONS: dict[str, set[str]] = {
    "route": _GENERAL | _ROUTE_LIKE | {"alternatives", "continue_straight", "waypoints"},
    "table": _GENERAL | {"sources", "destinations", "annotations", "fallback_speed", "fallback_coordinate",
                         "scale_factor"},
    "match": _GENERAL | _ROUTE_LIKE | {"timestamps", "gaps", "tidy", "waypoints"},
    "nearest": _GENERAL | {"number"},
    "trip": _GENERAL | _ROUTE_LIKE | {"roundtrip", "source", "destination"},
}
ANNOTATIONS = ("duration", "distance", "speed", "weight", "datasources", "nodes")
# the options that take one of a few words, the default first (parse_query, and the OpenAPI document's
# enums: server/openapi.py); "true"/"false" ones are parsed to booleans
CHOICES: dict[str, tuple[str, ...]] = {
    "generate_hints": ("true", "false"), "skip_waypoints": ("false", "true"), "snapping": ("default", "any"),
    "steps": ("false", "true"), "geometries": ("polyline", "polyline6", "geojson"),
    "overview": ("simplified", "full", "false"), "continue_straight": ("default", "true", "false"),
    "fallback_coordinate": ("input", "snapped"), "gaps": ("split", "ignore"), "tidy": ("false", "true"),
    "roundtrip": ("true", "false"), "source": ("any", "first"), "destination": ("any", "last"),
}
# exclude classes -> the costing option that avoids them (0 = avoid as far as possible)
_EXCLUDE = {"toll": "use_tolls", "motorway": "use_highways", "ferry": "use_ferry"}


class OsrmError(DialectError):
    """An OSRM error: HTTP `status` (400 unless the engine is unavailable or timed out) and the body
    `{"code": code, "message": message}`."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message, status)
        self.code = code

    def body(self) -> dict:
        return {"code": self.code, "message": self.message}

    @classmethod
    def of(cls, exc: GeoengineError, service: str = "route", *_args) -> OsrmError:
        """A domain error of the engine -> the OSRM code a client of that service expects."""
        detail = exc.detail if getattr(exc, "detail", None) else str(exc)
        if isinstance(exc, Unsnappable):
            return cls("NoSegment", detail)
        if isinstance(exc, Unprocessable):  # NoRoute among them
            return cls(_NO_RESULT.get(service, "NoRoute"), detail)
        if isinstance(exc, InvalidRequest):
            return cls("InvalidValue", detail)
        if isinstance(exc, NotFound):
            return cls("InvalidUrl", detail)
        # 5xx (Unavailable, BackendTimeout, ...): not the client's fault, keep the status
        code = {503: "ServiceUnavailable", 504: "Timeout"}.get(exc.status, "InternalError")
        return cls(code, detail, exc.status if exc.status >= 500 else 400)


_NO_RESULT = {"route": "NoRoute", "table": "NoTable", "match": "NoMatch", "trip": "NoTrips", "nearest": "NoSegment"}


# ------------------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------------------
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")  # OSRM's coordinate numbers: no exponent, no inf/nan, no spaces
# the characters osrm-routed's URL grammar takes in the coordinates (its polyline and query characters); any
# other is InvalidUrl there, where a malformed coordinate made of these is InvalidQuery
_URL_CHARS = re.compile(r"[A-Za-z0-9_.\-\[\]{}@?|\\%~`^=,;:&()]*")


def parse_coordinates(text: str) -> np.ndarray:
    """`lon,lat;lon,lat...`, `polyline(...)` (precision 5) or `polyline6(...)`, with an optional `.json`
    suffix -> float64 array [n, 2] of (lon, lat). As osrm-routed: a character outside its URL grammar (a
    space, `+`) is InvalidUrl, a malformed coordinate InvalidQuery."""
    return np.array(coordinate_list(text), dtype=np.float64).reshape(-1, 2)


def coordinate_list(text: str) -> list:
    """`parse_coordinates` as a list of [lon, lat] float pairs, checked the same way (the route service
    reads them as Python floats: no array made for two points)."""
    if not _URL_CHARS.fullmatch(text):
        raise OsrmError("InvalidUrl", "the coordinates hold a character outside OSRM's URL grammar")
    if text.endswith(".json"):
        text = text[: -len(".json")]
    for prefix, precision in (("polyline6(", 6), ("polyline(", 5)):
        if text.startswith(prefix):
            if not text.endswith(")"):
                raise OsrmError("InvalidQuery", f"{prefix[:-1]}(...) is not closed")
            try:
                lat, lon = decode_polyline(text[len(prefix):-1], precision, field="coordinates")
            except InvalidRequest as exc:
                raise OsrmError("InvalidQuery", f"coordinates: {exc.detail}") from None
            out = np.column_stack([lon, lat]).astype(np.float64).tolist()
            break
    else:
        out = []
        decimal = _DECIMAL.fullmatch
        for i, pair in enumerate(text.split(";")):
            parts = pair.split(",")
            if len(parts) != 2 or not (decimal(parts[0]) and decimal(parts[1])):
                raise OsrmError("InvalidQuery", f"coordinate {i} ('{pair[:40]}') is not 'longitude,latitude'")
            out.append([float(parts[0]), float(parts[1])])
    if not out:
        raise OsrmError("InvalidQuery", "no coordinates")
    isfinite = math.isfinite
    if not all(isfinite(lon) and isfinite(lat) for lon, lat in out):
        raise OsrmError("InvalidValue", "coordinates must be finite numbers")
    for i, (lon, lat) in enumerate(out):
        if abs(lon) > 180 or abs(lat) > 90:
            raise OsrmError("InvalidValue", f"coordinate {i} ({lon:g},{lat:g}) is outside "
                            "longitude -180..180 / latitude -90..90")
    return out


def costing_of(profile: str) -> str:
    try:
        return PROFILES[profile]
    except KeyError:
        raise OsrmError("InvalidOptions", f"unknown profile '{profile}'; profiles: driving, walking, cycling, car, "
                        f"foot, bike and the costings {', '.join(COSTINGS)}") from None


_BOOLEAN = frozenset(name for name, words in CHOICES.items() if set(words) == {"true", "false"})
# parse_query's choice options per service, checked in CHOICES' order (not a set's: which of several bad
# options is reported must not depend on the interpreter's hash seed)
_CHOSEN = {service: tuple(name for name in CHOICES if name in options) for service, options in OPTIONS.items()}


def _choice(query: Mapping[str, str], name: str):
    """The option's word (its default when absent; a boolean for true/false options), or InvalidOptions."""
    words = CHOICES[name]
    value = query.get(name, words[0])
    if value not in words:
        raise OsrmError("InvalidOptions", f"{name} must be {', '.join(words[:-1])} or {words[-1]}, got '{value[:40]}'")
    return value == "true" if name in _BOOLEAN else value


def _per_location(name: str, value: str, n: int) -> list[str]:
    items = value.split(";")
    if len(items) != n:
        raise OsrmError("InvalidOptions", f"{name} has {len(items)} elements but there are {n} coordinates")
    return items


def _indices(name: str, value: str, n: int) -> list[int] | None:
    if value == "all":
        return None
    out = []
    for item in value.split(";"):
        try:
            k = int(item)
        except ValueError:
            raise OsrmError("InvalidOptions", f"{name}: '{item[:20]}' is not an index") from None
        if not 0 <= k < n:
            raise OsrmError("InvalidOptions", f"{name}: index {k} is outside 0..{n - 1}")
        out.append(k)
    return out


def parse_query(service: str, query: Mapping[str, str], n: int) -> dict[str, Any]:
    """Validate the query options of `service` for `n` coordinates; returns them parsed."""
    unknown = None if OPTIONS[service].issuperset(query) else sorted(set(query) - OPTIONS[service])
    if unknown:
        raise OsrmError("InvalidQuery", f"unknown option '{unknown[0]}' for the {service} service; options: "
                        f"{', '.join(sorted(OPTIONS[service]))}")
    q: dict[str, Any] = {"radius": [None] * n, "heading": [None] * n, "side": [None] * n}
    if "radiuses" in query:
        for i, r in enumerate(_per_location("radiuses", query["radiuses"], n)):
            if r in ("", "unlimited"):
                continue
            try:
                v = float(r)
                if not (v >= 0 and math.isfinite(v)):
                    raise ValueError
            except ValueError:
                raise OsrmError("InvalidOptions", f"radiuses: element {i} ('{r[:20]}') must be a number >= 0 "
                                "or 'unlimited'") from None
            q["radius"][i] = v
    if "bearings" in query:
        for i, b in enumerate(_per_location("bearings", query["bearings"], n)):
            if b == "":
                continue
            parts = b.split(",")
            try:
                if len(parts) != 2:
                    raise ValueError
                value, rng = float(parts[0]), float(parts[1])
                if not (0 <= value <= 360 and 0 <= rng <= 180):
                    raise ValueError
            except ValueError:
                raise OsrmError("InvalidOptions", f"bearings: element {i} ('{b[:20]}') must be "
                                "'{0..360},{0..180}'") from None
            q["heading"][i] = (value, rng)
    if "approaches" in query:
        for i, a in enumerate(_per_location("approaches", query["approaches"], n)):
            if a in ("", "unrestricted"):
                continue
            if a not in ("curb", "opposite"):
                raise OsrmError("InvalidOptions", f"approaches: element {i} must be curb, opposite or unrestricted")
            q["side"][i] = "same" if a == "curb" else "opposite"
    if "hints" in query:
        _per_location("hints", query["hints"], n)  # accepted (and ignored) when well-formed
    for name in _CHOSEN[service]:
        q[name] = _choice(query, name)
    q["exclude"] = [x for x in query.get("exclude", "").split(",") if x]
    for x in q["exclude"]:
        if x not in _EXCLUDE:
            raise OsrmError("InvalidValue", f"exclude: unknown class '{x[:20]}'; classes: {', '.join(_EXCLUDE)}")
    if service in ("route", "match", "trip", "table"):
        ann = query.get("annotations", "false" if service != "table" else "duration")
        if ann in ("true", "false") and service != "table":
            ann_list = list(ANNOTATIONS) if ann == "true" else []
        else:
            ann_list = [a for a in ann.split(",") if a]
            allowed = ("duration", "distance") if service == "table" else ANNOTATIONS
            for a in ann_list:
                if a not in allowed:
                    raise OsrmError("InvalidOptions", f"annotations: unknown value '{a[:20]}'; use {', '.join(allowed)}"
                                    + ("" if service == "table" else " or true/false"))
        q["annotations"] = ann_list
    if service == "route":
        alt = query.get("alternatives", "false")
        if alt in ("true", "false"):
            q["alternatives"] = 1 if alt == "true" else 0
        else:
            try:
                q["alternatives"] = int(alt)
                if q["alternatives"] < 0:
                    raise ValueError
            except ValueError:
                raise OsrmError("InvalidOptions", "alternatives must be true, false or a number >= 0") from None
            q["alternatives"] = min(q["alternatives"], MAX_ALTERNATIVES)
    if service in ("route", "match") and "waypoints" in query:
        wp = _indices("waypoints", query["waypoints"], n) or list(range(n))
        if wp[0] != 0 or wp[-1] != n - 1 or sorted(set(wp)) != wp:
            raise OsrmError("InvalidValue", "waypoints must be increasing and include the first and last coordinate")
        q["waypoints"] = wp
    if service == "table":
        q["sources"] = _indices("sources", query.get("sources", "all"), n)
        q["destinations"] = _indices("destinations", query.get("destinations", "all"), n)
        for name, default in (("fallback_speed", None), ("scale_factor", 1.0)):
            raw = query.get(name)
            if raw is None:
                q[name] = default
                continue
            try:
                v = float(raw)
                if not (v > 0 and math.isfinite(v)):
                    raise ValueError
            except ValueError:
                raise OsrmError("InvalidOptions", f"{name} must be a number > 0") from None
            q[name] = v
    if service == "nearest":
        try:
            q["number"] = int(query.get("number", "1"))
            if not 1 <= q["number"] <= MAX_NEAREST:
                raise ValueError
        except ValueError:
            raise OsrmError("InvalidOptions", f"number must be an integer 1..{MAX_NEAREST}") from None
    if service == "match":
        ts = query.get("timestamps")
        if ts is not None:
            try:
                t = [float(x) for x in _per_location("timestamps", ts, n)]
            except ValueError:
                raise OsrmError("InvalidOptions", "timestamps must be integers (seconds since the epoch)") from None
            if any(b < a for a, b in zip(t[:-1], t[1:], strict=False)):
                raise OsrmError("InvalidValue", "timestamps must be monotonically increasing")
            q["timestamps"] = t
    return q


def _costing_options(costing: str, q: dict) -> dict | None:
    if not q["exclude"]:
        return None
    from geoengine.costing.schema import TABLES

    names = {o.name for o in TABLES[costing]}
    missing = [x for x in q["exclude"] if _EXCLUDE[x] not in names]
    if missing:  # as osrm-routed: exclude classes are the profile's own
        have = [c for c, opt in _EXCLUDE.items() if opt in names]
        raise OsrmError("InvalidValue", f"exclude: class '{missing[0]}' is not one of the {costing} profile's "
                        f"classes ({', '.join(have) or 'none'})")
    return {costing: {_EXCLUDE[x]: 0.0 for x in q["exclude"]}}


def _location(lon: float, lat: float, q: dict, i: int, kind: str = "break") -> dict:
    loc: dict[str, Any] = {"lon": float(lon), "lat": float(lat), "type": kind}
    r = q["radius"][i]
    if r is not None:
        loc["search_radius"] = int(min(max(round(r), 1), 100))
    h = q["heading"][i]
    if h is not None:
        loc["heading"], loc["heading_tolerance"] = h
    if q["side"][i] is not None:
        loc["preferred_side"] = q["side"][i]
    return loc


def _check_size(service: str, n: int) -> None:
    limit = MAX_LOCATIONS[service]
    if n > limit:
        raise OsrmError("TooBig", f"{n} coordinates: the {service} service takes at most {limit}")
    minimum = {"route": 2, "match": 2, "trip": 2, "table": 1, "nearest": 1}[service]
    if n < minimum:
        raise OsrmError("InvalidValue", f"the {service} service needs at least {minimum} coordinates, got {n}")


def _body(costing: str, q: dict, **parts) -> dict:
    """A request body of the engine for `costing`: the directions the query asks for, its exclude classes."""
    # maneuvers only when steps are asked for: they cost more than the route itself
    directions = {"units": "kilometers", "directions_type": "maneuvers" if q.get("steps") else "none"}
    body: dict[str, Any] = {**parts, "costing": costing, "directions_options": directions}
    co = _costing_options(costing, q)
    if co:
        body["costing_options"] = co
    return body


def _route_body(coords: list, costing: str, q: dict, kinds: list[str]) -> dict:
    """`coords`: [lon, lat] pairs (coordinate_list, or an array's tolist())."""
    return _body(costing, q, locations=[_location(lo, la, q, i, kinds[i]) for i, (lo, la) in enumerate(coords)])


# ------------------------------------------------------------------------------------------------------
# services
# ------------------------------------------------------------------------------------------------------
def _request(service: str, profile: str, coordinates: str, query: Mapping[str, str], parse=parse_coordinates):
    """(coordinates, costing, parsed query) of a request, checked in OSRM's order; the coordinates as
    `parse` gives them (an array, or coordinate_list's pairs)."""
    coords = parse(coordinates)
    _check_size(service, len(coords))
    return coords, costing_of(profile), parse_query(service, query, len(coords))


def route(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("route", profile, coordinates, query, coordinate_list)
    n = len(coords)
    via = "break_through" if q["continue_straight"] == "true" else "break"
    kinds = ["break"] + [via] * (n - 2) + ["break"]
    if "waypoints" in q:
        legs_at = set(q["waypoints"])
        through = "through" if q["continue_straight"] == "true" else "via"
        kinds = [k if i in legs_at else through for i, k in enumerate(kinds)]
    body = _route_body(coords, costing, q, kinds)
    if q["alternatives"]:
        body["alternates"] = q["alternatives"]
    result = engine.compute_route(body)
    mode = _MODE.get(costing, "driving")
    out: dict[str, Any] = {"code": "Ok", "routes": [route_object(r, q, mode, graph=engine.graph) for r in result.routes]}
    if not q["skip_waypoints"]:
        wps = waypoints(result.best, q, engine, costing)
        if "waypoints" in q:
            wps = [wps[i] for i in q["waypoints"]]
        out["waypoints"] = wps
    return out


def table(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("table", profile, coordinates, query)
    hinted = any(q["heading"][i] is not None or q["side"][i] is not None for i in range(len(coords)))
    locs = None
    if hinted:  # bearings / approaches: those points are snapped with them, as a route's are
        locs = [Location(**_location(lo, la, q, i)) for i, (lo, la) in enumerate(coords.tolist())]
    options = (_costing_options(costing, q) or {}).get(costing)
    return {"code": "Ok", **table_document(engine, coords, costing, options, q, locs)}


def nearest(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("nearest", profile, coordinates, query)
    router = engine.router
    prof = router.profile(costing, router.parse_options(costing, (_costing_options(costing, q) or {}).get(costing)))
    lon, lat = (float(x) for x in coords[0])
    h = q["heading"][0]
    c = engine.snapper.snap(lon, lat, prof.usable, search_radius=q["radius"][0],
                            heading=None if h is None else h[0], heading_tolerance=None if h is None else h[1],
                            preferred_side=q["side"][0], index=0, field="coordinates", at_least=q["number"])
    return {"code": "Ok", "waypoints": nearest_waypoints(engine, c, q["number"], q)}


def trip(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    from geoengine.services.optimised_route import OptimisedRouteRequest, optimise
    from geoengine.validation import validate

    coords, costing, q = _request("trip", profile, coordinates, query)
    n = len(coords)
    if not q["roundtrip"] and (q["source"] != "first" or q["destination"] != "last"):
        raise OsrmError("NotImplemented", "roundtrip=false is supported with source=first and destination=last")
    if q["roundtrip"] and q["destination"] == "last":
        raise OsrmError("NotImplemented", "roundtrip=true is supported with destination=any")
    pts = np.vstack([coords, coords[:1]]) if q["roundtrip"] else coords
    wrap = {**q, "radius": q["radius"] + q["radius"][:1], "heading": q["heading"] + q["heading"][:1],
            "side": q["side"] + q["side"][:1]}
    body = _route_body(pts.tolist(), costing, wrap, ["break"] * len(pts))
    if n == 2 and not q["roundtrip"]:  # nothing to order
        best, order = engine.compute_route(body).best, [0, 1]
    else:
        order, _method, _cost, _given, best = optimise(engine, validate(OptimisedRouteRequest, body))
    out: dict[str, Any] = {"code": "Ok", "trips": [route_object(best, q, _MODE.get(costing, "driving"), graph=engine.graph)]}
    if not q["skip_waypoints"]:
        in_trip = waypoints(best, q, engine, costing)
        by_input: list[dict | None] = [None] * n
        for pos, orig in enumerate(order):
            if orig < n and by_input[orig] is None:
                by_input[orig] = {**in_trip[pos], "waypoint_index": pos, "trips_index": 0}
        out["waypoints"] = by_input
    return out


def match(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    from geoengine.services.matching import MapMatchRequest, matched_routes_by_point
    from geoengine.validation import validate

    coords, costing, q = _request("match", profile, coordinates, query)
    shape = [{"lon": float(lo), "lat": float(la)} for lo, la in coords.tolist()]
    if "timestamps" in q:
        t0 = q["timestamps"][0]
        for p, t in zip(shape, q["timestamps"], strict=True):
            p["time"] = t - t0
    radii = [r for r in q["radius"] if r is not None]
    trace_options: dict[str, Any] = {}
    if radii:  # OSRM's radius is the GPS standard deviation
        acc = min(max(max(radii), 1.0), 100.0)
        trace_options = {"gps_accuracy": acc, "search_radius": min(max(3.0 * acc, 50.0), 100.0)}
    if q["gaps"] == "ignore":
        trace_options["breakage_distance"] = 10000.0
    body = _body(costing, q, shape=shape, shape_match="map_snap", trace_options=trace_options)
    # one matching per matched section, one leg between each two of its matched trace points
    matched, res = matched_routes_by_point(engine.matcher, validate(MapMatchRequest, body))
    matchings, tracepoints = matchings_and_tracepoints(engine, matched, res, q, _MODE.get(costing, "driving"))
    out: dict[str, Any] = {"code": "Ok", "matchings": matchings}
    if not q["skip_waypoints"]:
        out["tracepoints"] = tracepoints
    return out


_SERVICES = {"route": route, "table": table, "match": match, "nearest": nearest, "trip": trip}


@replies(OsrmError)
def run(service: str, engine, version: str, profile: str, coordinates: str, query: Mapping[str, str]) -> Reply:
    """One OSRM request -> its Reply: the response body, or OSRM's {code, message} (engine errors mapped)."""
    if service not in _SERVICES:
        raise OsrmError("InvalidService", f"unknown service '{service}'; services: {', '.join(SERVICES)}")
    if version != "v1":
        raise OsrmError("InvalidVersion", f"unknown version '{version}'; this server speaks v1")
    return Reply(200, _SERVICES[service](engine, profile, coordinates, query))
