"""A routing profile: one costing with one set of options, as an edge-based graph ready to search.

Vertices of the searched graph are directed road edges; arcs are allowed turns (restrictions honoured
by construction, see `geoengine.graph.turns`). Each arc carries the costing's cost (minimised) and, as
the secondary metric, the travel time and the length PACKED into one exactly-summable float64:

    secondary = round(time_s * 10) * 2**27 + round(length_m * 10)

Both fields are integers (tenths of a second, decimetres), so sums stay exact in float64 (53 bits):
lengths up to 13,421 km and times up to 77 days per path. `unpack` splits a total again. This lets the
contraction hierarchy (which carries one secondary metric) return time and distance for every matrix
cell without unpacking paths.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from geoengine.costing import Options, default_options, edge_costs, mode_of, piece_timing, turn_penalty
from geoengine.graph.turns import largest_component, turn_base
from geoengine.routing.dijkstra import Graph as SearchGraph

SHIFT = float(2**27)
T_SCALE = 10.0
L_SCALE = 10.0


def pack(time_s, length_m):
    return np.round(np.asarray(time_s, dtype=np.float64) * T_SCALE) * SHIFT + np.round(
        np.asarray(length_m, dtype=np.float64) * L_SCALE)


@numba.njit(cache=True, nogil=True)
def time_share(e, f, tp_edges, tp_ptr, tp_len, tp_sec):
    """The share of directed edge e's time spent from fraction f of its length to its end. Where the
    profile's piece timing (`costing.piece_timing`) has the edge, its pieces' own seconds: the time at
    the position is interpolated between the shape points around it; elsewhere (speed spread evenly
    over the edge) 1 - f."""
    rem = 1.0 - f
    if tp_edges.shape[0] == 0:
        return rem
    j = np.searchsorted(tp_edges, e)
    if j >= tp_edges.shape[0] or tp_edges[j] != e:
        return rem
    a, b = tp_ptr[j], tp_ptr[j + 1] - 1
    total_len, total_sec = tp_len[b], tp_sec[b]
    if not (total_sec > 0.0) or not (total_len > 0.0):
        return rem
    backward = (e & 1) == 1
    x = (1.0 - f if backward else f) * total_len  # metres from the segment's first point
    k = a
    while k < b - 1 and tp_len[k + 1] <= x:
        k += 1
    d = tp_len[k + 1] - tp_len[k]
    t = tp_sec[k] if d <= 0.0 else tp_sec[k] + (x - tp_len[k]) / d * (tp_sec[k + 1] - tp_sec[k])
    t = min(max(t, 0.0), total_sec)
    # forward: the pieces after the position remain; backward: those before it (travelled towards point 0)
    return t / total_sec if backward else (total_sec - t) / total_sec


@numba.njit(cache=True, nogil=True)
def offsets_kernel(edges, fractions, cost, time, length, negate, tp_edges, tp_ptr, tp_len, tp_sec):
    """`Profile.source_offsets` / `target_offsets` (negated) of 1-D arrays in one call; the same
    operations in the same order as `pack`, so the results are bit-identical. The cost and time of
    the part of an edge still to travel are its time share (`time_share`: over the pieces' own speeds
    where measured segment speeds cover the edge, else the length fraction); the length its fraction."""
    n = edges.shape[0]
    c = np.empty(n)
    s = np.empty(n)
    for i in range(n):
        e = edges[i]
        rem = 1.0 - fractions[i]
        rt = time_share(e, fractions[i], tp_edges, tp_ptr, tp_len, tp_sec)
        ci = rt * cost[e]
        si = np.rint(rt * time[e] * T_SCALE) * SHIFT + np.rint(rem * length[e] * L_SCALE)
        c[i] = -ci if negate else ci
        s[i] = -si if negate else si
    return c, s


def unpack_scalar(x: float) -> tuple[float, float]:
    """`unpack` of one Python float: (time_s, length_m), bit-identical, without numpy's overhead."""
    if not math.isfinite(x):
        return math.inf, math.inf
    t = float(math.floor((x + 0.5) / SHIFT))
    length = x - t * SHIFT
    if length < -0.5:  # the length field borrowed one unit of time
        t -= 1.0
        length += SHIFT
    return t / T_SCALE, length / L_SCALE


def unpack(x):
    """(time_s, length_m) of packed totals (arrays or scalars); inf stays inf."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    xs = np.where(finite, x, 0.0)
    t = np.floor((xs + 0.5) / SHIFT)
    l_ = xs - t * SHIFT
    # a total whose length field is "negative" borrowed one unit of time
    borrow = l_ < -0.5
    t = np.where(borrow, t - 1, t)
    l_ = np.where(borrow, l_ + SHIFT, l_)
    time_s = np.where(finite, t / T_SCALE, np.inf)
    length_m = np.where(finite, l_ / L_SCALE, np.inf)
    return time_s, length_m


class TurnStructure:
    """What a profile's turn graph is made of, apart from its weights: the arcs (`offsets`, `targets`),
    each arc's position among the graph's `TurnBase` (`base_index`) and the largest strongly connected
    part (`component`, filled when first computed). They depend only on which edges are usable, so a
    profile of the same costing and options whose usable edges are the same (new measured speeds, a
    time-of-day bucket: speeds change times, never access) takes them over instead of remaking them
    (docs/traffic.md). Holds the arrays, not the profile: its costs and hierarchy are freed with it."""

    __slots__ = ("usable", "offsets", "targets", "base_index", "component")

    def __init__(self, usable, offsets, targets, base_index):
        self.usable, self.offsets, self.targets, self.base_index = usable, offsets, targets, base_index
        self.component = None

    def fits(self, usable: np.ndarray) -> bool:
        return self.usable is usable or (self.usable.shape == usable.shape and np.array_equal(self.usable, usable))


class Profile:
    """Costs of one costing + options over a graph, and the edge-based search graph built from them.

    `cost`, `time`, `length`: float64[E] per directed road edge (cost/time inf where not allowed).
    `search`: a `geoengine.routing.dijkstra.Graph` over edges (weights = cost incl. turn penalties,
    secondary = packed time and length). `ch`: the bundle's contraction hierarchy for these weights
    when the options are the costing's defaults, else None (the exact Dijkstra fallback is used).
    """

    def __init__(self, graph, costing: str, options: Options | None = None, *, blocked: np.ndarray | None = None,
                 ch=None, speeds=None, structure: TurnStructure | None = None):
        self.graph = graph
        self.costing = costing
        self.options = options or default_options(costing)
        self.mode = mode_of(costing)
        self.speeds = speeds  # the measured speeds these costs were made with (None: profile speeds)
        cost, time, length = edge_costs(graph, costing, self.options, speeds)
        cost = np.array(cost, dtype=np.float64)
        if blocked is not None and blocked.any():
            cost[blocked] = np.inf
        self.cost = cost
        self.time = np.asarray(time, dtype=np.float64)
        self.length = np.asarray(length, dtype=np.float64)
        #: (edges, ptr, metres, seconds): how the time is spread along the edges measured segment speeds
        #: cover piece by piece (`costing.piece_timing`); the offsets of a position inside such an edge
        #: sum its pieces' own seconds (docs/traffic.md, "Partial edges"); empty without them
        self.timing = piece_timing(graph, costing, self.options, speeds, self.time)
        self.usable = np.isfinite(cost)
        self.ch = ch
        self._search = None
        self._csr = None
        self.base_index = None
        self._component = None
        self.plain = None  # the plain-route kernel bound to this profile (Router.plain_route)
        #: `TurnStructure`: given, another profile's (taken over when the usable edges are the same);
        #: after `turn_csr`, this profile's own
        self.structure = structure

    def turn_csr(self):
        """(offsets, targets, weights, packed secondary) of the edge-based graph (computed once).

        Turn penalties enter the weights unless the costing minimises distance (`shortest`); the
        time of a turn (the mode's turn delay, seconds) always enters the packed time, so a route's
        time does not depend on what the search minimised."""
        if self._csr is None:
            tp = turn_penalty(self.costing, self.options)
            metrics = np.column_stack([np.where(np.isfinite(self.time), self.time, 0.0), self.length])
            base = turn_base(self.graph)
            st = self.structure
            tdelay = turn_penalty(self.costing)  # the mode's delays, whatever is minimised
            pen = None
            if st is not None and st.fits(self.usable):
                # the same arcs as `TurnBase.turn_graph` would keep, and the same weights: cost[e2] plus
                # the turn penalty of the arc
                off, tgt, idx = st.offsets, st.targets, st.base_index
                w = self.cost[tgt]
                if tp is not None and len(tgt):
                    pen = base.penalty(tp, idx, self.mode)
                    w += pen
                sec = metrics[tgt]
                self._component = st.component
            else:
                off, tgt, w, sec, idx = base.turn_graph(self.cost, metrics, mode=self.mode, turn_penalty=tp)
                st = TurnStructure(self.usable, off, tgt, idx)
            self.structure = st
            delay = np.zeros_like(w)
            if tdelay is not None and len(tgt):
                delay = pen if (pen is not None and tdelay is tp) else base.penalty(tdelay, idx, self.mode)
            self.base_index = idx  # each arc's position among every possible turn (TurnBase)
            self._csr = (off, tgt, w, pack(sec[:, 0] + delay, sec[:, 1]))
        return self._csr

    @property
    def component(self) -> np.ndarray:
        """bool[E]: usable edges in the largest strongly connected part of the turn graph; snapping
        prefers them so a location beside an isolated fragment still gets a route."""
        if self._component is None:
            off, tgt, _w, _s = self.turn_csr()
            if self._component is None:
                self._component = largest_component(off, tgt, self.usable)
                self.structure.component = self._component
        return self._component

    @property
    def search(self) -> SearchGraph:
        if self._search is None:
            off, tgt, w, packed = self.turn_csr()
            self._search = SearchGraph(self.graph.n_edges, off, tgt, w, packed)
        return self._search

    # -- location offsets ----------------------------------------------------------------------------
    def source_offsets(self, edges, fractions):
        """Cost and packed secondary still to travel from a position to the end of its edge."""
        e = np.asarray(edges, dtype=np.int64)
        f = np.asarray(fractions, dtype=np.float64)
        if e.ndim == 1 and f.shape == e.shape:
            return offsets_kernel(e, f, self.cost, self.time, self.length, False, *self.timing)
        shape = e.shape
        c, s = offsets_kernel(e.ravel(), np.broadcast_to(f, shape).ravel(), self.cost, self.time, self.length, False,
                              *self.timing)
        return c.reshape(shape), s.reshape(shape)

    def target_offsets(self, edges, fractions):
        """Minus the cost of the part of the target edge beyond the position (arcs charge whole edges)."""
        e = np.asarray(edges, dtype=np.int64)
        f = np.asarray(fractions, dtype=np.float64)
        if e.ndim == 1 and f.shape == e.shape:
            return offsets_kernel(e, f, self.cost, self.time, self.length, True, *self.timing)
        c, s = self.source_offsets(e, f)
        return -c, -s

    def time_share(self, edge: int, fraction: float) -> float:
        """The share of `edge`'s time from `fraction` of its length to its end (`time_share`)."""
        return float(time_share(np.int64(edge), float(fraction), *self.timing))
