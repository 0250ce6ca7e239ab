"""The route service: a route request is searched once, built once into a typed `Route` (legs with
lon/lat arrays, metres, seconds, maneuvers, warnings) and rendered by a serializer per dialect
(`geoengine.services.documents`: the /route trip document, /v1/routing/directions, Valhalla, OSRM).

    result = run(engine, RouteRequest(...))          # RouteResult: routes[0] is the best route
    doc = documents.trip.route_document(result)       # the POST /route body

The request path (docs/architecture.md): `run` -> Router.search (snapping, CH/Dijkstra pieces) ->
`build_route` per route (piece geometry, narrative, grades) -> alternates, linear references,
elevation samples and date_time applied to the typed routes (`route_options`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from geoengine.elevation.grades import climb_descent
from geoengine.graph import tags as T
from geoengine.narrative import ManeuverType, normalize_units, resolve_language, road_class_of
from geoengine.narrative.kernels import STOP_KIND_CODES, UNKNOWN_SIDE, leg_inputs, maneuver_table
from geoengine.narrative.locales import load_locale, render_rows
from geoengine.narrative.maneuvers import SIDES, street_names
from geoengine.narrative.path import STOP_KINDS
from geoengine.routing.pieces import Leg, pieces_geometry
from geoengine.routing.router import IS_HIGHWAY
from geoengine.services import route_options
from geoengine.services.alternates import alternatives
from geoengine.services.models import (
    AvoidLocation,
    Costing,
    DirectionsOptions,
    JsonInt,
    Lat,
    Location,
    Lon,
    costing_validator,
)

_CLASS_FOR_NARRATIVE = np.array([int(road_class_of(name, "ferry" if name == "ferry" else None)[0])
                                 for name in T.CLASS_NAMES], dtype=np.uint8)

#: Valhalla's travel_mode and travel_type of each costing
TRAVEL: dict[str, tuple[str, str]] = {
    "auto": ("drive", "car"), "auto_shorter": ("drive", "car"), "taxi": ("drive", "taxi"), "bus": ("drive", "bus"),
    "truck": ("drive", "truck"), "motorcycle": ("drive", "motorcycle"), "motor_scooter": ("drive", "motor_scooter"),
    "pedestrian": ("pedestrian", "foot"), "bicycle": ("bicycle", "road"),
}


MAX_ROUTE_LOCATIONS = 200
MAX_AVOID_POLYGON_POINTS = 10_000


class RouteRequest(BaseModel):
    """POST /route."""

    model_config = ConfigDict(extra="ignore", strict=True)

    locations: list[Location] = Field(min_length=2, max_length=MAX_ROUTE_LOCATIONS,
                                      description=f"Ordered stops, 2 to {MAX_ROUTE_LOCATIONS}")
    costing: Costing = "auto"
    costing_options: dict[str, Any] | None = Field(
        None, description="Options of the costing, flat ({\"use_highways\": 0.3}) or under the costing key "
        "({\"auto\": {...}}); options given for other costings are ignored, as Valhalla does; see "
        "GET /costing/options/{costing}")
    directions_options: DirectionsOptions = Field(default_factory=DirectionsOptions)
    avoid_locations: list[AvoidLocation] | None = None
    avoid_polygons: list[Annotated[list[tuple[Lon, Lat]], Field(min_length=3, max_length=MAX_AVOID_POLYGON_POINTS)]] | None = Field(
        None, description="Rings of [lon, lat] pairs; roads crossing them are avoided")
    alternates: JsonInt | None = Field(None, ge=0, le=3, description="Number of alternate routes, 1 to 3 (0: none)")
    date_time: dict[str, Any] | None = None
    shape_format: Literal["polyline6", "polyline5", "geojson"] = "polyline6"
    linear_references: bool = False
    elevation_interval: float | None = Field(None, ge=0)
    id: str | None = Field(None, description="Echoed in the response")

    _costing_known = costing_validator("route")

    @field_validator("avoid_polygons", mode="before")
    @classmethod
    def _rings_as_pairs(cls, v):
        """JSON has no tuples: [lon, lat] lists become pairs, so strict validation checks each number."""
        if isinstance(v, list):
            return [[tuple(p) if isinstance(p, list) else p for p in ring] if isinstance(ring, list) else ring
                    for ring in v]
        return v


_TYPE_NAMES = {int(t): t.key for t in ManeuverType}
_ROUNDABOUT_ENTER = int(ManeuverType.ROUNDABOUT_ENTER)
_TEXT_KEYS = ("instruction", "verbal_transition_alert_instruction", "verbal_pre_transition_instruction",
              "verbal_post_transition_instruction", "verbal_succinct_transition_instruction")



# -- the typed route -------------------------------------------------------------------------------------
@dataclass(slots=True)
class Maneuver:
    """One maneuver of a leg. `type` is Valhalla's maneuver type code; `text` holds the instruction
    and its verbal forms when instructions were asked for."""

    type: int
    street_names: list[str]
    length_m: float
    time_s: float
    cost: float
    begin_shape_index: int
    end_shape_index: int
    bearing_before: int | None
    bearing_after: int | None
    travel_mode: str
    travel_type: str
    roundabout_exit_count: int | None = None
    side: str | None = None
    stop_index: int | None = None
    stop_kind: str | None = None
    exit_street_names: list[str] = field(default_factory=list)
    #: the narrative layer's rendering of this maneuver (numbers rounded in the route's units, texts
    #: when instructions were asked for), which the trip serializer starts from instead of rounding
    #: and building it again
    rendered: dict = field(default_factory=dict, repr=False)
    departure: datetime | None = None
    arrival: datetime | None = None
    #: the leg's edges the maneuver covers: leg.edges[begin_edge:end_edge]
    begin_edge: int = 0
    end_edge: int = 0

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[self.type]

    @property
    def text(self) -> dict[str, str]:
        """The instruction and its verbal forms (empty unless instructions were asked for)."""
        d = self.rendered
        return {k: d[k] for k in _TEXT_KEYS if k in d}

    @property
    def instruction(self) -> str:
        return self.rendered.get("instruction", "")


@dataclass
class RouteLeg:
    """A leg between two stops: shape, the directed edges with the covered fraction of each, totals
    (seconds and metres from the search's packed metric, waiting times included), road features."""

    lon: np.ndarray
    lat: np.ndarray
    edges: np.ndarray
    covered: np.ndarray
    time_s: float
    length_m: float
    cost: float
    has_toll: bool
    has_highway: bool
    has_ferry: bool
    maneuvers: list[Maneuver] | None = None
    climb_m: float | None = None
    descent_m: float | None = None
    pieces: list[Leg] = field(default_factory=list)
    #: per traversed edge: its first and last index in (lon, lat), and the seconds spent on it (the
    #: covered share of the edge's time; turn delays and waiting are not in it)
    shape_begin: np.ndarray | None = None
    shape_end: np.ndarray | None = None
    edge_time_s: np.ndarray | None = None
    departure: datetime | None = None
    arrival: datetime | None = None
    elevation_interval: float | None = None
    elevation: np.ndarray | None = None
    #: made with the search (a plain route's piece): [min_lon, min_lat, max_lon, max_lat] of the shape,
    #: and (digits, the shape as an encoded polyline of that precision)
    bbox: list | None = field(default=None, repr=False)
    polyline: tuple | None = field(default=None, repr=False)


@dataclass
class RouteLocation:
    """A request location with the position the route uses."""

    type: str
    lon: float
    lat: float
    original_index: int
    snapped_lon: float
    snapped_lat: float
    snapped_distance_m: float
    name: str | None = None
    street: str | None = None
    city: str | None = None
    date_time: datetime | None = None


@dataclass
class Route:
    costing: str
    units: str
    language: str
    legs: list[RouteLeg]
    locations: list[RouteLocation]
    warnings: list[str] = field(default_factory=list)
    linear_references: list[str] | None = None
    date_time: tuple[int, datetime] | None = None  # (type, the given time) when date_time was asked for
    departure: datetime | None = None
    arrival: datetime | None = None
    status_message: str = "Found route between points"
    grades: bool = False  # the graph has DEM grades: the route reports its climb and descent
    #: bool[E], the directed edges the route's costing and options may use (the profile's own array)
    usable: np.ndarray | None = field(default=None, repr=False)

    @property
    def time_s(self) -> float:
        return float(sum(leg.time_s for leg in self.legs))

    @property
    def length_m(self) -> float:
        return float(sum(leg.length_m for leg in self.legs))

    @property
    def cost(self) -> float:
        return float(sum(leg.cost for leg in self.legs))

    @property
    def lon(self) -> np.ndarray:
        """The whole route's shape (consecutive legs share their end point)."""
        return _joined([leg.lon for leg in self.legs])

    @property
    def lat(self) -> np.ndarray:
        return _joined([leg.lat for leg in self.legs])

    @property
    def pieces(self) -> list[Leg]:
        return [p for leg in self.legs for p in leg.pieces]

    def has(self, feature: str) -> bool:
        return any(getattr(leg, feature) for leg in self.legs)

    @property
    def climb(self) -> tuple[float, float] | None:
        """(metres climbed, metres descended) over the whole route, when the graph has grades."""
        if not self.grades:
            return None
        return (sum(leg.climb_m or 0.0 for leg in self.legs), sum(leg.descent_m or 0.0 for leg in self.legs))


@dataclass
class RouteResult:
    """The answer to a route request: the best route, then its alternates."""

    routes: list[Route]
    shape_format: str = "polyline6"
    id: str | None = None

    @property
    def best(self) -> Route:
        return self.routes[0]


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p if i == 0 else p[1:] for i, p in enumerate(parts)]) if parts else np.empty(0)


# -- building ------------------------------------------------------------------------------------------------
def _usable_out(prof) -> np.ndarray:
    cached = getattr(prof, "_usable_out", None)
    if cached is None:
        g = prof.graph
        cached = np.bincount(np.asarray(g.edge_src)[prof.usable], minlength=g.n_nodes)
        prof._usable_out = cached
    return cached


def _street_strings(graph) -> tuple[np.ndarray, list[str]]:
    """(per string id of the graph: the id of the stripped string, 0 for empty; the stripped strings),
    made once per graph: equal ids are equal street names."""
    table = getattr(graph, "_narrative_strings", None)
    if table is None:
        ids: dict[str, int] = {"": 0}
        canon = np.fromiter((ids.setdefault(x.strip(), len(ids)) for x in graph.strings), np.int64,
                            len(graph.strings))
        table = graph._narrative_strings = (canon, list(ids))
    return table


def _leg_maneuvers(graph, prof, lon, lat, begin, end, edges, covered, locations, leg_pieces, a: int, b: int,
                   opts: DirectionsOptions) -> list[Maneuver]:
    """The typed maneuvers of the leg from location a to location b (its pieces, shape and edges):
    the narrative's kernels make the rows, Python one Maneuver and its rendering per row."""
    units = normalize_units(opts.units)
    canon, strings = _street_strings(graph)
    n = len(edges)
    if n == 0:
        raise ValueError("a path needs at least one edge")
    c = np.ascontiguousarray  # the array types `geoengine warm` compiled the kernels for
    lon, lat, begin, end = c(lon, np.float64), c(lat, np.float64), c(begin, np.int64), c(end, np.int64)
    edges, covered = c(edges, np.int64), c(covered, np.float64)
    sines, edge_f, edge_i, ok = leg_inputs(
        lon, lat, begin, end, edges, covered, graph.seg_length, graph.seg_class, graph.seg_flags, graph.seg_name,
        graph.seg_ref, canon, graph.edge_src, _usable_out(prof), prof.usable, prof.time, prof.cost,
        _CLASS_FOR_NARRATIVE)
    if not ok:
        raise ValueError("shape_begin/shape_end must satisfy 0 <= begin <= end < len(lon), in travel order")
    # the origin and the destination, then the stops between the leg's pieces, all sides from the points
    ns = len(leg_pieces) - 1
    stops_i = np.zeros((ns + 2, 5), np.int64)
    stops_i[:, 2] = UNKNOWN_SIDE
    stops_i[:, 4] = 1
    stops_f = np.empty((ns + 2, 2))
    stops_f[0] = float(locations[a].lon), float(locations[a].lat)
    stops_f[1] = float(locations[b].lon), float(locations[b].lat)
    if ns:
        edge = np.cumsum([len(p.edges) for p in leg_pieces[:-1]]) - 1
        if edge.min() < 0 or edge.max() >= n:
            raise ValueError(f"stop edge {int(edge.min() if edge.min() < 0 else edge.max())} outside 0..{n - 1}")
        stops_i[2:, 0] = edge
        stops_i[2:, 1] = [STOP_KIND_CODES[x.type] for x in locations[a + 1:b]]
        stops_i[2:, 3] = np.arange(1, ns + 1)
        stops_f[2:] = [(float(x.lon), float(x.lat)) for x in locations[a + 1:b]]
    rows, vals = maneuver_table(lon, lat, sines, edge_f, edge_i, stops_i, stops_f)
    mode, kind = TRAVEL[prof.costing]
    loc = load_locale(resolve_language(opts.language))
    dtype = opts.directions_type
    made = []
    for (code, n1, n2, bshape, eshape, bb, ba, bedge, eedge, rbc, x1, x2, p1, p2, side, sidx, skind), \
            (length, seconds, cost) in zip(rows.tolist(), vals.tolist(), strict=True):
        made.append((code, ([strings[n1], strings[n2]] if n2 else [strings[n1]]) if n1 else [], length, seconds,
                     bshape, eshape, bb, ba, None if rbc < 0 else rbc, SIDES[side], None if sidx < 0 else sidx,
                     None if skind < 0 else STOP_KINDS[skind], street_names(strings, x1, x2) if x1 else [],
                     street_names(strings, p1, p2) if p1 else [], cost, bedge, eedge))
    texts = render_rows(loc, units, dtype, made)
    return [Maneuver(code, names, length, seconds, cost, bshape, eshape, bb, ba, mode, kind, rbc, side, sidx, skind,
                     exit_names if code == _ROUNDABOUT_ENTER else [], d, None, None, bedge, eedge)
            for (code, names, length, seconds, bshape, eshape, bb, ba, rbc, side, sidx, skind, exit_names, _, cost,
                 bedge, eedge), d in zip(made, texts, strict=True)]


def build_route(router, prof, locations, cands, pieces: list[Leg], notes: list[str],
                opts: DirectionsOptions) -> Route:
    """The typed Route through `locations` (objects with lon, lat, type, waiting_secs and optionally
    name/street/city) from the search's candidates and pieces; legs end at break / break_through
    locations and the last. Maneuvers are made unless opts.directions_type is 'none'."""
    graph = router.graph
    n = len(locations)
    if opts.directions_type != "none":
        resolve_language(opts.language)
    bounds = [0] + [i for i in range(1, n - 1) if locations[i].type in ("break", "break_through")] + [n - 1]
    grades = bool(graph.meta.get("grades"))
    legs: list[RouteLeg] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        leg_pieces = pieces[a:b]
        lon, lat, begin, end, edges, covered = pieces_geometry(graph, leg_pieces)
        maneuvers = None
        if opts.directions_type != "none":
            maneuvers = _leg_maneuvers(graph, prof, lon, lat, begin, end, edges, covered, locations, leg_pieces,
                                       a, b, opts)
        wait = sum(float(locations[i].waiting_secs or 0) for i in range(a + 1, b + 1))
        if a == 0:
            wait += float(locations[0].waiting_secs or 0)
        made = leg_pieces[0].summary if len(leg_pieces) == 1 else None
        if made is not None:  # found by the plain-route kernel with its flags, bbox, polyline and climb
            flags, highway, seconds = made.flags, made.highway, made.seconds
        else:
            k = edges >> 1
            flags = int(np.bitwise_or.reduce(np.asarray(graph.seg_flags)[k])) if len(k) else 0
            highway = bool(IS_HIGHWAY[np.asarray(graph.seg_class)[k]].any())
            seconds = prof.time[edges] * covered
        leg = RouteLeg(
            lon=lon, lat=lat, edges=edges, covered=covered,
            # totals from the search's packed metric (turn delays included): the same numbers /matrix gives
            time_s=float(sum(p.time_s for p in leg_pieces)) + wait,
            length_m=float(sum(p.length_m for p in leg_pieces)),
            cost=float(sum(p.cost for p in leg_pieces)),
            has_toll=bool(flags & T.F_TOLL), has_highway=highway,
            has_ferry=bool(flags & T.F_FERRY), maneuvers=maneuvers, pieces=list(leg_pieces),
            shape_begin=begin, shape_end=end, edge_time_s=seconds,
            bbox=None if made is None else made.bbox, polyline=None if made is None else made.polyline)
        if grades:  # metres climbed and descended, from the DEM grades of the traversed edges
            climb, descent = (made.climb, made.descent) if made is not None else climb_descent(graph, edges, covered)
            if climb is not None:
                leg.climb_m, leg.descent_m = float(climb), float(descent)
        legs.append(leg)
    route_locations = []
    for i, loc in enumerate(locations):
        c = cands[i]
        # the candidate the path actually uses (it arrives there, or leaves from there for the origin)
        k = pieces[i - 1].dst_index if i > 0 else pieces[0].src_index
        k = k if 0 <= k < len(c["distance"]) else 0
        route_locations.append(RouteLocation(
            type=loc.type, lon=float(loc.lon), lat=float(loc.lat), original_index=i,
            snapped_lon=float(c["lon"][k]), snapped_lat=float(c["lat"][k]), snapped_distance_m=float(c["distance"][k]),
            name=getattr(loc, "name", None), street=getattr(loc, "street", None), city=getattr(loc, "city", None)))
    return Route(costing=prof.costing, units=opts.units, language=opts.language, legs=legs,
                 locations=route_locations, warnings=list(notes), grades=grades, usable=prof.usable)


_DIGITS = {"polyline6": 6, "polyline5": 5}


def run(engine, req: RouteRequest, *, field: str = "locations", alternates: int | None = None) -> RouteResult:
    """Search once, build the best route and its alternates, apply the request's options."""
    router = engine.router
    sel = route_options.selection(req.date_time)  # the date_time's quarter hour selects the metric (docs/traffic.md)
    s = router.search(req.costing, req.costing_options, req.locations, avoid_locations=req.avoid_locations,
                      avoid_polygons=req.avoid_polygons, field=field, polyline=_DIGITS.get(req.shape_format, 0),
                      bucket=sel)
    opts = req.directions_options
    routes = [build_route(router, s.prof, req.locations, s.cands, s.pieces, s.notes, opts)]
    n_alt = req.alternates if alternates is None else alternates
    if n_alt:
        for pieces in alternatives(router, s.prof, s.cands, int(n_alt), best=s.pieces):
            routes.append(build_route(router, s.prof, req.locations, s.cands, pieces, s.notes, opts))
    result = RouteResult(routes=routes, shape_format=req.shape_format, id=req.id)
    route_options.apply(engine, result, req, s.prof, sel=sel)
    return result
