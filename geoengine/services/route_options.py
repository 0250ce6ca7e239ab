"""Route options applied to typed routes after the search: `linear_references` (OpenLR),
`elevation_interval` and `date_time`.

date_time (Valhalla style) `{"type": t, "value": "YYYY-MM-DDTHH:MM"}`:
  0 current (departure now; `value` ignored), 1 depart_at, 2 arrive_by, 3 invariant (treated like
  depart_at). Times are local wall-clock times at the locations, as given: no time zone conversion is
  made (the bundles carry no time zone boundaries); "current" uses the server clock in UTC unless the
  caller passes `now`. Each leg gets its departure and arrival, each maneuver its departure (when it
  begins) and arrival (when it ends), each location its date_time (arrival there; departure for the
  first) and the route its departure / arrival. Waiting times (`waiting_secs`) are spent at the
  location before leaving it. For arrive_by the departure is the arrival minus the trip time (speeds
  are time-independent, so this is exact).

elevation_interval (metres, > 0): each leg gets the heights (NaN where the DEM has no value) of points
  every `elevation_interval` metres along its shape, from its start to its end (the end always
  included). 0 or absent means no elevation. A bundle built without elevation data gives 422; more
  than `max_points` samples in a leg gives 400.
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


_DAY = (r"(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]|[12][0-9]|30))"
        r"|(02-(0[1-9]|1[0-9]|2[0-8])))")
#: FORMAT between DATE_MIN and DATE_MAX as a pattern (29 February aside: strptime's calendar decides it)
DATE_PATTERN = rf"^(19[0-9][0-9]|2[01][0-9][0-9])-{_DAY}T([01][0-9]|2[0-3]):[0-5][0-9]$"


def date_time_schema(types=tuple(DATE_TIME_TYPES)) -> dict:
    """The JSON Schema of the date_time object parse_date_time reads (the OpenAPI document's); `types`:
    the types the endpoint takes (/matrix departs: no arrive_by)."""
    return {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "integer", "enum": list(types)}},
        "if": {"properties": {"type": {"enum": [1, 2, 3]}}},  # type 0 (now) ignores value
        "then": {"required": ["value"], "properties": {"value": {"type": "string", "pattern": DATE_PATTERN}}},
        "description": "{type: 0 current, 1 depart_at, 2 arrive_by, 3 invariant; value: local time "
                       "'YYYY-MM-DDTHH:MM' between 1900-01-01T00:00 and 2199-12-31T23:59, required for types 1-3}",
    }


def parse_date_time(date_time, now: datetime | None = None, field: str = "date_time") -> tuple[int, datetime]:
    """(type, datetime) from a date_time object; InvalidRequest naming the field when malformed."""
    if not isinstance(date_time, dict):
        raise InvalidRequest.field(field, 'an object {"type": 0|1|2|3, "value": "YYYY-MM-DDTHH:MM"}')
    t = date_time.get("type")
    if type(t) is float and t.is_integer():  # JSON: 1.0 is the integer 1
        t = int(t)
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
                                   f"{DATE_MIN.strftime(FORMAT)} to {DATE_MAX.strftime(FORMAT)}")
    return t, when


def selection(date_time, now: datetime | None = None, field: str = "date_time"):
    """The time-of-day bucket a date_time selects (`geoengine.traffic.timeofday.Selection`: bucket,
    current, when, kind), None when absent; InvalidRequest naming the field when malformed. Type 0 is
    the server clock's time (UTC) unless `now` is given (docs/traffic.md)."""
    if date_time is None:
        return None
    from geoengine.traffic.timeofday import Selection, bucket_of

    kind, when = parse_date_time(date_time, now, field=field)
    return Selection(bucket_of(when), kind == 0, when, kind)


def apply_date_time(route, date_time, waits=None, *, now: datetime | None = None):
    """Set departure / arrival times on a typed Route (in place; also returned). `waits`: the waiting
    seconds at each location (default none)."""
    kind, when = parse_date_time(date_time, now)
    locs = route.locations
    w = np.zeros(len(locs)) if waits is None else np.asarray(waits, dtype=np.float64)
    bad = np.flatnonzero(~((w >= 0) & (w <= MAX_WAITING_SECS)))
    if bad.size:
        raise InvalidRequest.field(f"locations[{int(bad[0])}].waiting_secs",
                                   f"must be between 0 and {MAX_WAITING_SECS} seconds (7 days)")
    try:
        return _apply_date_time(route, kind, when, w)
    except OverflowError:  # unreachable through the bounds above; kept so no caller ever sees a 500
        raise InvalidRequest.field("date_time", "the trip's times fall outside the supported dates "
                                   f"{DATE_MIN.strftime(FORMAT)} to {DATE_MAX.strftime(FORMAT)}") from None


def _apply_date_time(route, kind, when, w):
    locs = route.locations
    ends = [i for i in range(1, len(locs) - 1) if locs[i].type in ("break", "break_through")] + [len(locs) - 1]
    total = route.time_s
    # arrive_by: the arrival at the last location (before any wait there) is the given time
    start = when - timedelta(seconds=total - w[-1]) if kind == 2 else when
    route.departure = start
    locs[0].date_time = start
    t = start + timedelta(seconds=float(w[0]))
    begin = 0
    for k, leg in enumerate(route.legs):
        end_loc = ends[k]
        # the leg's time includes the wait at its end (and at the first location for leg 0)
        travel = leg.time_s - float(w[end_loc]) - (float(w[0]) if k == 0 else 0.0)
        leg.departure = t
        mt = t
        for m in leg.maneuvers or []:
            m.departure = mt
            mt = mt + timedelta(seconds=float(round(m.time_s, 3)))
            m.arrival = mt
        arrival = t + timedelta(seconds=max(travel, 0.0))
        leg.arrival = arrival
        for i in range(begin + 1, end_loc + 1):
            locs[i].date_time = arrival
        begin = end_loc
        t = arrival + timedelta(seconds=float(w[end_loc]))
    route.arrival = route.legs[-1].arrival if route.legs else start
    route.date_time = (kind, when)
    return route


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


def apply_elevation(engine, route, interval: float, *, max_points: int = MAX_ELEVATION_POINTS):
    """Heights every `interval` metres along each leg of a typed Route (in place; also returned)."""
    if interval is None or interval <= 0:
        return route
    if not engine.bundle.has_stage("elevation"):
        raise Unprocessable(f"elevation_interval: bundle {engine.bundle.path} was built without elevation data",
                            errors=[FieldError("elevation_interval", "this bundle has no elevation data")])
    from geoengine.geo import cumulative_distance_m

    for k, leg in enumerate(route.legs):
        length = float(cumulative_distance_m(leg.lat, leg.lon)[-1]) if len(leg.lat) else 0.0
        if length / interval + 1 > max_points:
            raise InvalidRequest.field("elevation_interval", f"leg {k} is {length:.0f} m long: an interval of {interval:g} m "
                                       f"gives more than {max_points} samples; use at least {length / (max_points - 1):.1f} m")
        slon, slat, _d = sample_along(leg.lon, leg.lat, float(interval))
        leg.elevation_interval = float(interval)
        leg.elevation = np.asarray(engine.elevation(lat=slat, lon=slon), dtype=np.float64)
    return route


def apply(engine, result, req, prof, sel=None) -> None:
    """The options linear_references, elevation_interval and date_time of a RouteRequest `req` (each
    may be absent), applied to every route of `result` (a RouteResult). `sel`: the date_time's
    `geoengine.traffic.timeofday.Selection`; with time-of-day profiles in force each route's times are
    the time-dependent ones (docs/traffic.md) before its departure and arrival are set."""
    waits = [float(loc.waiting_secs or 0) for loc in req.locations]
    for route in result.routes:
        if getattr(req, "linear_references", False):
            from geoengine.routing.openlr import route_linear_references

            route.linear_references = route_linear_references(engine.router, prof, route.pieces)
        if getattr(req, "elevation_interval", None):
            apply_elevation(engine, route, float(req.elevation_interval))
        if getattr(req, "date_time", None) is not None:
            if sel is not None:
                from geoengine.traffic.timeofday import apply_eta

                apply_eta(engine.router, prof, route, sel, waits)
            apply_date_time(route, req.date_time, waits, now=None if sel is None else sel.when)
