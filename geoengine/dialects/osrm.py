"""The OSRM HTTP API (v1) over the engine: route, table, match, nearest and trip.

`/{service}/v1/{profile}/{coordinates}?option=value...` is parsed here into the engine's request models;
the engine's documents are rendered in OSRM's response shapes (`code`, `routes`, `waypoints`, legs,
steps with `maneuver`, `intersections`). Errors are OSRM's: HTTP 400 with `{"code", "message"}` (see
docs/osrm.md for the mapping of every field and docs/errors.md for the error shape).

No HTTP here: `geoengine/server/routes/osrm.py` calls `run(service, engine, profile, coordinates,
query)` and returns what it gives.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from typing import Any

import numba
import numpy as np

from geoengine.costing.schema import COSTINGS
from geoengine.dialects import DialectError
from geoengine.errors import (
    GeoengineError,
    InvalidRequest,
    NoRoute,
    NotFound,
    Unprocessable,
    Unsnappable,
)
from geoengine.geo import decode_polyline, encode_polyline, haversine_m, simplify_line
from geoengine.services.models import PROFILE_COSTING

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


_NO_RESULT = {"route": "NoRoute", "table": "NoTable", "match": "NoMatch", "trip": "NoTrips", "nearest": "NoSegment"}


def from_engine_error(exc: GeoengineError, service: str) -> OsrmError:
    """A domain error of the engine -> the OSRM code a client of that service expects."""
    detail = exc.detail if getattr(exc, "detail", None) else str(exc)
    if isinstance(exc, Unsnappable):
        return OsrmError("NoSegment", detail)
    if isinstance(exc, NoRoute):
        return OsrmError(_NO_RESULT[service], detail)
    if isinstance(exc, Unprocessable):
        return OsrmError(_NO_RESULT[service], detail)
    if isinstance(exc, InvalidRequest):
        return OsrmError("InvalidValue", detail)
    if isinstance(exc, NotFound):
        return OsrmError("InvalidUrl", detail)
    # 5xx (Unavailable, BackendTimeout, ...): not the client's fault, keep the status
    code = {503: "ServiceUnavailable", 504: "Timeout"}.get(exc.status, "InternalError")
    return OsrmError(code, detail, exc.status if exc.status >= 500 else 400)


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
            out = np.column_stack([lon, lat]).astype(np.float64)
            break
    else:
        pairs = text.split(";")
        out = np.empty((len(pairs), 2))
        for i, pair in enumerate(pairs):
            parts = pair.split(",")
            try:
                if len(parts) != 2 or not all(map(_DECIMAL.fullmatch, parts)):
                    raise ValueError
                out[i] = float(parts[0]), float(parts[1])
            except ValueError:
                raise OsrmError("InvalidQuery", f"coordinate {i} ('{pair[:40]}') is not 'longitude,latitude'") from None
    if len(out) == 0:
        raise OsrmError("InvalidQuery", "no coordinates")
    if not np.isfinite(out).all():
        raise OsrmError("InvalidValue", "coordinates must be finite numbers")
    bad = np.flatnonzero((np.abs(out[:, 0]) > 180) | (np.abs(out[:, 1]) > 90))
    if bad.size:
        i = int(bad[0])
        raise OsrmError("InvalidValue", f"coordinate {i} ({out[i, 0]:g},{out[i, 1]:g}) is outside "
                        "longitude -180..180 / latitude -90..90")
    return out


def costing_of(profile: str) -> str:
    try:
        return PROFILES[profile]
    except KeyError:
        raise OsrmError("InvalidOptions", f"unknown profile '{profile}'; profiles: driving, walking, cycling, car, "
                        f"foot, bike and the costings {', '.join(COSTINGS)}") from None


def _choice(query: Mapping[str, str], name: str):
    """The option's word (its default when absent; a boolean for true/false options), or InvalidOptions."""
    words = CHOICES[name]
    value = query.get(name, words[0])
    if value not in words:
        raise OsrmError("InvalidOptions", f"{name} must be {', '.join(words[:-1])} or {words[-1]}, got '{value[:40]}'")
    return value == "true" if set(words) == {"true", "false"} else value


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
    unknown = sorted(set(query) - OPTIONS[service])
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
    for name in OPTIONS[service] & CHOICES.keys():
        q[name] = _choice(query, name)
    q["exclude"] = [x for x in query.get("exclude", "").split(",") if x]
    for x in q["exclude"]:
        if x not in _EXCLUDE:
            raise OsrmError("InvalidValue", f"exclude: unknown class '{x[:20]}'; classes: {', '.join(_EXCLUDE)}")
    if service in ("route", "match", "trip", "table"):
        ann = query.get("annotations", "false" if service != "table" else "duration")
        if ann in ("true", "false") and service != "table":
            ann_list = list(ANNOTATIONS[:4]) if ann == "true" else []
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


# ------------------------------------------------------------------------------------------------------
# rendering
# ------------------------------------------------------------------------------------------------------
def _geometry(coords: np.ndarray, fmt: str):
    """coords [k, 2] (lon, lat) -> OSRM geometry in `fmt`."""
    if fmt == "geojson":
        return {"type": "LineString", "coordinates": np.round(coords, 6).tolist()}
    return encode_polyline(coords[:, 1], coords[:, 0], 6 if fmt == "polyline6" else 5)


def _simplify(coords: np.ndarray) -> np.ndarray:
    """overview=simplified: Douglas-Peucker at a tolerance of 1/2000 of the route's bbox diagonal (OSRM
    simplifies for the zoom level at which the whole route is visible)."""
    if len(coords) < 3:
        return coords
    span = float(np.hypot(*(coords.max(axis=0) - coords.min(axis=0))))
    if span == 0:
        return coords[[0, -1]]
    return simplify_line(coords, span / 2000.0)


def _overview(coords: np.ndarray, q: dict):
    if q["overview"] == "false":
        return None
    return _geometry(coords if q["overview"] == "full" else _simplify(coords), q["geometries"])


def _modifier(turn: float) -> str:
    """Signed turn angle (degrees, right positive) -> OSRM direction modifier."""
    a = abs(turn)
    side = "right" if turn > 0 else "left"
    if a < 20:
        return "straight"
    if a < 60:
        return f"slight {side}"
    if a < 140:
        return side
    if a < 170:
        return f"sharp {side}"
    return "uturn"


# Valhalla maneuver type code -> (OSRM maneuver type, modifier); None modifier = from the bearings.
_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("turn", None), 1: ("depart", None), 2: ("depart", "right"), 3: ("depart", "left"),
    4: ("arrive", None), 5: ("arrive", "right"), 6: ("arrive", "left"),
    7: ("new name", "straight"), 8: ("continue", "straight"), 9: ("turn", "slight right"), 10: ("turn", "right"),
    11: ("turn", "sharp right"), 12: ("turn", "uturn"), 13: ("turn", "uturn"), 14: ("turn", "sharp left"),
    15: ("turn", "left"), 16: ("turn", "slight left"), 17: ("on ramp", "straight"), 18: ("on ramp", "right"),
    19: ("on ramp", "left"), 20: ("off ramp", "slight right"), 21: ("off ramp", "slight left"),
    22: ("fork", "straight"), 23: ("fork", "slight right"), 24: ("fork", "slight left"), 25: ("merge", "straight"),
    26: ("roundabout", None), 27: ("exit roundabout", None), 28: ("notification", None),
    29: ("notification", None), 37: ("merge", "slight right"), 38: ("merge", "slight left"),
    44: ("continue", None),
}


@numba.njit(cache=True, nogil=True)
def _junction_arms(offsets, out_edges, bearing_start, usable, has_usable, edge_src, e_in, e_out, before, after,
                   junctions_only):
    """Every road arm at the node where edge e_in[q] ends and e_out[q] starts, for each q: bearings
    leaving the node (the edge's start bearing rounded half to even, mod 360; the route's own way out
    takes after[q] and its way back in (before[q] + 180) % 360 when those are >= 0), sorted stably;
    `entry` = the costing may leave through the arm and it is not the way back; the positions of the
    way back (`i_in`) and the way out (`i_out`) in the sorted arms, -1 when the edges do not meet.
    `junctions_only`: nodes with two arms or fewer (bends) get none. Rows of q: start[q]:start[q + 1]."""
    n = e_in.shape[0]
    start = np.zeros(n + 1, np.int64)
    for q in range(n):
        v = edge_src[e_out[q]]
        deg = offsets[v + 1] - offsets[v]
        start[q + 1] = start[q] + (0 if junctions_only and deg <= 2 else deg)
    bear = np.empty(start[n], np.int64)
    arm = np.empty(start[n], np.int64)
    entry = np.empty(start[n], np.bool_)
    i_in = np.full(n, -1, np.int64)
    i_out = np.full(n, -1, np.int64)
    for q in range(n):
        s, t = start[q], start[q + 1]
        if s == t:
            continue
        o = offsets[edge_src[e_out[q]]]
        back, out = e_in[q] ^ 1, e_out[q]
        for k in range(t - s):
            a = out_edges[o + k]
            x = np.float64(bearing_start[a])
            f = np.floor(x)
            d = x - f
            r = f + 1.0 if d > 0.5 or (d == 0.5 and f % 2.0 != 0.0) else f  # numpy's round: half to even
            b = np.int64(r) % 360
            if after[q] >= 0 and a == out:
                b = after[q]
            if before[q] >= 0 and a == back:
                b = (before[q] + 180) % 360
            p = s + k
            while p > s and bear[p - 1] > b:  # insertion: equal bearings keep their order (a stable sort)
                bear[p] = bear[p - 1]
                arm[p] = arm[p - 1]
                p -= 1
            bear[p] = b
            arm[p] = a
        for p in range(s, t):
            a = arm[p]
            entry[p] = (usable[a] if has_usable else True) and a != back
            if a == back and i_in[q] < 0:
                i_in[q] = p - s
            if a == out and i_out[q] < 0:
                i_out[q] = p - s
    return start, bear, entry, i_in, i_out


_NO_USABLE = np.zeros(1, np.bool_)


def _arms_table(graph, usable, e_in, e_out, before, after, junctions_only: bool):
    """`_junction_arms` for these edge pairs: (start, bearings, entry, i_in, i_out) as arrays."""
    has = usable is not None
    return _junction_arms(
        graph.node_out_offsets, graph.node_out_edges, graph.edge_bearing_start,
        np.ascontiguousarray(usable, np.bool_) if has else _NO_USABLE, has, graph.edge_src,
        np.ascontiguousarray(e_in, np.int64), np.ascontiguousarray(e_out, np.int64),
        np.ascontiguousarray(before, np.int64), np.ascontiguousarray(after, np.int64), junctions_only)


def _met(start, i_in, i_out) -> np.ndarray:
    """The rows of an `_arms_table` with arms where the two edges meet."""
    return np.flatnonzero((start[1:] > start[:-1]) & (i_in >= 0) & (i_out >= 0))


class _LegJunctions:
    """The intersections of one leg's steps, made with two kernel calls (`_junction_arms`): the arms at
    each maneuver point (with the maneuver's bearings on the route's own arms, as OSRM's) and at every
    junction with more than two roads that the route passes. Python visits the junctions found, never
    the leg's edges."""

    def __init__(self, leg, graph, usable, heads: list[tuple]):
        edges = np.asarray(leg.edges, np.int64)
        n = len(edges)
        self.n = n
        # per maneuver: (bearings, entry, in, out) at its point, or None
        self.first: list[tuple | None] = [None] * len(heads)
        at = [i for i, (kind, b, _, _) in enumerate(heads) if kind not in ("depart", "arrive") and 0 < b < n]
        if at:
            bs = np.array([heads[i][1] for i in at], np.int64)
            start, bear, entry, i_in, i_out = _arms_table(
                graph, usable, edges[bs - 1], edges[bs], [heads[i][2] for i in at], [heads[i][3] for i in at], False)
            for r in _met(start, i_in, i_out).tolist():
                s, t = start[r], start[r + 1]
                self.first[at[r]] = (bear[s:t].tolist(), entry[s:t].tolist(), int(i_in[r]), int(i_out[r]))
        self.js: list[int] = []  # the edge index at which each junction passed is entered, ascending
        self.passing: list[dict] = []
        if n > 1 and leg.shape_begin is not None:
            minus = np.full(n - 1, -1, np.int64)
            start, bear, entry, i_in, i_out = _arms_table(graph, usable, edges[:-1], edges[1:], minus, minus, True)
            rows = _met(start, i_in, i_out)
            k = np.asarray(leg.shape_begin)[rows + 1]
            lon, lat = np.asarray(leg.lon)[k].tolist(), np.asarray(leg.lat)[k].tolist()
            st, bl, el, il, ol = start.tolist(), bear.tolist(), entry.tolist(), i_in.tolist(), i_out.tolist()
            self.js = (rows + 1).tolist()
            self.passing = [{"location": [round(x, 6), round(y, 6)], "bearings": bl[st[r]:st[r + 1]],
                             "entry": el[st[r]:st[r + 1]], "in": il[r], "out": ol[r]}
                            for r, x, y in zip(rows.tolist(), lon, lat, strict=True)]

    def of_step(self, i: int, b: int, e: int, kind: str, location: list, before: int, after: int) -> list[dict]:
        """The intersections of step i (edges b..e): its maneuver point, then the junctions it passes."""
        first = self.first[i]
        if first is None:
            out = [_intersection(kind, location, before, after)]
        else:
            out = [{"location": location, "bearings": first[0], "entry": first[1], "in": first[2], "out": first[3]}]
        if kind == "arrive" or not self.js:
            return out
        lo, hi = bisect.bisect_left(self.js, max(b, 0) + 1), bisect.bisect_left(self.js, min(e, self.n))
        out.extend(self.passing[lo:hi])
        return out


def _head(m) -> tuple[str, str | None, int, int]:
    """(OSRM maneuver type, modifier, bearing before, bearing after) of a typed Maneuver."""
    kind, modifier = _TYPES.get(int(m.type), ("turn", None))
    before = 0 if kind == "depart" else int(round(float(m.bearing_before or 0))) % 360
    after = 0 if kind == "arrive" else int(round(float(m.bearing_after or 0))) % 360
    if modifier is None and kind not in ("notification", "depart", "arrive"):
        modifier = _modifier(((after - before + 540.0) % 360.0) - 180.0) \
            if m.bearing_before is not None and m.bearing_after is not None else "straight"
    return kind, modifier, before, after


def _step(m, lon: np.ndarray, lat: np.ndarray, q: dict, mode: str, junctions: _LegJunctions | None = None,
          i: int = 0, head: tuple | None = None) -> dict:
    """An OSRM RouteStep from a typed Maneuver (`geoengine.services.route.Maneuver`) of a leg whose shape
    is (lon, lat), the i-th of its leg (`head`: its `_head` when already made); with the leg's
    `junctions`, its intersections list every road arm."""
    last = len(lon) - 1
    b, e = min(int(m.begin_shape_index), last), min(int(m.end_shape_index), last)
    kind, modifier, before, after = head or _head(m)
    idx = np.arange(b, e + 1) if e > b else np.array([b, b])
    location = [round(float(lon[b]), 6), round(float(lat[b]), 6)]
    maneuver: dict[str, Any] = {"type": kind, "bearing_before": before, "bearing_after": after, "location": location}
    if modifier is not None:
        maneuver["modifier"] = modifier
    if int(m.type) == 26 and m.roundabout_exit_count:
        maneuver["exit"] = int(m.roundabout_exit_count)
    names = list(m.street_names or [])
    step: dict[str, Any] = {
        "distance": round(float(m.length_m), 1),
        "duration": round(float(m.time_s), 1),
        "weight": round(float(m.time_s), 1),
        "name": names[0] if names else "",
        "mode": "ferry" if int(m.type) == 28 else mode,
        "driving_side": "right",
        "geometry": _geometry(np.column_stack([lon[idx], lat[idx]]), q["geometries"]),
        "maneuver": maneuver,
        "intersections": (junctions.of_step(i, int(m.begin_edge), int(m.end_edge), kind, location, before, after)
                          if junctions is not None else [_intersection(kind, location, before, after)]),
    }
    if len(names) > 1:
        step["ref"] = "; ".join(names[1:])
    if m.text.get("instruction"):
        step["instruction"] = m.text["instruction"]  # geoengine's own text (OSRM clients render their own)
    return step


def _intersection(kind: str, location: list, before: int, after: int) -> dict:
    """The maneuver point's intersection, with the arms the route uses: the way in (reversed bearing
    before) and the way out (bearing after)."""
    if kind == "depart":
        return {"location": location, "bearings": [after], "entry": [True], "out": 0}
    if kind == "arrive":
        return {"location": location, "bearings": [(before + 180) % 360], "entry": [True], "in": 0}
    arms = sorted({(before + 180) % 360, after})
    return {"location": location, "bearings": arms, "entry": [True] * len(arms),
            "in": arms.index((before + 180) % 360), "out": arms.index(after)}


def _segment_seconds(leg, seg_m: np.ndarray) -> np.ndarray:
    """Seconds per segment of the leg's shape: each traversed edge's time spread over its own segments
    in proportion to their length (so speeds are the edges' speeds), then scaled so that the segments
    add up to the leg's duration (which also holds turn delays and waiting). Without per-edge data the
    leg's duration is spread over all segments by length."""
    n = seg_m.shape[0]
    b, e, t_edge = leg.shape_begin, leg.shape_end, leg.edge_time_s
    counts = None if b is None or e is None or t_edge is None else np.asarray(e) - np.asarray(b)
    if counts is not None and len(counts) and int(b[0]) == 0 and int(counts.sum()) == n and (counts >= 0).all():
        edge_of = np.repeat(np.arange(len(counts)), counts)
        per_edge_m = np.bincount(edge_of, weights=seg_m, minlength=len(counts))
        share = np.divide(seg_m, per_edge_m[edge_of], out=np.zeros(n), where=per_edge_m[edge_of] > 0)
        t = np.where(np.isfinite(t_edge), t_edge, 0.0)[edge_of] * share
    else:
        t = seg_m.copy()
    total = float(t.sum())
    return t * (leg.time_s / total) if total > 0 else np.zeros(n)


def _annotation(leg, which: list[str]) -> dict:
    """Per-segment annotations of a leg's shape: distances from the coordinates; durations from the
    time of the edge each segment lies on (`_segment_seconds`); speed = distance / duration."""
    lon, lat = leg.lon, leg.lat
    d = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]) if len(lon) > 1 else np.zeros(0)
    t = _segment_seconds(leg, d)
    out: dict[str, Any] = {}
    if "distance" in which:
        out["distance"] = np.round(d, 1).tolist()
    if "duration" in which:
        out["duration"] = np.round(t, 1).tolist()
    if "weight" in which:
        out["weight"] = np.round(t, 1).tolist()
    if "speed" in which:
        out["speed"] = np.round(np.divide(d, t, out=np.zeros_like(d), where=t > 0), 1).tolist()
    if "datasources" in which:
        out["datasources"] = [0] * len(d)
    return out


def _summary(steps: list[dict]) -> str:
    """The names of the two longest-driven streets of a leg, in route order."""
    by_name: dict[str, float] = {}
    for s in steps:
        if s["name"]:
            by_name[s["name"]] = by_name.get(s["name"], 0.0) + s["distance"]
    top = set(sorted(by_name, key=lambda k: -by_name[k])[:2])
    seen: list[str] = []
    for s in steps:
        if s["name"] in top and s["name"] not in seen:
            seen.append(s["name"])
    return ", ".join(seen)


def _spread_turn_delays(steps: list[dict], duration: float) -> None:
    """Maneuver times leave out the costing's turn delays, which the leg's duration includes: spread
    the difference over the steps in proportion to their time, so that the steps add up to the leg (as
    OSRM's do)."""
    total = sum(s["duration"] for s in steps)
    if total <= 0 or duration <= 0:
        return
    f = duration / total
    for s in steps:
        s["duration"] = s["weight"] = round(s["duration"] * f, 1)


def route_object(route, q: dict, mode: str, legs=None, graph=None) -> dict:
    """An OSRM Route from a typed `geoengine.services.route.Route` (or some of its `legs`): distances and
    durations are the route's own metres and seconds."""
    legs = route.legs if legs is None else legs
    out_legs = []
    for leg in legs:
        ms = leg.maneuvers or []
        heads = [_head(m) for m in ms]
        junctions = None
        if graph is not None and ms:
            junctions = _LegJunctions(leg, graph, route.usable, [(h[0], int(m.begin_edge), h[2], h[3])
                                                                 for m, h in zip(ms, heads, strict=True)])
        steps = [_step(m, leg.lon, leg.lat, q, mode, junctions, i, h) for i, (m, h) in enumerate(zip(ms, heads, strict=True))]
        _spread_turn_delays(steps, leg.time_s)
        out: dict[str, Any] = {"distance": round(leg.length_m, 1), "duration": round(leg.time_s, 1),
                               "weight": round(leg.time_s, 1), "summary": _summary(steps),
                               "steps": steps if q.get("steps") else []}
        if q.get("annotations"):
            out["annotation"] = _annotation(leg, q["annotations"])
        out_legs.append(out)
    time_s = float(sum(leg.time_s for leg in legs))
    result: dict[str, Any] = {
        "distance": round(float(sum(leg.length_m for leg in legs)), 1),
        "duration": round(time_s, 1),
        "weight": round(time_s, 1),
        "weight_name": "duration",
        "legs": out_legs,
    }
    if legs:
        lon = np.concatenate([leg.lon if i == 0 else leg.lon[1:] for i, leg in enumerate(legs)])
        lat = np.concatenate([leg.lat if i == 0 else leg.lat[1:] for i, leg in enumerate(legs)])
        geometry = _overview(np.column_stack([lon, lat]), q)
        if geometry is not None:
            result["geometry"] = geometry
    return result


def _waypoint(lon: float, lat: float, distance: float, name: str, q: dict) -> dict:
    w = {"location": [round(float(lon), 6), round(float(lat), 6)], "distance": round(float(distance), 2),
         "name": name}
    if q.get("generate_hints", True):
        w["hint"] = ""
    return w


def _edge_names(engine, edges) -> list[str]:
    g = engine.graph
    seg = np.asarray(g.seg_name)[np.asarray(edges, dtype=np.int64) >> 1]
    return [g.strings[int(i)] for i in seg.tolist()]


def _street_names(engine, costing: str, points: list[tuple[float, float]]) -> list[str]:
    """Names of the streets at snapped positions: the edge under each point for the costing (one grid
    kernel call per point, a few microseconds)."""
    from types import SimpleNamespace

    router = engine.router
    prof = router.profile(costing)
    out = []
    for i, (lo, la) in enumerate(points):
        try:
            c = router.plain_candidates(prof, SimpleNamespace(lon=lo, lat=la, search_radius=5), i)
            out.append(_edge_names(engine, c["edge"][:1])[0] if len(c["edge"]) else "")
        except GeoengineError:
            out.append("")
    return out


def _waypoints(route, q: dict, engine, costing: str) -> list[dict]:
    """One Waypoint per location of the route: its snapped position, the distance to it and the name of
    the street it snapped to (the first edge of the leg it starts, the last of the leg it ends)."""
    locs = route.locations
    names = [""] * len(locs)
    breaks = [i for i, loc in enumerate(locs) if i in (0, len(locs) - 1) or loc.type in ("break", "break_through")]
    for k, leg in enumerate(route.legs):
        if len(leg.edges) and k < len(breaks):
            first, last = _edge_names(engine, [leg.edges[0], leg.edges[-1]])
            names[breaks[k]] = names[breaks[k]] or first
            if k + 1 < len(breaks):
                names[breaks[k + 1]] = last
    missing = [i for i, loc in enumerate(locs) if i not in breaks]
    if missing:  # pass-through locations: look their streets up
        for i, name in zip(missing, _street_names(engine, costing, [(locs[i].snapped_lon, locs[i].snapped_lat)
                                                                     for i in missing]), strict=True):
            names[i] = name
    return [_waypoint(loc.snapped_lon, loc.snapped_lat, loc.snapped_distance_m, names[i], q)
            for i, loc in enumerate(locs)]


def _directions_type(q: dict) -> str:
    """Maneuvers only when steps are asked for: they cost more than the route itself."""
    return "maneuvers" if q.get("steps") else "none"


def _body(costing: str, q: dict, **parts) -> dict:
    """A request body of the engine for `costing`: the directions the query asks for, its exclude classes."""
    body: dict[str, Any] = {**parts, "costing": costing,
                            "directions_options": {"units": "kilometers", "directions_type": _directions_type(q)}}
    co = _costing_options(costing, q)
    if co:
        body["costing_options"] = co
    return body


def _route_body(coords: np.ndarray, costing: str, q: dict, kinds: list[str]) -> dict:
    return _body(costing, q, locations=[_location(lo, la, q, i, kinds[i]) for i, (lo, la) in enumerate(coords.tolist())])


# ------------------------------------------------------------------------------------------------------
# services
# ------------------------------------------------------------------------------------------------------
def _request(service: str, profile: str, coordinates: str, query: Mapping[str, str]):
    """(coordinates, costing, parsed query) of a request, checked in OSRM's order."""
    coords = parse_coordinates(coordinates)
    _check_size(service, len(coords))
    return coords, costing_of(profile), parse_query(service, query, len(coords))


def route(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("route", profile, coordinates, query)
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
        wps = _waypoints(result.best, q, engine, costing)
        if "waypoints" in q:
            wps = [wps[i] for i in q["waypoints"]]
        out["waypoints"] = wps
    return out


def table(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("table", profile, coordinates, query)
    si = q["sources"] if q["sources"] is not None else list(range(len(coords)))
    di = q["destinations"] if q["destinations"] is not None else list(range(len(coords)))
    src, dst = coords[si], coords[di]
    radius = np.array([np.nan if r is None else min(max(r, 1.0), 100.0) for r in q["radius"]], dtype=np.float64)
    sr, dr = radius[si], radius[di]
    hinted = [i for i in range(len(coords)) if q["heading"][i] is not None or q["side"][i] is not None]
    locs = None
    if hinted:  # bearings / approaches: those points are snapped with them, as a route's are
        from geoengine.services.models import Location

        locs = [Location(**_location(lo, la, q, i)) for i, (lo, la) in enumerate(coords.tolist())]
    res = engine.router.matrix(src, dst, costing, (_costing_options(costing, q) or {}).get(costing),
                               source_radius=None if np.isnan(sr).all() else sr,
                               target_radius=None if np.isnan(dr).all() else dr,
                               source_locations=None if locs is None else [locs[i] for i in si],
                               target_locations=None if locs is None else [locs[i] for i in di])
    time_s = np.asarray(res.time_s, dtype=np.float64) * q["scale_factor"]
    dist_m = np.asarray(res.distance_m, dtype=np.float64)
    out: dict[str, Any] = {"code": "Ok"}
    missing = ~np.isfinite(time_s)
    if q["fallback_speed"] is not None and missing.any():
        a = src if q["fallback_coordinate"] == "input" else np.asarray(res.sources)
        b = dst if q["fallback_coordinate"] == "input" else np.asarray(res.targets)
        crow = haversine_m(a[:, 1][:, None], a[:, 0][:, None], b[:, 1][None, :], b[:, 0][None, :])
        dist_m = np.where(missing, crow, dist_m)
        time_s = np.where(missing, crow / q["fallback_speed"], time_s)
        out["fallback_speed_cells"] = np.argwhere(missing).tolist()
        missing = ~np.isfinite(time_s)
    if "duration" in q["annotations"]:
        out["durations"] = _table_values(time_s, missing)
    if "distance" in q["annotations"]:
        out["distances"] = _table_values(dist_m, missing)
    if not q["skip_waypoints"]:  # each point where it snapped, the distance to it, the street's name
        for name, given, snapped, edges in (("sources", src, res.sources, res.edges[0]),
                                            ("destinations", dst, res.targets, res.edges[1])):
            snapped = np.asarray(snapped)
            d = haversine_m(given[:, 1], given[:, 0], snapped[:, 1], snapped[:, 0])
            out[name] = [_waypoint(lo, la, di, street, q) for (lo, la), di, street in
                         zip(snapped.tolist(), np.atleast_1d(d).tolist(), _edge_names(engine, edges), strict=True)]
    return out


def _table_values(a: np.ndarray, missing: np.ndarray) -> list:
    rows = np.round(np.where(missing, 0.0, a), 1).tolist()
    if missing.any():
        for i, j in np.argwhere(missing).tolist():
            rows[i][j] = None
    return rows


def nearest(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    coords, costing, q = _request("nearest", profile, coordinates, query)
    router = engine.router
    prof = router.profile(costing, router.parse_options(costing, (_costing_options(costing, q) or {}).get(costing)))
    lon, lat = (float(x) for x in coords[0])
    h = q["heading"][0]
    c = engine.snapper.snap(lon, lat, prof.usable, search_radius=q["radius"][0],
                            heading=None if h is None else h[0], heading_tolerance=None if h is None else h[1],
                            preferred_side=q["side"][0], index=0, field="coordinates", at_least=q["number"])
    g = engine.graph
    seg = np.asarray(c.edge, dtype=np.int64) >> 1
    # one waypoint per road segment (both directions of a segment snap to the same point), nearest first
    _, first = np.unique(seg, return_index=True)
    order = np.sort(first)[: q["number"]]
    names = _edge_names(engine, np.asarray(c.edge)[order])
    nodes = np.asarray(g.node_osm_id)[np.column_stack([np.asarray(g.edge_src)[c.edge[order]],
                                                       np.asarray(g.edge_dst)[c.edge[order]]])]
    wps = []
    for k, i in enumerate(order.tolist()):
        w = _waypoint(c.lon[i], c.lat[i], c.distance[i], names[k], q)
        w["nodes"] = [int(x) for x in nodes[k]]
        wps.append(w)
    return {"code": "Ok", "waypoints": wps}


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
    body = _route_body(pts, costing, wrap, ["break"] * len(pts))
    if n == 2 and not q["roundtrip"]:  # nothing to order
        best, order = engine.compute_route(body).best, [0, 1]
    else:
        order, _method, _cost, _given, best = optimise(engine, validate(OptimisedRouteRequest, body))
    out: dict[str, Any] = {"code": "Ok", "trips": [route_object(best, q, _MODE.get(costing, "driving"), graph=engine.graph)]}
    if not q["skip_waypoints"]:
        in_trip = _waypoints(best, q, engine, costing)
        waypoints: list[dict | None] = [None] * n
        for pos, orig in enumerate(order):
            if orig < n and waypoints[orig] is None:
                waypoints[orig] = {**in_trip[pos], "waypoint_index": pos, "trips_index": 0}
        out["waypoints"] = waypoints
    return out


def match(engine, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    from geoengine.routing.matching import UNMATCHED
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
    mode = _MODE.get(costing, "driving")
    # per trace point: its section (matching) and the edge it lies on
    sizes = [len(sec.edges) for sec in res.sections]
    sec_of_edge = np.repeat(np.arange(len(sizes)), sizes)
    all_edges = np.concatenate([sec.edges for sec in res.sections])
    kept = (res.type != UNMATCHED) & (res.edge_index >= 0)
    sec_of_point = np.where(kept, sec_of_edge[np.clip(res.edge_index, 0, len(sec_of_edge) - 1)], -1)
    names = _edge_names(engine, all_edges[np.clip(res.edge_index, 0, len(all_edges) - 1)])
    matchings = []
    for k, route_k in enumerate(matched):
        r = route_object(route_k, q, mode, graph=engine.graph)
        in_sec = sec_of_point == k
        r["confidence"] = round(float((res.type[in_sec] != UNMATCHED).mean()) if in_sec.any() else 0.0, 3)
        matchings.append(r)
    out: dict[str, Any] = {"code": "Ok", "matchings": matchings}
    if not q["skip_waypoints"]:
        tracepoints: list[dict | None] = []
        counters: dict[int, int] = {}
        dist = np.nan_to_num(res.distance).tolist()
        for i, s in enumerate(sec_of_point.tolist()):
            if s < 0:
                tracepoints.append(None)
                continue
            w = _waypoint(res.lon[i], res.lat[i], dist[i], names[i], q)
            w.update(matchings_index=s, waypoint_index=counters.get(s, 0), alternatives_count=0)
            counters[s] = counters.get(s, 0) + 1
            tracepoints.append(w)
        out["tracepoints"] = tracepoints
    return out


_SERVICES = {"route": route, "table": table, "match": match, "nearest": nearest, "trip": trip}


def run(service: str, engine, version: str, profile: str, coordinates: str, query: Mapping[str, str]) -> dict:
    """One OSRM request -> its response body. Raises OsrmError (engine errors are mapped)."""
    if service not in _SERVICES:
        raise OsrmError("InvalidService", f"unknown service '{service}'; services: {', '.join(SERVICES)}")
    if version != "v1":
        raise OsrmError("InvalidVersion", f"unknown version '{version}'; this server speaks v1")
    try:
        return _SERVICES[service](engine, profile, coordinates, query)
    except OsrmError:
        raise
    except GeoengineError as exc:
        raise from_engine_error(exc, service) from None
