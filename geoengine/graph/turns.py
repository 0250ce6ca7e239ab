"""The turn-expanded (edge-based) graph on which every routing algorithm runs.

Vertices are the directed edges of the road graph (0..E-1). An arc e1 -> e2 exists when e1 ends where
e2 starts, both are usable (finite cost), the turn is not forbidden by a `no_*` restriction, e1 has no
`only_*` restriction that names another edge, and e2 is not the reverse of e1 (a U-turn) unless e1 ends
at a dead end (no other usable edge leaves that node). The arc costs `edge_cost[e2]` plus an optional
turn penalty, so a path e_0, e_1, ..., e_k costs (remaining part of e_0) + sum of arcs.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from geoengine.graph import tags as T


def turn_angles(graph, e1: np.ndarray, e2: np.ndarray) -> np.ndarray:
    """Signed turn angle in degrees for arcs e1 -> e2: 0 straight on, > 0 right, < 0 left, +-180 U-turn."""
    a = np.asarray(graph.edge_bearing_start)[e2].astype(np.float64) - np.asarray(graph.edge_bearing_end)[e1]
    return (a + 540.0) % 360.0 - 180.0


def turn_graph(
    graph,
    edge_cost: np.ndarray,
    edge_length: np.ndarray,
    *,
    mode: str | int | None = None,
    turn_penalty: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edge-based CSR graph `(offsets int64[E+1], targets int32[m], weights float64[m], secondary float64[m])`.

    Contract: `edge_cost` float64[E] (inf = edge unusable, e.g. from `geoengine.costing.edge_costs`),
    `edge_length` float64[E] (carried as the secondary metric; `secondary[arc] = edge_length[e2]`);
    pass a float64[E, k] array (e.g. `np.column_stack([time_s, length_m])`) to carry k metrics, and
    `secondary` is then float64[m, k].
    `mode` ('auto', 'bicycle', ... or a mode bit) selects which turn restrictions apply (pedestrians
    obey none); None applies every restriction. `turn_penalty(angle_deg) -> seconds` (vectorised over
    arcs, angle signed as in `turn_angles`), or an object whose `arcs(TurnArcs) -> seconds` reads the
    junction too (`TurnBase.penalty`), is added to `weights` only. Vertex v of the result is
    directed edge v; the arcs out of v are targets[offsets[v]:offsets[v+1]], sorted by v.
    Vectorised numpy over the graph's `TurnBase`: no per-edge Python loop.
    """
    return turn_base(graph).turn_graph(edge_cost, edge_length, mode=mode, turn_penalty=turn_penalty)[:4]


def turn_base(graph) -> TurnBase:
    """The graph's `TurnBase`, made at the first call and kept on the graph object."""
    base = getattr(graph, "_turn_base", None)
    if base is None or base.graph is not graph:
        base = TurnBase(graph)
        try:
            graph._turn_base = base
        except AttributeError:  # a graph-like object that takes no attributes: not kept
            pass
    return base


#: per road class: whether OSRM's car.lua routes on it (a speed in its `speeds` table, or a ferry);
#: the motor modes' `TurnBase.roads` count only these at a junction
CAR_LUA_CLASS = np.array([name in ("motorway", "trunk", "primary", "secondary", "tertiary", "unclassified",
                                   "residential", "service", "living_street", "ferry") for name in T.CLASS_NAMES])


class TurnBase:
    """What every turn graph of one road graph shares, whatever the costing, options or blocked edges:
    every possible turn (each directed edge into a node followed by each directed edge out of it,
    U-turns included), its angle, whether it is a U-turn, and per travel mode whether a restriction
    forbids it. A profile's turn graph is the subset of these arcs (in the same order) that its usable
    edges keep, so `turn_graph` is a few vectorised passes over them, and the positions it returns
    (`base_index`) map its arcs to anything computed once per base arc (the CCH's supergraph edges).

    Arrays (m = every possible turn, rows by e1 ascending, then the end node's out-edge order):
    `offsets` int64[E+1], `e1`/`e2` int32[m], `uturn` bool[m], `angles` float64[m]."""

    def __init__(self, graph):
        self.graph = graph
        # one pass, each array made at its final size: the vectorised version held about 110 MB of
        # int64 positions and float64 angle temporaries at 2.8 M turns (the routing stage's peak)
        self.offsets, self.e1, self.e2, self.uturn, self.angles = _turn_rows(
            np.asarray(graph.edge_dst), np.asarray(graph.node_out_offsets, dtype=np.int64),
            np.asarray(graph.node_out_edges), np.asarray(graph.edge_bearing_start),
            np.asarray(graph.edge_bearing_end))
        self._forbidden: dict = {}
        self._roads: dict = {}
        self._perceived = None

    def perceived(self) -> tuple[np.ndarray, np.ndarray]:
        """The graph's `perceived_bearings` (start, end), made at the first call and kept."""
        if self._perceived is None:
            self._perceived = perceived_bearings(self.graph)
        return self._perceived

    def perceived_angles(self, idx: np.ndarray) -> np.ndarray:
        """float64[len(idx)]: the turn angles of the base turns at `idx` from `perceived_bearings`
        (signed as `angles`); the bearings are made at the first call and kept (8 bytes per edge)."""
        start, end = self.perceived()
        a = start[self.e2[idx]].astype(np.float64) - end[self.e1[idx]]
        return (a + 540.0) % 360.0 - 180.0

    def roads(self, mode: str | int | None) -> np.ndarray:
        """uint8[N]: per node, the roads (segments) `mode` may drive in at least one direction that meet
        there (OSRM's `number_of_roads` of a turn through the node: incoming one-ways count, roads the
        mode may not use do not; None: roads any mode may use). Made once per mode, kept."""
        if mode not in self._roads:
            graph = self.graph
            seg_ok = self.counted(mode)
            ends = np.concatenate([np.asarray(graph.edge_src)[0::2][seg_ok], np.asarray(graph.edge_dst)[0::2][seg_ok]])
            self._roads[mode] = np.minimum(np.bincount(ends, minlength=graph.n_nodes), 255).astype(np.uint8)
        return self._roads[mode]

    def counted(self, mode: str | int | None) -> np.ndarray:
        """bool[S]: the segments `roads` counts at their ends: those `mode` may drive in at least one
        direction; for the motor modes, the ways OSRM's car.lua keeps in its graph (`seg_car_lua`,
        `tags.in_car_lua_graph`: private roads count, a track without car access tags does not), on
        an older graph the drivable ones of the classes car.lua has speeds for."""
        key = ("counted", mode)
        if key not in self._roads:
            graph = self.graph
            acc = np.asarray(graph.edge_access)
            bit = T.ALL_MODES if mode is None else (T.MODE_BITS[mode] if isinstance(mode, str) else int(mode))
            ok = ((acc[0::2] | acc[1::2]) & bit) != 0
            if mode is not None and (bit & T.MOTOR) == bit:
                car_lua = getattr(graph, "seg_car_lua", None)
                if car_lua is not None:  # the ways car.lua keeps, private ones included
                    ok = np.asarray(car_lua, dtype=bool).copy()
                else:  # a graph built before seg_car_lua: the classes car.lua has speeds for
                    ok &= CAR_LUA_CLASS[np.asarray(graph.seg_class)]
            self._roads[key] = ok
        return self._roads[key]

    def arcs(self, idx: np.ndarray, mode: str | int | None) -> TurnArcs:
        """`TurnArcs` of the base turns at positions `idx`, the roads counted for `mode`."""
        return TurnArcs(self, np.asarray(idx, dtype=np.int64), mode)

    def penalty(self, turn_penalty, idx: np.ndarray, mode: str | int | None) -> np.ndarray:
        """float64[len(idx)]: `turn_penalty`'s seconds for the base turns at positions `idx`. A penalty
        with an `arcs` method (the motor costings' `geoengine.costing.MotorTurns`) is given the
        `TurnArcs` (angle, roads at the junction, U-turn, the two edges); any other callable the angles."""
        idx = np.asarray(idx, dtype=np.int64)
        if not len(idx):
            return np.zeros(0)
        per_arc = getattr(turn_penalty, "arcs", None)
        if per_arc is not None:
            return np.asarray(per_arc(self.arcs(idx, mode)), dtype=np.float64)
        return np.asarray(turn_penalty(self.angles[idx]), dtype=np.float64)

    def allowed(self, mode: str | int | None) -> np.ndarray | None:
        """bool[m]: the turns no restriction of `mode` forbids (None: every restriction applies);
        None when no restriction applies to the mode."""
        forbidden = self.forbidden(mode)
        if forbidden is None:
            return None
        ok = np.ones(len(self.e2), dtype=bool)
        ok[forbidden] = False
        return ok

    def forbidden(self, mode: str | int | None) -> np.ndarray | None:
        """int64[]: the positions of the turns a restriction of `mode` forbids, ascending (None: every
        restriction applies); None when no restriction applies to the mode. Kept per mode: a few
        positions per restriction where a mask per mode held a byte per turn (8 modes: 22 MB at 2.8 M
        turns, for the life of the graph)."""
        if mode not in self._forbidden:
            graph, E = self.graph, self.graph.n_edges
            if mode is None:
                rf, rt, ro = np.asarray(graph.restr_from), np.asarray(graph.restr_to), np.asarray(graph.restr_only)
            else:
                rf, rt, ro = graph.restrictions_for(mode)
            pos = None
            if len(rf):
                # each restriction's row only (np.isin on an int64 key per turn held about 130 MB of
                # temporaries at 2.8 M turns, the routing stage's peak)
                pos = np.flatnonzero(~_allowed_turns(self.offsets, self.e2, np.asarray(rf, np.int64),
                                                     np.asarray(rt, np.int64), np.asarray(ro, np.bool_), E))
            self._forbidden[mode] = pos
        return self._forbidden[mode]

    def turn_graph(self, edge_cost, edge_length, *, mode=None, turn_penalty=None, rows=None):
        """`turn_graph`'s four arrays and `base_index` int64[m']: each arc's position among the base's.
        `rows` (a, b): only the arcs out of edges a..b-1 (the other rows are empty), the same arcs with
        the same values as the whole graph's: a caller that reads the arcs once can take the graph in
        slices of rows and hold one slice's arrays at a time (the routing stage's checks)."""
        graph = self.graph
        E = graph.n_edges
        cost = np.asarray(edge_cost, dtype=np.float64)
        length = np.asarray(edge_length, dtype=np.float64)
        if cost.shape != (E,) or length.shape[:1] != (E,) or length.ndim > 2:
            raise ValueError(f"edge_cost must have shape ({E},) and edge_length ({E},) or ({E}, k)")
        usable = np.isfinite(cost)
        # a dead end for e1: no usable edge leaves its end node but (perhaps) its own reverse
        usable_out = np.bincount(np.asarray(graph.edge_src)[usable], minlength=graph.n_nodes)
        edges = np.arange(E)
        dead_end = (usable_out[np.asarray(graph.edge_dst)] - usable[edges ^ 1]) <= 0
        lo, hi = (0, len(self.e1)) if rows is None else (int(self.offsets[rows[0]]), int(self.offsets[rows[1]]))
        e1, e2 = self.e1[lo:hi], self.e2[lo:hi]
        keep = usable[e1] & usable[e2] & (~self.uturn[lo:hi] | dead_end[e1])
        forbidden = self.forbidden(mode)
        if forbidden is not None:
            keep[forbidden[(forbidden >= lo) & (forbidden < hi)] - lo] = False
        idx = np.flatnonzero(keep)
        if lo:
            idx += lo
        e1, e2 = self.e1[idx], self.e2[idx]
        weights = cost[e2]
        if turn_penalty is not None and len(e1):
            weights += self.penalty(turn_penalty, idx, mode)
        offsets = np.zeros(E + 1, dtype=np.int64)
        np.cumsum(np.bincount(e1, minlength=E), out=offsets[1:])
        return offsets, e2, weights, length[e2], idx


class TurnArcs:
    """Some turns of a `TurnBase` (positions `idx`), with what a turn model reads of each, as arrays
    made when first read: `angle` float64 (signed as in `turn_angles`), `roads` int64 (roads the mode
    may use meeting at the junction, `TurnBase.roads`), `uturn` bool, `e1`/`e2` int32 (the edge in and
    the edge out); `perceived_angle()` the angle from `perceived_bearings`. A kernel may read the
    base's arrays instead (`base`, `idx`, `mode`)."""

    __slots__ = ("base", "graph", "idx", "mode")

    def __init__(self, base: TurnBase, idx: np.ndarray, mode):
        self.base = base
        self.graph = base.graph
        self.idx = idx
        self.mode = mode

    @property
    def angle(self) -> np.ndarray:
        return self.base.angles[self.idx]

    @property
    def uturn(self) -> np.ndarray:
        return self.base.uturn[self.idx]

    @property
    def e1(self) -> np.ndarray:
        return self.base.e1[self.idx]

    @property
    def e2(self) -> np.ndarray:
        return self.base.e2[self.idx]

    @property
    def roads(self) -> np.ndarray:
        """The roads counted at the junction (`TurnBase.roads`), plus the turn's own edges when their
        class is not counted (a turn onto a track still meets the roads of the junction)."""
        e1, e2 = self.e1.astype(np.int64), self.e2.astype(np.int64)
        c = self.base.counted(self.mode)
        extra = (~c[e1 >> 1]).astype(np.int64) + (~c[e2 >> 1] & ((e2 >> 1) != (e1 >> 1))).astype(np.int64)
        return self.base.roads(self.mode)[np.asarray(self.graph.edge_dst)[e1]].astype(np.int64) + extra

    def perceived_angle(self) -> np.ndarray:
        return self.base.perceived_angles(self.idx)


#: OSRM's look-ahead for a road's bearing at a junction (extractor/guidance/coordinate_extractor.cpp):
#: lane width, the plain look-ahead, the far look-ahead, lanes assumed, and the lane factor per class
LANE_WIDTH_M = 3.25
LOOKAHEAD_M = 10.0
FAR_LOOKAHEAD_M = 40.0
ASSUMED_LANES = 2.0
#: on a roundabout's road OSRM reads the point this far along (its `skipping_inaccuracies_distance`)
ROUNDABOUT_M = 2.0


def perceived_bearings(graph) -> tuple[np.ndarray, np.ndarray]:
    """(start float32[E], end float32[E]): each directed edge's bearing where it leaves its start node
    and where it reaches its end node as a driver perceives the junction: the bearing from the junction
    to OSRM's representative coordinate of the road (extractor/intersection/coordinate_extractor.cpp
    `ExtractRepresentativeCoordinate`, modelled case by case in `_representative`): a two-point road
    its other end; a roundabout's road the point 2 m along; a low-priority road (service, track: not
    in car.lua's `road_types`) the point 10 m along; a road whose first piece is longer than its
    assumed width (two lanes of 3.25 m, x2.5 motorway, trunk and their links, x1.5 primary) plus 10 m
    that piece's end; else over its first 40 m plus its width (up to the first point there or beyond,
    as OSRM's length-cached trim keeps it): its end when straight within half a lane; the point 5 m
    along when it starts straight (a quarter lane) for its width plus 10 m; the least-squares line
    (OSRM's, on degrees, sampled every metre) when every point is within 0.35 lane of it; a lane
    offset (`IsDirectOffset`); a curve (`IsCurve`: the corrected point between 4 and 6 m along, cut
    as OSRM's length cache cuts it, which on a short curved road is its far end); the line past the
    first 0.64 x its width within half a lane; else the point 10 m along. Distances are OSRM's cheap
    ruler, deviations to feet found on degrees as OSRM finds them. The road is followed through nodes
    car.lua compresses away (`car_continuation`: a footway or track crossing, two pieces of one
    street), as OSRM reads the coordinate along its compressed road. Not modelled: the merging of
    the two carriageways of a divided road into one bearing and the matching turn of a road shorter
    than 30 m towards them (intersection_analysis.cpp), the lane counts of `lanes` tags (two
    assumed). `turn_angles` uses the first and last shape segments (what bicycles' turns read)."""
    # OSRM's GetOffsetCorrectionFactor: 2.5 for its motorway classes (car.lua's motorway_types:
    # motorway and trunk) and their links, 1.5 for primary; a primary, secondary or tertiary link
    # is a class of its own there (1.0)
    factor = np.ones(len(T.CLASS_NAMES))
    factor[T.CLASS["motorway"]] = 2.5
    factor[T.CLASS["trunk"]] = 2.5
    factor[T.CLASS["primary"]] = 1.5
    cls = np.asarray(graph.seg_class)
    lanes = factor[cls] * ASSUMED_LANES
    low = ~np.isin(cls, [T.CLASS[c] for c in ("motorway", "trunk", "primary", "secondary", "tertiary",
                                                "unclassified", "residential", "living_street") if c in T.CLASS])
    link = (np.asarray(graph.seg_flags) & T.F_LINK) != 0
    lanes = np.where(link & (factor[cls] < 2.5), ASSUMED_LANES, lanes)
    flags = getattr(graph, "edge_flags", None)  # a roundabout's road: the point 2 m along
    rb = np.zeros(len(cls), bool) if flags is None else (np.asarray(flags)[0::2] & T.F_ROUNDABOUT) != 0
    return _perceived(np.asarray(graph.shape_offsets, dtype=np.int64), np.asarray(graph.shape_lon, dtype=np.float64),
                      np.asarray(graph.shape_lat, dtype=np.float64), lanes, low, rb, car_continuation(graph))


def car_continuation(graph) -> np.ndarray:
    """int64[E]: per directed edge, the edge that continues it through its end node when that node is no
    junction in OSRM car.lua's graph and car.lua would merge the two roads into one (exactly two of its
    roads meet there, `TurnBase.counted`, with the same name and class: a footway or track crossing,
    a node OSRM compresses away); else -1. OSRM reads a road's representative coordinate along its
    compressed road, so `perceived_bearings` looks through these nodes too."""
    E = graph.n_edges if hasattr(graph, "n_edges") else 0
    u, v = getattr(graph, "seg_u", None), getattr(graph, "seg_v", None)
    if u is None or v is None or not E:
        return np.full(2 * (len(graph.shape_offsets) - 1), -1, np.int64)
    car_lua = getattr(graph, "seg_car_lua", None)
    if car_lua is not None:
        ok = np.asarray(car_lua, dtype=bool)
    else:
        acc = np.asarray(graph.edge_access)
        ok = (((acc[0::2] | acc[1::2]) & T.AUTO) != 0) & CAR_LUA_CLASS[np.asarray(graph.seg_class)]
    return _continuation(np.asarray(u, np.int64), np.asarray(v, np.int64), ok, np.asarray(graph.seg_name, np.int64),
                         np.asarray(graph.seg_class, np.int64), int(graph.n_nodes))


@numba.njit(cache=True, nogil=True)
def _continuation(u, v, ok, name, cls, n_nodes):
    S = u.shape[0]
    cnt = np.zeros(n_nodes, np.int64)
    other = np.full((n_nodes, 2), -1, np.int64)  # the first two counted segments at each node
    for s in range(S):
        if not ok[s]:
            continue
        for node in (u[s], v[s]):
            if cnt[node] < 2:
                other[node, cnt[node]] = s
            cnt[node] += 1
    nxt = np.full(2 * S, -1, np.int64)
    for s in range(S):
        if not ok[s] or u[s] == v[s]:
            continue
        for d in range(2):
            end = v[s] if d == 0 else u[s]
            if cnt[end] != 2:
                continue
            t = other[end, 0] if other[end, 1] == s else other[end, 1]
            if t == s or t < 0 or u[t] == v[t] or name[t] != name[s] or cls[t] != cls[s]:
                continue
            nxt[2 * s + d] = 2 * t if u[t] == end else 2 * t + 1
    return nxt


@numba.njit(cache=True, nogil=True)
def _bearing(lat1, lon1, lat2, lon2):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dl = np.radians(lon2 - lon1)
    y = np.sin(dl) * np.cos(p2)
    x = np.cos(p1) * np.sin(p2) - np.sin(p1) * np.cos(p2) * np.cos(dl)
    return (np.degrees(np.arctan2(y, x)) + 360.0) % 360.0


# --- OSRM's representative coordinate (extractor/intersection/coordinate_extractor.cpp), modelled --------
#: WGS84 for the cheap-ruler distances OSRM measures with
_M_PER_DEG = 6378137.0 * np.pi / 180.0
_E2 = 0.00669437999014


@numba.njit(cache=True, nogil=True)
def _d(ax, ay, bx, by):
    """Metres between two (lon, lat) points, OSRM's cheap ruler at their mean latitude."""
    c = np.cos(np.radians(0.5 * (ay + by)))
    w2 = 1.0 / (1.0 - _E2 * (1.0 - c * c))
    w = np.sqrt(w2)
    return np.hypot((ax - bx) * _M_PER_DEG * w * c, (ay - by) * _M_PER_DEG * w * w2 * (1.0 - _E2))


@numba.njit(cache=True, nogil=True)
def _foot(sx, sy, tx, ty, px, py):
    """The foot of p on segment s-t, found on longitude and latitude degrees, clamped (OSRM's
    `projectPointOnSegment`: not orthogonal in metres)."""
    vx, vy = tx - sx, ty - sy
    sq = vx * vx + vy * vy
    if sq < 2.220446049250313e-16:
        return sx, sy
    r = min(max((vx * (px - sx) + vy * (py - sy)) / sq, 0.0), 1.0)
    return sx + r * vx, sy + r * vy


@numba.njit(cache=True, nogil=True)
def _maxdev(cx, cy, lo, hi, sx, sy, tx, ty):
    """The largest distance (m) of points lo..hi-1 from their feet on segment s-t (`GetMaxDeviation`)."""
    dev = 0.0
    for k in range(lo, hi):
        fx, fy = _foot(sx, sy, tx, ty, cx[k], cy[k])
        dev = max(dev, _d(fx, fy, cx[k], cy[k]))
    return dev


@numba.njit(cache=True, nogil=True)
def _factor(want, first, second):
    """OSRM's `ComputeInterpolationFactor`, clamped to 0..1."""
    span = second - first
    if span == 0.0:
        return 0.0 if want - first <= 0.0 else 1.0
    return max(0.0, min((want - first) / span, 1.0))


@numba.njit(cache=True, nogil=True)
def _at_length(dist, cx, cy, n, lens, cached):
    """The point `dist` metres along points 0..n-1 (`ExtractCoordinateAtLength`; `cached`: the piece
    lengths from `lens`, else measured)."""
    acc = 0.0
    for i in range(1, n):
        sd = lens[i] if cached else _d(cx[i - 1], cy[i - 1], cx[i], cy[i])
        if acc + sd >= dist:
            f = _factor(dist - acc, 0.0, sd)
            return cx[i - 1] + f * (cx[i] - cx[i - 1]), cy[i - 1] + f * (cy[i] - cy[i - 1])
        acc += sd
    return cx[n - 1], cy[n - 1]


@numba.njit(cache=True, nogil=True)
def _trim_cached(cx, cy, n, want, lens, nl):
    """OSRM's `TrimCoordinatesToLength` with a length cache, as it runs: the cache holds each piece's
    length, which the cut compares with `want` as if it were the distance walked, so the points are
    cut inside the first piece longer than `want` (or, when the cache's last piece is shorter than
    `want`, kept up to the cache's end). Cuts cx, cy in place; returns the new count."""
    if lens[nl - 1] < want and n >= 2:
        n = min(n, nl)
        d = _d(cx[n - 2], cy[n - 2], cx[n - 1], cy[n - 1])
        if d > 0.0:
            f = _factor(lens[nl - 1], 0.0, d)
            cx[n - 1] = cx[n - 2] + f * (cx[n - 1] - cx[n - 2])
            cy[n - 1] = cy[n - 2] + f * (cy[n - 1] - cy[n - 2])
        return n
    cur = 0.0
    for i in range(1, n):
        nx = lens[i]
        if nx >= want:
            f = _factor(want, cur, nx)
            cx[i] = cx[i - 1] + f * (cx[i] - cx[i - 1])
            cy[i] = cy[i - 1] + f * (cy[i] - cy[i - 1])
            return i + 1
        cur = nx
    return n


@numba.njit(cache=True, nogil=True)
def _corrected(fx, fy, bx, by, hx, hy):
    """OSRM's `GetCorrectedCoordinate`: the head moved back by 90 % of the base's offset from the
    junction f (the head itself when base and head are less than 2 m apart)."""
    if _d(bx, by, hx, hy) < 2.0:
        return hx, hy
    return hx - 0.9 * (bx - fx), hy - 0.9 * (by - fy)


@numba.njit(cache=True, nogil=True)
def _lsq(sx, sy, n):
    """OSRM's `leastSquareRegression` of n points (degrees): latitude on longitude (rotated by 90
    degrees when the points spread over twice as much latitude as longitude); its two ends."""
    lo0, lo1, la0, la1 = sx[0], sx[0], sy[0], sy[0]
    for k in range(n):
        lo0, lo1 = min(lo0, sx[k]), max(lo1, sx[k])
        la0, la1 = min(la0, sy[k]), max(la1, sy[k])
    rot = (la1 - la0) > 2.0 * (lo1 - lo0)
    # in the rotated frame (lon, lat) -> (lat, -lon)
    if rot:
        lo0, lo1 = la0, la1
    ml = 0.0
    mt = 0.0
    for k in range(n):
        x, y = (sy[k], -sx[k]) if rot else (sx[k], sy[k])
        ml += x
        mt += y
    ml /= n
    mt /= n
    vl = 0.0
    vt = 0.0
    for k in range(n):
        x, y = (sy[k], -sx[k]) if rot else (sx[k], sy[k])
        vl += (x - ml) ** 2
        vt += (y - mt) ** 2
    vl = np.sqrt(vl / (n - 1))
    vt = np.sqrt(vt / (n - 1))
    if vl < 2.220446049250313e-16 or vt < 2.220446049250313e-16:
        return sx[0], sy[0], sx[n - 1], sy[n - 1]
    r = 0.0
    for k in range(n):
        x, y = (sy[k], -sx[k]) if rot else (sx[k], sy[k])
        r += (x - ml) * (y - mt) / (vl * vt)
    r /= n - 1
    slope = r * vt / vl
    icpt = mt - slope * ml
    ax, bx = lo0 - 1e-5, lo1 + 1e-5
    ay, by = icpt + slope * ax, icpt + slope * bx
    if rot:  # back: (x, y) -> (-y, x)
        return -ay, ax, -by, bx
    return ax, ay, bx, by


@numba.njit(cache=True, nogil=True)
def _regression(cx, cy, lo, hi, sx, sy):
    """OSRM's `RegressionLine` of points lo..hi-1: the least-squares line of the points every metre
    along the first 40 m, from the first point's foot on it to the last point's."""
    # SampleCoordinates(coordinates, 40 m, 1 m)
    ns = 1
    sx[0], sy[0] = cx[lo], cy[lo]
    carry = 0.0
    total = 0.0
    for i in range(lo + 1, hi):
        if total > FAR_LOOKAHEAD_M:
            break
        d = _d(cx[i - 1], cy[i - 1], cx[i], cy[i])
        if carry + d >= 1.0:
            base = 1.0 - carry
            num = int(np.floor((min(FAR_LOOKAHEAD_M - total, d) + carry) / 1.0))
            for k in range(num):
                if ns >= sx.shape[0]:
                    break
                f = _factor(base + k, 0.0, d)
                sx[ns] = cx[i - 1] + f * (cx[i] - cx[i - 1])
                sy[ns] = cy[i - 1] + f * (cy[i] - cy[i - 1])
                ns += 1
            carry = (d + carry) - num
        else:
            carry += d
        total += d
    if ns < 2:
        return cx[lo], cy[lo], cx[hi - 1], cy[hi - 1]
    ax, ay, bx, by = _lsq(sx, sy, ns)
    fx, fy = _foot(ax, ay, bx, by, cx[lo], cy[lo])
    gx, gy = _foot(ax, ay, bx, by, cx[hi - 1], cy[hi - 1])
    return fx, fy, gx, gy


@numba.njit(cache=True, nogil=True)
def _angle3(ax, ay, bx, by, cx_, cy_):
    """OSRM's `computeAngle` (0-360, 180 straight) at b, on longitude and Mercator y."""
    if (ax == bx and ay == by) or (bx == cx_ and by == cy_):
        return 180.0
    ya = np.degrees(np.log(np.tan(np.pi / 4.0 + np.radians(ay) / 2.0)))
    yb = np.degrees(np.log(np.tan(np.pi / 4.0 + np.radians(by) / 2.0)))
    yc = np.degrees(np.log(np.tan(np.pi / 4.0 + np.radians(cy_) / 2.0)))
    ang = np.degrees(np.arctan2(yc - yb, cx_ - bx) - np.arctan2(ya - yb, ax - bx))
    while ang < 0.0:
        ang += 360.0
    return ang


@numba.njit(cache=True, nogil=True)
def _dev_to_chord(cx, cy, n, k):
    return _maxdev(cx, cy, k, k + 1, cx[0], cy[0], cx[n - 1], cy[n - 1])


@numba.njit(cache=True, nogil=True)
def _ccw(ax, ay, bx, by, px, py):
    return ((bx - ax) * (py - ay) - (px - ax) * (by - ay)) > 0.0


@numba.njit(cache=True, nogil=True)
def _is_curve(cx, cy, n, lens, total, lane_width):
    """OSRM's `IsCurve` (not on roundabouts: those never reach it here)."""
    b0 = _bearing(cy[0], cx[0], cy[1], cx[1])
    b1 = _bearing(cy[n - 2], cx[n - 2], cy[n - 1], cx[n - 1])
    dev = abs(b0 - b1)
    if min(360.0 - dev, dev) <= 0.5 * 40.0:
        return False
    if n > 3:
        ccw = _ccw(cx[0], cy[0], cx[n - 1], cy[n - 1], cx[1], cy[1])
        for k in range(2, n - 1):
            if _ccw(cx[0], cy[0], cx[n - 1], cy[n - 1], cx[k], cy[k]) != ccw:
                return False
    if n == 3:
        mi = 1
        md = _dev_to_chord(cx, cy, n, 1)
    else:
        k = 1
        while k + 1 < n and not (_dev_to_chord(cx, cy, n, k + 1) < _dev_to_chord(cx, cy, n, k)):
            k += 1
        if k + 1 >= n:
            mi = n - 1
            md = 0.0
        else:
            for j in range(k + 1, n - 1):
                if _dev_to_chord(cx, cy, n, j + 1) > _dev_to_chord(cx, cy, n, j):
                    return False
            mi = k
            md = _dev_to_chord(cx, cy, n, k)
    to_max = 0.0
    for k in range(mi + 1):
        to_max += lens[k]
    if (to_max <= 0.35 * total or md < max(0.3 * lane_width, 0.5 * LANE_WIDTH_M)) and total > LOOKAHEAD_M:
        return False
    # a curve's turn angles never switch side, and no straight stretch is long
    last_straight = False
    sd = max(0.0, lens[1] - lane_width)
    it = 1
    for i in range(n - 3):
        p = _angle3(cx[i], cy[i], cx[i + 1], cy[i + 1], cx[i + 2], cy[i + 2])
        c = _angle3(cx[i + 1], cy[i + 1], cx[i + 2], cy[i + 2], cx[i + 3], cy[i + 3])
        dp = min(abs(p - 180.0), 360.0 - abs(p - 180.0))
        dc = min(abs(c - 180.0), 360.0 - abs(c - 180.0))
        if dp > 25.0 and dc > 25.0 and ((p > 180.0) == (c < 180.0)):
            return False
        straight = dc < 5.0
        it += 1
        if straight:
            sd += lens[it]
            if last_straight and sd > 0.3 * total:
                return False
        elif sd > 0.3 * total:
            return False
        else:
            sd = lens[it]
        last_straight = straight
    return total > 2.0 * lane_width


@numba.njit(cache=True, nogil=True)
def _is_direct_offset(cx, cy, n, sidx, sdist, total, lens, lanes):
    """OSRM's `IsDirectOffset`."""
    oi = max(1, sidx)
    if oi + 1 >= n:
        return False
    width = 0.0
    for k in range(oi + 1):
        width += lens[k]
    if not (width - 0.5 * lanes * LANE_WIDTH_M < LANE_WIDTH_M):
        return False
    if total < 0.4 * FAR_LOOKAHEAD_M:
        return False
    if (total - max(sdist, lens[1])) < 0.1 * total:
        return False
    j = oi
    while j < n and not (lens[j] >= 30.0):
        j += 1
    end = min(n, j + 1)
    return 0.5 * LANE_WIDTH_M > _maxdev(cx, cy, oi, end, cx[oi], cy[oi], cx[end - 1], cy[end - 1])


@numba.njit(cache=True, nogil=True)
def _representative(cx, cy, n, lanes, low, rb, lens, tx, ty, sx, sy):
    """(lon, lat) of OSRM's representative coordinate of the road whose points (degrees, from the
    junction, no two equal in a row) are cx, cy[0..n-1] (`ExtractRepresentativeCoordinate`; cx, cy
    are cut in place; lens, tx, ty, sx, sy scratch): `lanes` the lanes it is given (two, times
    OSRM's offset factor of the class), `low` a class OSRM calls low priority, `rb` a roundabout."""
    if n <= 2:
        return cx[n - 1], cy[n - 1]
    if rb:
        return _at_length(ROUNDABOUT_M, cx, cy, n, lens, False)
    x0, y0 = cx[0], cy[0]
    if low:  # the point 10 m along (an exact cut)
        return _at_length(LOOKAHEAD_M, cx, cy, n, lens, False)
    width = lanes * LANE_WIDTH_M
    if _d(cx[0], cy[0], cx[1], cy[1]) > width + LOOKAHEAD_M:
        return cx[1], cy[1]
    look = FAR_LOOKAHEAD_M + width
    # PrepareLengthCache: the pieces up to the first point at `look` or beyond
    lens[0] = 0.0
    nl = 1
    acc = 0.0
    for i in range(1, n):
        d = _d(cx[i - 1], cy[i - 1], cx[i], cy[i])
        acc += d
        lens[nl] = d
        nl += 1
        if acc >= look:
            break
    n = _trim_cached(cx, cy, n, look, lens, nl)
    nl = n
    lens[n - 1] = min(lens[n - 1], look)
    total = 0.0
    for k in range(n):
        total += lens[k]
    if n == 2 or total <= 2.0:
        return cx[n - 1], cy[n - 1]
    if _maxdev(cx, cy, 0, n, cx[0], cy[0], cx[n - 1], cy[n - 1]) < 0.5 * LANE_WIDTH_M:
        if cx[0] == cx[n - 1] and cy[0] == cy[n - 1]:
            return _at_length(ROUNDABOUT_M, cx, cy, n, lens, False)
        return cx[n - 1], cy[n - 1]
    # how far the road starts straight (within a quarter lane)
    sd = lens[1]
    idx = 2
    while idx < n:
        if _maxdev(cx, cy, 0, idx, cx[0], cy[0], cx[idx], cy[idx]) < 0.25 * LANE_WIDTH_M:
            sd += lens[idx]
            idx += 1
        else:
            break
    sidx = idx - 1
    if sd >= width + LOOKAHEAD_M:
        return _at_length(5.0, cx, cy, n, lens, True)
    ax, ay, bx, by = _regression(cx, cy, 0, n, sx, sy)
    if _maxdev(cx, cy, 0, n, ax, ay, bx, by) < 0.35 * LANE_WIDTH_M:
        fx, fy = _foot(ax, ay, bx, by, cx[0], cy[0])
        gx, gy = _foot(ax, ay, bx, by, cx[n - 1], cy[n - 1])
        return _corrected(x0, y0, fx, fy, gx, gy)
    if _is_direct_offset(cx, cy, n, sidx, sd, total, lens, np.floor(lanes)):
        oi = max(1, sidx)
        return _corrected(x0, y0, cx[oi], cy[oi], cx[oi + 1], cy[oi + 1])
    if _is_curve(cx, cy, n, lens, total, width):
        n6 = _trim_cached(cx, cy, n, 3.0 * ROUNDABOUT_M, lens, nl)
        lens[n6 - 1] = _d(cx[n6 - 2], cy[n6 - 2], cx[n6 - 1], cy[n6 - 1])
        hx, hy = cx[n6 - 1], cy[n6 - 1]
        n4 = _trim_cached(cx, cy, n6, 2.0 * ROUNDABOUT_M, lens, n6)
        return _corrected(x0, y0, cx[n4 - 1], cy[n4 - 1], hx, hy)
    # past the junction's own lanes: a line that fits the rest within half a lane
    trim = 0.8 * width
    front = 0.8 * trim
    acc = 0.0
    m = 0
    for i in range(1, n):
        d = _d(cx[i - 1], cy[i - 1], cx[i], cy[i])
        if acc + d >= front:
            f = _factor(front, acc, acc + d)
            tx[0] = cx[i - 1] + f * (cx[i] - cx[i - 1])
            ty[0] = cy[i - 1] + f * (cy[i] - cy[i - 1])
            m = 1
            for k in range(i, n):
                tx[m] = cx[k]
                ty[m] = cy[k]
                m += 1
            break
        acc += d
    if m >= 2 and total >= trim + 2.0:
        ax, ay, bx, by = _regression(tx, ty, 0, m, sx, sy)
        if _maxdev(tx, ty, 0, m, ax, ay, bx, by) < 0.5 * LANE_WIDTH_M:
            return _corrected(x0, y0, ax, ay, bx, by)
    rx, ry = _at_length(LOOKAHEAD_M, cx, cy, n, lens, True)
    if rx != x0 or ry != y0:
        return rx, ry
    for k in range(1, n):
        if cx[k] != x0 or cy[k] != y0:
            return cx[k], cy[k]
    return rx, ry


#: edges a road's look-ahead follows through nodes car.lua compresses away (`car_continuation`)
MAX_CHAIN = 16


@numba.njit(cache=True, nogil=True)
def _chain(off, lon, lat, e, nxt, reach, px, py):
    """The points of directed edge e from its start, continued through `nxt` until `reach` metres
    (or MAX_CHAIN edges); into px, py; returns their count."""
    m = 0
    walked = 0.0
    kx = 111_195.0 * np.cos(np.radians(lat[off[e >> 1]]))
    for _ in range(MAX_CHAIN):
        s = e >> 1
        a, b = off[s], off[s + 1] - 1
        n = b - a + 1
        for k in range(n):
            p = a + k if (e & 1) == 0 else b - k
            if m > 0 and k == 0:
                continue  # the junction point the previous edge ended at
            if m > 0:
                walked += np.hypot((lon[p] - px[m - 1]) * kx, (lat[p] - py[m - 1]) * 111_195.0)
            px[m] = lon[p]
            py[m] = lat[p]
            m += 1
            if m == px.shape[0]:
                return m
        if walked >= reach or nxt[e] < 0:
            break
        e = nxt[e]
    return m


@numba.njit(cache=True, nogil=True)
def _points(off, lon, lat, e, nxt, reach, chained, px, py):
    """The points of directed edge e from its start (continued through `nxt` up to `reach` metres when
    `chained`), without repeats, into px, py; returns their count."""
    if not chained:
        s = e >> 1
        a, b = off[s], off[s + 1] - 1
        m = 0
        for k in range(b - a + 1):
            p = a + k if (e & 1) == 0 else b - k
            if m > 0 and lon[p] == px[m - 1] and lat[p] == py[m - 1]:
                continue
            px[m] = lon[p]
            py[m] = lat[p]
            m += 1
        return m
    m = _chain(off, lon, lat, e, nxt, reach, px, py)
    w = 1
    for k in range(1, m):
        if px[k] != px[w - 1] or py[k] != py[w - 1]:
            px[w] = px[k]
            py[w] = py[k]
            w += 1
    return w


@numba.njit(cache=True, nogil=True)
def _perceived(off, lon, lat, lanes, low, rb, nxt):
    S = off.shape[0] - 1
    start = np.empty(2 * S, np.float32)
    end = np.empty(2 * S, np.float32)
    most = 2
    for s in range(S):
        most = max(most, off[s + 1] - off[s])
    cap = most * (MAX_CHAIN + 1)
    px = np.empty(cap)
    py = np.empty(cap)
    lens = np.empty(cap)
    tx = np.empty(cap)
    ty = np.empty(cap)
    sx = np.empty(256)
    sy = np.empty(256)
    for s in range(S):
        a, b = off[s], off[s + 1] - 1
        reach = FAR_LOOKAHEAD_M + lanes[s] * LANE_WIDTH_M + 1.0
        chained = nxt[2 * s] >= 0 or nxt[2 * s + 1] >= 0
        for d in range(2):
            n = _points(off, lon, lat, 2 * s + d, nxt, reach, chained, px, py)
            if n < 2:  # a road of one repeated point
                ux, uy = lon[b if d == 0 else a], lat[b if d == 0 else a]
            else:
                ux, uy = _representative(px, py, n, lanes[s], low[s], rb[s], lens, tx, ty, sx, sy)
            j = a if d == 0 else b  # the junction the road leaves
            start[2 * s + d] = _bearing(lat[j], lon[j], uy, ux)
            end[2 * s + 1 - d] = _bearing(uy, ux, lat[j], lon[j])
    return start, end


@numba.njit(cache=True, nogil=True)
def _allowed_turns(offsets, e2, rf, rt, ro, n_edges):
    """bool[m]: False for the turn (rf, rt) of a `no_*` restriction and for every turn out of an `only_*`
    restriction's from-edge that no `only_*` restriction from that edge names."""
    m = e2.shape[0]
    ok = np.ones(m, np.bool_)
    named = np.zeros(m, np.bool_)
    only_from = np.zeros(n_edges, np.bool_)
    for i in range(rf.shape[0]):
        a = rf[i]
        if ro[i]:
            only_from[a] = True
        for k in range(offsets[a], offsets[a + 1]):
            if e2[k] == rt[i]:
                if ro[i]:
                    named[k] = True
                else:
                    ok[k] = False
    for i in range(rf.shape[0]):
        a = rf[i]
        if ro[i] and only_from[a]:
            only_from[a] = False  # each row once
            for k in range(offsets[a], offsets[a + 1]):
                if not named[k]:
                    ok[k] = False
    return ok


@numba.njit(cache=True, nogil=True)
def _turn_rows(dst, noff, nout, bearing_start, bearing_end):
    """`TurnBase`'s arrays: each directed edge e1 followed by each edge out of its end node, in the node's
    out-edge order; the angle as `turn_angles` computes it (the same float64 operations)."""
    n = dst.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for e in range(n):
        offsets[e + 1] = offsets[e] + noff[dst[e] + 1] - noff[dst[e]]
    m = offsets[n]
    e1 = np.empty(m, np.int32)
    e2 = np.empty(m, np.int32)
    uturn = np.empty(m, np.bool_)
    angles = np.empty(m, np.float64)
    for e in range(n):
        k = offsets[e]
        for j in range(noff[dst[e]], noff[dst[e] + 1]):
            t = nout[j]
            e1[k] = e
            e2[k] = t
            uturn[k] = t == (e ^ 1)
            a = np.float64(bearing_start[t]) - np.float64(bearing_end[e])
            angles[k] = (a + 540.0) % 360.0 - 180.0
            k += 1
    return offsets, e1, e2, uturn, angles


def forbidden_turns(graph, mode: str | int = T.AUTO) -> set[tuple[int, int]]:
    """Set of (e1, e2) pairs a restriction forbids for `mode` (for tests and diagnostics):
    the `no_*` pairs plus, for each `only_*` from-edge, every other edge leaving its end node."""
    rf, rt, ro = graph.restrictions_for(mode)
    out = {(int(a), int(b)) for a, b, o in zip(rf, rt, ro, strict=True) if not o}
    noff, nout, dst = graph.node_out_offsets, graph.node_out_edges, graph.edge_dst
    only: dict[int, set[int]] = {}
    for a, b, o in zip(rf, rt, ro, strict=True):
        if o:
            only.setdefault(int(a), set()).add(int(b))
    for a, allowed in only.items():
        v = int(dst[a])
        for b in nout[noff[v] : noff[v + 1]].tolist():
            if b not in allowed:
                out.add((a, int(b)))
    return out


def largest_component(offsets: np.ndarray, targets: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """bool[E]: the usable edges in the largest strongly connected part of a turn graph (from
    `turn_graph`). Snapping prefers these (`Snapper.snap(..., component_mask=...)`), as OSRM and
    Valhalla do, so that a location next to a small island of the network (a street reachable only
    through a no-entry road) does not end up with no route."""
    from geoengine.graph.scc import scc_labels

    n = len(offsets) - 1
    label, _k = scc_labels(np.asarray(offsets, dtype=np.int64), np.asarray(targets))
    usable = np.asarray(usable, dtype=bool)
    if not usable.any():
        return np.zeros(n, dtype=bool)
    return usable & (label == np.bincount(label[usable]).argmax())
