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
    and where it reaches its end node as a driver perceives the junction (OSRM's representative
    coordinate, simplified): the first shape segment when it is long (more than the assumed road
    width plus 10 m, OSRM's `considered_lanes * ASSUMED_LANE_WIDTH + LOOKAHEAD_DISTANCE_WITHOUT_LANES`);
    else, over the road's first 40 m plus its width: its end when the road is straight there within
    half a lane, the point 5 m along when it starts straight (within a quarter lane) for its width
    plus 10 m, the direction of the line that fits every point within
    a third of a lane; else (and on service roads) the point 10 m along. The road is followed through
    nodes car.lua compresses away (`car_continuation`: a footway or track crossing, two pieces of one
    street), as OSRM reads the coordinate along its compressed road. `turn_angles` uses the first and
    last shape segments (what bicycles' turns read)."""
    factor = np.ones(len(T.CLASS_NAMES))
    factor[T.CLASS["motorway"]] = 2.5
    factor[T.CLASS["trunk"]] = 2.0
    factor[T.CLASS["primary"]] = 1.5
    cls = np.asarray(graph.seg_class)
    lanes = factor[cls] * ASSUMED_LANES
    low = cls == T.CLASS["service"]
    link = (np.asarray(graph.seg_flags) & T.F_LINK) != 0
    lanes = np.where(link, 2.5 * ASSUMED_LANES, lanes)
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


@numba.njit(cache=True, nogil=True)
def _look(lon, lat, a, step, n, lanes, low, rb, xs, ys):
    """(lon, lat) of the representative point of the polyline starting at point a and walking `step`
    (+1 or -1) over n points (local planar metres; `xs`, `ys` scratch of n or more); `rb`: a
    roundabout's road, whose point is the one 2 m along (OSRM's, past repeated nodes)."""
    kx = 111_195.0 * np.cos(np.radians(lat[a]))
    ky = 111_195.0
    x0, y0 = lon[a], lat[a]
    if n <= 2:
        b = a + step * (n - 1)
        return lon[b], lat[b]
    near = lanes * LANE_WIDTH_M + LOOKAHEAD_M
    reach = ROUNDABOUT_M if rb else (LOOKAHEAD_M if low else FAR_LOOKAHEAD_M + lanes * LANE_WIDTH_M)
    dx1 = (lon[a + step] - x0) * kx
    dy1 = (lat[a + step] - y0) * ky
    if not low and not rb and np.hypot(dx1, dy1) > near:
        return lon[a + step], lat[a + step]
    # the points within `reach` (the last one cut at `reach`), as offsets in metres
    xs[0] = 0.0
    ys[0] = 0.0
    m = 1
    walked = 0.0
    for k in range(1, n):
        px = (lon[a + step * k] - x0) * kx
        py = (lat[a + step * k] - y0) * ky
        seg = np.hypot(px - xs[m - 1], py - ys[m - 1])
        if walked + seg >= reach and seg > 0.0:
            t = (reach - walked) / seg
            xs[m] = xs[m - 1] + t * (px - xs[m - 1])
            ys[m] = ys[m - 1] + t * (py - ys[m - 1])
            m += 1
            walked = reach
            break
        xs[m] = px
        ys[m] = py
        m += 1
        walked += seg
    if low or rb:
        return x0 + xs[m - 1] / kx, y0 + ys[m - 1] / ky
    # straight within half a lane up to the end: the end
    ex, ey = xs[m - 1], ys[m - 1]
    chord = np.hypot(ex, ey)
    if chord > 0.0:
        dev = 0.0
        for k in range(1, m - 1):
            dev = max(dev, abs(xs[k] * ey - ys[k] * ex) / chord)
        if dev < 0.5 * LANE_WIDTH_M:
            return x0 + ex / kx, y0 + ey / ky
    # a road that starts straight (within a quarter lane) for `near` metres: its first stretch
    straight = np.hypot(xs[1], ys[1])
    for k in range(2, m):
        c = np.hypot(xs[k], ys[k])
        dev = 0.0
        for j in range(1, k):
            dev = max(dev, abs(xs[j] * ys[k] - ys[j] * xs[k]) / c if c > 0.0 else 0.0)
        if dev >= 0.25 * LANE_WIDTH_M:
            break
        straight += np.hypot(xs[k] - xs[k - 1], ys[k] - ys[k - 1])
    if straight >= near:
        return _at(xs, ys, m, 5.0, x0, y0, kx, ky)
    # a line fits every point within a third of a lane: its direction, away from the junction
    dx, dy, dev = _fit(xs, ys, 0, m)
    if dev < 0.35 * LANE_WIDTH_M:
        return x0 + dx / kx, y0 + dy / ky
    # otherwise the point 10 m along
    return _at(xs, ys, m, LOOKAHEAD_M, x0, y0, kx, ky)


@numba.njit(cache=True, nogil=True)
def _at(xs, ys, m, dist, x0, y0, kx, ky):
    """(lon, lat) of the point `dist` metres along the first m offsets (the last one if shorter)."""
    walked = 0.0
    for k in range(1, m):
        seg = np.hypot(xs[k] - xs[k - 1], ys[k] - ys[k - 1])
        if walked + seg >= dist and seg > 0.0:
            t = (dist - walked) / seg
            return x0 + (xs[k - 1] + t * (xs[k] - xs[k - 1])) / kx, y0 + (ys[k - 1] + t * (ys[k] - ys[k - 1])) / ky
        walked += seg
    return x0 + xs[m - 1] / kx, y0 + ys[m - 1] / ky


@numba.njit(cache=True, nogil=True)
def _fit(xs, ys, lo, hi):
    """(dx, dy, max deviation): the principal direction of offsets lo..hi-1 (10 m long, pointing from
    the first towards the last) and the largest distance of a point from that line."""
    n = hi - lo
    mx = 0.0
    my = 0.0
    for k in range(lo, hi):
        mx += xs[k]
        my += ys[k]
    mx /= n
    my /= n
    sxx = 0.0
    syy = 0.0
    sxy = 0.0
    for k in range(lo, hi):
        sxx += (xs[k] - mx) ** 2
        syy += (ys[k] - my) ** 2
        sxy += (xs[k] - mx) * (ys[k] - my)
    ang = 0.5 * np.arctan2(2.0 * sxy, sxx - syy)
    ux, uy = np.cos(ang), np.sin(ang)
    if ux * (xs[hi - 1] - xs[lo]) + uy * (ys[hi - 1] - ys[lo]) < 0.0:
        ux, uy = -ux, -uy
    dev = 0.0
    for k in range(lo, hi):
        dev = max(dev, abs((xs[k] - mx) * uy - (ys[k] - my) * ux))
    return ux * LOOKAHEAD_M, uy * LOOKAHEAD_M, dev


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
def _perceived(off, lon, lat, lanes, low, rb, nxt):
    S = off.shape[0] - 1
    start = np.empty(2 * S, np.float32)
    end = np.empty(2 * S, np.float32)
    most = 2
    for s in range(S):
        most = max(most, off[s + 1] - off[s])
    cap = most * (MAX_CHAIN + 1)
    xs = np.empty(cap)
    ys = np.empty(cap)
    px = np.empty(cap)
    py = np.empty(cap)
    for s in range(S):
        a, b = off[s], off[s + 1] - 1
        reach = FAR_LOOKAHEAD_M + lanes[s] * LANE_WIDTH_M + 1.0
        if nxt[2 * s] < 0 and nxt[2 * s + 1] < 0:
            n = b - a + 1
            ux, uy = _look(lon, lat, a, 1, n, lanes[s], low[s], rb[s], xs, ys)
            vx, vy = _look(lon, lat, b, -1, n, lanes[s], low[s], rb[s], xs, ys)
        else:  # the road goes on through a node car.lua compresses: look along it
            n = _chain(off, lon, lat, 2 * s, nxt, reach, px, py)
            ux, uy = _look(px, py, 0, 1, n, lanes[s], low[s], rb[s], xs, ys)
            n = _chain(off, lon, lat, 2 * s + 1, nxt, reach, px, py)
            vx, vy = _look(px, py, 0, 1, n, lanes[s], low[s], rb[s], xs, ys)
        start[2 * s] = _bearing(lat[a], lon[a], uy, ux)
        end[2 * s + 1] = _bearing(uy, ux, lat[a], lon[a])
        start[2 * s + 1] = _bearing(lat[b], lon[b], vy, vx)
        end[2 * s] = _bearing(vy, vx, lat[b], lon[b])
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
