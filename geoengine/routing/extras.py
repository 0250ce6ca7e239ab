"""Post-processing of a /route trip document for the options `date_time`, `elevation_interval`,
`alternates` (geoengine.routing.alternates) and `linear_references` (geoengine.routing.openlr).

    doc = router.route(req)
    doc = apply(engine, doc, req)   # or apply_date_time(doc, ...) / apply_elevation(engine, doc, ...)

date_time (Valhalla style) `{"type": t, "value": "YYYY-MM-DDTHH:MM"}`:
  0 current (departure now; `value` ignored), 1 depart_at, 2 arrive_by, 3 invariant (treated like
  depart_at). Times are local wall-clock times at the locations, as given: no time zone conversion is
  made (the bundles carry no time zone boundaries); "current" uses the server clock in UTC unless the
  caller passes `now`. Each leg gets `departure` and `arrival`, each maneuver `departure` (when it
  begins) and `arrival` (when it ends), each trip location `date_time` (arrival there; departure for
  the first) and the trip `departure` / `arrival`; all formatted "YYYY-MM-DDTHH:MM". Waiting times
  (`waiting_secs`) are spent at the location before leaving it. For arrive_by the departure is the
  arrival minus the trip time (speeds are time-independent, so this is exact).

elevation_interval (metres, > 0): each leg gets `elevation_interval` and `elevation`, the heights in
  metres (0.1 m, null where the DEM has no value) of points every `elevation_interval` metres along the
  leg shape, from its start to its end (the end always included), from `engine.elevation`. 0 or absent
  means no elevation. A bundle built without elevation data gives 422; more than `max_points` samples
  in a leg gives 400.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from geoengine.errors import FieldError, InvalidRequest, Unprocessable

FORMAT = "%Y-%m-%dT%H:%M"
DATE_TIME_TYPES = {0: "current", 1: "depart_at", 2: "arrive_by", 3: "invariant"}
MAX_ELEVATION_POINTS = 10_000
# The dates a date_time value may name, and the longest wait at one location: bounds that keep every
# departure and arrival computed from them (value +- trip time + waits) inside datetime's range.
DATE_MIN = datetime(1900, 1, 1)
DATE_MAX = datetime(2199, 12, 31, 23, 59)
MAX_WAITING_SECS = 7 * 86_400


def parse_date_time(date_time, now: datetime | None = None, field: str = "date_time") -> tuple[int, datetime]:
    """(type, datetime) from a date_time object; InvalidRequest naming the field when malformed."""
    if not isinstance(date_time, dict):
        raise InvalidRequest.field(field, 'an object {"type": 0|1|2|3, "value": "YYYY-MM-DDTHH:MM"}')
    t = date_time.get("type")
    if isinstance(t, bool) or not isinstance(t, int) or t not in DATE_TIME_TYPES:
        raise InvalidRequest.field(f"{field}.type", "0 (current), 1 (depart_at), 2 (arrive_by) or 3 (invariant)")
    if t == 0:
        base = now or datetime.now(UTC).replace(tzinfo=None)
        return t, base.replace(second=0, microsecond=0)
    value = date_time.get("value")
    if not isinstance(value, str):
        raise InvalidRequest.field(f"{field}.value", "required for types 1-3: a local time 'YYYY-MM-DDTHH:MM'")
    try:
        when = datetime.strptime(value, FORMAT)
    except ValueError:
        raise InvalidRequest.field(f"{field}.value", f"'{value}' is not a time 'YYYY-MM-DDTHH:MM'") from None
    if not DATE_MIN <= when <= DATE_MAX:
        raise InvalidRequest.field(f"{field}.value", f"'{value}' is outside the supported dates "
                                   f"{_fmt(DATE_MIN)} to {_fmt(DATE_MAX)}")
    return t, when


def _fmt(dt: datetime) -> str:
    return dt.strftime(FORMAT)


def apply_date_time(doc: dict, date_time, locations=None, *, now: datetime | None = None) -> dict:
    """Add departure / arrival times to the trip of `doc` (in place; also returned). `locations`: the
    request's locations (their waiting_secs), optional."""
    kind, when = parse_date_time(date_time, now)
    try:
        return _apply_date_time(doc, kind, when, locations)
    except OverflowError:  # unreachable through the models' bounds; library callers passing dicts
        raise InvalidRequest.field("date_time", "the trip's times fall outside the supported dates "
                                   f"{_fmt(DATE_MIN)} to {_fmt(DATE_MAX)}") from None


def _apply_date_time(doc: dict, kind: int, when: datetime, locations) -> dict:
    trip = doc["trip"]
    legs = trip["legs"]
    tlocs = trip["locations"]
    waits = np.zeros(len(tlocs))
    if locations is not None:
        for i, loc in enumerate(locations[:len(tlocs)]):
            w = loc.get("waiting_secs") if isinstance(loc, dict) else getattr(loc, "waiting_secs", None)
            w = float(w or 0)
            if not 0 <= w <= MAX_WAITING_SECS:
                raise InvalidRequest.field(f"locations[{i}].waiting_secs",
                                           f"must be between 0 and {MAX_WAITING_SECS} seconds (7 days)")
            waits[i] = w
    ends = _leg_end_locations(trip)
    total = float(trip["summary"]["time"])
    # arrive_by: the arrival at the last location (before any wait there) is the given time
    start = when - timedelta(seconds=total - waits[-1]) if kind == 2 else when
    trip["departure"] = _fmt(start)
    tlocs[0]["date_time"] = _fmt(start)
    t = start + timedelta(seconds=float(waits[0]))
    begin = 0
    for k, leg in enumerate(legs):
        end_loc = ends[k]
        # the leg's summary time includes the wait at its end (and at the first location for leg 0)
        travel = float(leg["summary"]["time"]) - float(waits[end_loc]) - (float(waits[0]) if k == 0 else 0.0)
        leg["departure"] = _fmt(t)
        mt = t
        for m in leg.get("maneuvers", []):
            m["departure"] = _fmt(mt)
            mt = mt + timedelta(seconds=float(m.get("time", 0.0)))
            m["arrival"] = _fmt(mt)
        arrival = t + timedelta(seconds=max(travel, 0.0))
        leg["arrival"] = _fmt(arrival)
        for i in range(begin + 1, end_loc + 1):
            tlocs[i]["date_time"] = _fmt(arrival)
        begin = end_loc
        t = arrival + timedelta(seconds=float(waits[end_loc]))
    trip["arrival"] = legs[-1]["arrival"] if legs else _fmt(start)
    trip["date_time"] = {"type": kind, "type_name": DATE_TIME_TYPES[kind], "value": _fmt(when)}
    return doc


def _leg_end_locations(trip) -> list[int]:
    """Index of the location each leg ends at (break / break_through locations and the last)."""
    locs = trip["locations"]
    ends = [i for i in range(1, len(locs) - 1) if locs[i].get("type", "break") in ("break", "break_through")]
    ends.append(len(locs) - 1)
    return ends


def _shape_lonlat(shape, shape_format: str):
    from geoengine.geo import decode_polyline

    if isinstance(shape, dict):
        a = np.asarray(shape["coordinates"], dtype=np.float64).reshape(-1, 2)
        return a[:, 0], a[:, 1]
    lat, lon = decode_polyline(shape, 5 if shape_format == "polyline5" else 6)
    return lon, lat


def sample_along(lon, lat, interval: float):
    """Points every `interval` metres along a polyline (its first and last point included)."""
    from geoengine.geo import cumulative_distance_m

    cum = cumulative_distance_m(lat, lon)
    total = float(cum[-1]) if len(cum) else 0.0
    d = np.arange(0.0, total, interval)
    if len(d) == 0 or d[-1] < total:
        d = np.append(d, total)
    # strictly increasing abscissa for np.interp (repeated points have zero-length segments)
    keep = np.concatenate([[True], np.diff(cum) > 0])
    c, lo, la = cum[keep], lon[keep], lat[keep]
    if len(c) == 1:
        return np.full(len(d), lo[0]), np.full(len(d), la[0]), d
    return np.interp(d, c, lo), np.interp(d, c, la), d


def apply_elevation(engine, doc: dict, interval: float, shape_format: str = "polyline6", *,
                    max_points: int = MAX_ELEVATION_POINTS) -> dict:
    """Add `elevation_interval` and `elevation` (heights every `interval` metres) to each leg."""
    if interval is None or interval <= 0:
        return doc
    if not engine.bundle.has_stage("elevation"):
        raise Unprocessable(f"elevation_interval: bundle {engine.bundle.path} was built without elevation data",
                            errors=[FieldError("elevation_interval", "this bundle has no elevation data")])
    for k, leg in enumerate(doc["trip"]["legs"]):
        lon, lat = _shape_lonlat(leg["shape"], shape_format)
        from geoengine.geo import cumulative_distance_m

        length = float(cumulative_distance_m(lat, lon)[-1]) if len(lat) else 0.0
        if length / interval + 1 > max_points:
            raise InvalidRequest.field("elevation_interval", f"leg {k} is {length:.0f} m long: an interval of {interval:g} m "
                                       f"gives more than {max_points} samples; use at least {length / (max_points - 1):.1f} m")
        slon, slat, _d = sample_along(lon, lat, float(interval))
        h = np.asarray(engine.elevation(slat, slon), dtype=np.float64)
        leg["elevation_interval"] = float(interval)
        leg["elevation"] = [None if not np.isfinite(x) else round(float(x), 1) for x in h]
    return doc


def apply(engine, doc: dict, req, searched=None) -> dict:
    """The options alternates, linear_references, elevation_interval and date_time of a RouteRequest
    `req` (each may be absent), applied to the /route document `doc` and to each of its alternates.
    `searched`: the `Router.search` result `doc` was built from (searched again when not given)."""
    alts: list = []
    if getattr(req, "alternates", None) or getattr(req, "linear_references", False):
        from geoengine.routing.alternates import route_alternates, search_request

        searched = searched or search_request(engine.router, req)
        alts = route_alternates(engine.router, req, doc, searched)
        if getattr(req, "linear_references", False):
            from geoengine.routing.openlr import route_linear_references

            prof, _cands, best, _notes = searched
            doc["trip"]["linear_references"] = route_linear_references(engine.router, prof, best)
            for alt_doc, pieces in zip(doc.get("alternates", []), alts, strict=True):
                alt_doc["trip"]["linear_references"] = route_linear_references(engine.router, prof, pieces)
    docs = [doc] + list(doc.get("alternates", []))
    for d in docs:
        if getattr(req, "elevation_interval", None):
            apply_elevation(engine, d, float(req.elevation_interval), req.shape_format)
        if getattr(req, "date_time", None) is not None:
            apply_date_time(d, req.date_time, req.locations)
    return doc
