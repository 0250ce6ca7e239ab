"""Network accessibility and nearest POIs, as pandana users expect (`Engine.accessibility`,
`Engine.nearest_pois`; docs/analysis.md).

Both work on the junction-level `Network` of one costing with one impedance: travel time (`max_time_s`,
edge `time_s`, the fastest path) or length (`max_distance_m`, edge `length_m`, the shortest path).
POIs and query points are attached to their nearest in-component junction.

accessibility: the value at a junction n aggregates the POIs p reachable FROM n within the limit
(d(n, p) <= limit, the direction pandana uses). It is computed POI-side: d(., p) for every junction by
PHAST over a contraction hierarchy of the junction graph (per distinct POI junction an upward search over
the ranks it reaches, then a downward sweep shared by LANES POI junctions, vectorised over them; Numba,
`prange` over both cores), marking reached junctions in a bit matrix; then one pass per output junction
adds up the POIs it reaches in POI-junction order. POI junctions are processed in fixed chunks whose
partial aggregates are combined in chunk order, so the result does not depend on the thread count, on
how chunks are grouped into sweeps or on how `geoengine.batch` splits the work: bit-identical.

nearest_pois: per query junction one forward Dijkstra that stops at the k-th POI or at the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from geoengine.errors import FieldError, InvalidRequest
from geoengine.routing._heap import heap_decrease, heap_pop, heap_push

AGGREGATIONS = ("count", "sum", "mean", "min", "max")
CHUNK_MAX = 512  # POI junctions per chunk, at most (fixed: the chunking is part of the result's definition)
CHUNK_BITS = 2**28  # and the chunk's reach bit matrix stays within 32 MiB on large graphs


# ----------------------------------------------------------------------------------------------------
# Numba kernels (arrays only)
# ----------------------------------------------------------------------------------------------------
LANES = 16  # sources swept together (the inner loops run over these lanes: vectorised)
WORD = 64  # sources per bit word of the reach matrix (4 groups of LANES), the unit of work of one thread


@numba.njit(cache=True, nogil=True, inline="always")
def _hpush(h, size, v):  # pragma: no cover - compiled
    """Push rank v onto the binary min-heap h[:size]; returns the new size."""
    i = size
    h[i] = v
    while i > 0:
        p = (i - 1) >> 1
        if h[p] <= v:
            break
        h[i] = h[p]
        i = p
    h[i] = v
    return size + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _hpop(h, size):  # pragma: no cover - compiled
    """(smallest rank, new size) of the binary min-heap h[:size]."""
    top = h[0]
    size -= 1
    v = h[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and h[c + 1] < h[c]:
            c += 1
        if h[c] >= v:
            break
        h[i] = h[c]
        i = c
    if size > 0:
        h[i] = v
    return top, size


@numba.njit(cache=True, nogil=True, parallel=True)
def _reach_bits(up_off, up_tgt, up_w, dn_off, dn_tgt, dn_w, src_ranks, limit, n, nthreads):  # pragma: no cover
    """PHAST over a contraction hierarchy of the junction graph (vertices in RANK space), LANES sources per
    sweep: bits[r, p >> 6] has bit (p & 63) set when d(r, src_ranks[p]) <= limit.

    Per source the backward upward search visits only the ranks it reaches (a heap of ranks, ascending:
    the `dn` arcs x->r, x > r, form a DAG, so a rank is final when popped; relaxed only from ranks within
    the limit), then the downward sweep, d[r] = min(d[r], w(r->x) + d[x]) over the `up` arcs in descending
    rank order, runs once for LANES sources, from the highest rank any of them reached (above it every
    distance is inf), with the lanes contiguous in memory. The sums and comparisons are those of one source
    at a time, so the bits do not depend on the lanes or the thread count."""
    P = len(src_ranks)
    nw = (P + WORD - 1) // WORD
    bits = np.zeros((n, nw), dtype=np.uint64)
    nt = min(nthreads, max(nw, 1))
    for t in numba.prange(nt):
        d = np.full((n, LANES), np.inf)
        heap = np.empty(max(n, 1), dtype=np.int64)
        stamp = np.full(n, -1, dtype=np.int64)
        top_prev = -1
        for w in range(t, nw, nt):
            for g in range(WORD // LANES):
                p0 = w * WORD + g * LANES
                if p0 >= P:
                    break
                for r in range(top_prev + 1):
                    for j in range(LANES):
                        d[r, j] = np.inf
                top = -1
                for j in range(LANES):
                    if p0 + j >= P:
                        break
                    s = src_ranks[p0 + j]
                    tag = p0 + j
                    d[s, j] = 0.0
                    stamp[s] = tag
                    size = _hpush(heap, 0, s)
                    while size > 0:
                        r, size = _hpop(heap, size)
                        if r > top:
                            top = r
                        dr = d[r, j]
                        if dr <= limit:
                            for k in range(dn_off[r], dn_off[r + 1]):
                                x = dn_tgt[k]
                                nd = dr + dn_w[k]
                                if nd < d[x, j]:
                                    d[x, j] = nd
                                    if stamp[x] != tag:
                                        stamp[x] = tag
                                        size = _hpush(heap, size, x)
                shift = g * LANES
                for r in range(top, -1, -1):
                    dr = d[r]
                    for k in range(up_off[r], up_off[r + 1]):
                        dx = d[up_tgt[k]]
                        wk = up_w[k]
                        for j in range(LANES):
                            dr[j] = min(dr[j], wk + dx[j])
                    m = np.uint64(0)
                    for j in range(LANES):
                        if dr[j] <= limit:
                            m |= np.uint64(1) << np.uint64(shift + j)
                    if m:
                        bits[r, w] |= m
                top_prev = top
    return bits


@numba.njit(cache=True, nogil=True, parallel=True)
def _aggregate(bits, bounds, p_count, p_sum, p_min, p_max, out_nodes):  # pragma: no cover - compiled
    """Per chunk c (POI junctions bounds[c]..bounds[c+1] of the bit matrix's columns) and output junction i
    (a rank): (count, sum, min, max) [C, M] over the chunk's POI junctions whose reach bit is set, added in
    POI-junction order (deterministic)."""
    M = len(out_nodes)
    C = len(bounds) - 1
    cnt = np.zeros((C, M), dtype=np.int64)
    sm = np.zeros((C, M), dtype=np.float64)
    mn = np.full((C, M), np.inf)
    mx = np.full((C, M), -np.inf)
    for i in numba.prange(M):
        row = bits[out_nodes[i]]
        for c in range(C):
            n_ = 0
            s = 0.0
            lo = np.inf
            hi = -np.inf
            a = bounds[c]
            b = bounds[c + 1]
            for w in range(a >> 6, ((b - 1) >> 6) + 1 if b > a else a >> 6):
                word = row[w]
                base = w << 6
                if base < a:  # the chunk starts inside this word
                    word &= ~np.uint64(0) << np.uint64(a - base)
                if base + 64 > b:  # and ends inside it
                    word &= ~(~np.uint64(0) << np.uint64(b - base))
                if word == 0:
                    continue
                m = np.uint64(1)
                for k in range(64):
                    if word & m:
                        p = base + k
                        n_ += p_count[p]
                        s += p_sum[p]
                        if p_min[p] < lo:
                            lo = p_min[p]
                        if p_max[p] > hi:
                            hi = p_max[p]
                    m <<= np.uint64(1)
            cnt[c, i] = n_
            sm[c, i] = s
            mn[c, i] = lo
            mx[c, i] = hi
    return cnt, sm, mn, mx


@numba.njit(cache=True, nogil=True, parallel=True)
def _nearest(off, tgt, w, sources, poi_ptr, poi_ids, k, limit, n, nthreads):
    """Per source junction: the k nearest POIs (by the graph's weights, within `limit`): (dist [M, k]
    inf-padded, poi index [M, k] -1-padded); POIs on one junction in index order. A bounded Dijkstra per
    source on the routing kernels' indexed heap (geoengine.routing._heap)."""
    M = len(sources)
    out_d = np.full((M, k), np.inf)
    out_i = np.full((M, k), -1, dtype=np.int64)
    nt = min(nthreads, max(M, 1))
    for t in numba.prange(nt):
        dist = np.full(n, np.inf)
        done = np.zeros(n, dtype=np.bool_)
        touched = np.empty(n, dtype=np.int64)
        hk = np.empty(max(n, 1), dtype=np.float64)
        hv = np.empty(max(n, 1), dtype=np.int32)
        hpos = np.full(n, -1, dtype=np.int64)
        for m in range(t, M, nt):
            s = sources[m]
            found = 0
            nt_ = 0
            dist[s] = 0.0
            touched[nt_] = s
            nt_ += 1
            size = heap_push(hk, hv, hpos, 0, s, 0.0)
            while size > 0 and found < k:
                u, d, size = heap_pop(hk, hv, hpos, size)
                done[u] = True
                for j in range(poi_ptr[u], poi_ptr[u + 1]):
                    if found < k:
                        out_d[m, found] = d
                        out_i[m, found] = poi_ids[j]
                        found += 1
                for e in range(off[u], off[u + 1]):
                    v = tgt[e]
                    nd = d + w[e]
                    if nd <= limit and nd < dist[v] and not done[v]:
                        if dist[v] == np.inf:
                            touched[nt_] = v
                            nt_ += 1
                            dist[v] = nd
                            size = heap_push(hk, hv, hpos, size, v, nd)
                        else:
                            dist[v] = nd
                            heap_decrease(hk, hv, hpos, v, nd)
            while size > 0:  # k found: empty the heap for the next source
                u, d, size = heap_pop(hk, hv, hpos, size)
            for i in range(nt_):
                dist[touched[i]] = np.inf
                done[touched[i]] = False
    return out_d, out_i


# ----------------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------------
def points_array(points, field: str, allow_empty: bool = False) -> np.ndarray:
    """(n, 2) float64 (lon, lat) from an array-like of rows, a GeoSeries / GeoDataFrame of points, or a
    DataFrame with lon/lat columns; InvalidRequest naming `field` for anything else, empty input,
    NaN or out-of-range coordinates."""
    geom = getattr(points, "geometry", None)
    if geom is not None and hasattr(geom, "x"):
        points = np.column_stack([np.asarray(geom.x), np.asarray(geom.y)])
    elif hasattr(points, "columns") and {"lon", "lat"} <= set(points.columns):
        points = np.column_stack([np.asarray(points["lon"]), np.asarray(points["lat"])])
    try:
        a = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest.field(field, f"must be an array of (lon, lat) rows: {exc}") from None
    if a.ndim == 1 and a.shape[0] == 2:
        a = a.reshape(1, 2)
    if a.ndim != 2 or a.shape[1] != 2:
        raise InvalidRequest.field(field, f"must be an array of (lon, lat) rows, shape (n, 2); got shape {a.shape}")
    if len(a) == 0 and not allow_empty:
        raise InvalidRequest.field(field, "is empty: give at least one (lon, lat) row")
    bad = ~(np.isfinite(a).all(axis=1) & (np.abs(a[:, 0]) <= 180) & (np.abs(a[:, 1]) <= 90))
    if bad.any():
        idx = np.flatnonzero(bad)
        raise InvalidRequest(errors=[FieldError(f"{field}[{i}]", "lon must be in [-180, 180] and lat in [-90, 90] "
                                                "(rows are (lon, lat); NaN is not a coordinate)")
                                     for i in idx[:20].tolist()])
    return np.ascontiguousarray(a)


def impedance(max_time_s, max_distance_m) -> tuple[str, float]:
    """("time_s" | "length_m", limit) from exactly one of the two limits."""
    if (max_time_s is None) == (max_distance_m is None):
        raise InvalidRequest.field("max_time_s", "give exactly one of max_time_s or max_distance_m")
    name, value = ("max_time_s", max_time_s) if max_time_s is not None else ("max_distance_m", max_distance_m)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidRequest.field(name, "must be a number") from None
    if not (np.isfinite(v) and v > 0):
        raise InvalidRequest.field(name, "must be a finite number > 0")
    return ("time_s" if name == "max_time_s" else "length_m"), v


# ----------------------------------------------------------------------------------------------------
# Graph arrays per impedance (cached on the Network)
# ----------------------------------------------------------------------------------------------------
def _csr(src, dst, w, n):
    order = np.argsort(src, kind="stable")
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=off[1:])
    return off, np.ascontiguousarray(dst[order], np.int64), np.ascontiguousarray(w[order], np.float64)


def graph_arrays(net, metric: str, reverse: bool):
    """(offsets, targets, weights) of the network's forward or reversed junction graph for `metric`."""
    cache = net.__dict__.setdefault("_access_csr", {})
    key = (metric, reverse)
    if key not in cache:
        w = getattr(net, metric)
        cache[key] = _csr(net.dst, net.src, w, net.n_nodes) if reverse else _csr(net.src, net.dst, w, net.n_nodes)
    return cache[key]


# ----------------------------------------------------------------------------------------------------
# Accessibility
# ----------------------------------------------------------------------------------------------------
@dataclass
class PoiJunctions:
    """POIs grouped by junction: distinct junctions (sorted) and per junction the count, weight sum (in
    POI order), min and max."""

    node: np.ndarray
    count: np.ndarray
    sum: np.ndarray
    min: np.ndarray
    max: np.ndarray

    def chunks(self, n_nodes: int) -> list[slice]:
        size = int(min(CHUNK_MAX, max(16, CHUNK_BITS // max(n_nodes, 1))))
        return [slice(a, min(a + size, len(self.node))) for a in range(0, len(self.node), size)]


def poi_junctions(poi_nodes: np.ndarray, weights: np.ndarray) -> PoiJunctions:
    order = np.argsort(poi_nodes, kind="stable")
    nodes = poi_nodes[order]
    w = weights[order]
    uniq, start, count = np.unique(nodes, return_index=True, return_counts=True)
    # per-junction sums over the POIs in index order (numpy's reduceat: deterministic for equal input)
    s = np.add.reduceat(w, start) if len(w) else np.zeros(0)
    return PoiJunctions(uniq.astype(np.int64), count.astype(np.int64), s.astype(np.float64),
                        np.minimum.reduceat(w, start) if len(w) else np.zeros(0),
                        np.maximum.reduceat(w, start) if len(w) else np.zeros(0))


def hierarchy(net, metric: str):
    """Contraction hierarchy of the network's junction graph for `metric` (built once per Network and
    metric: about 2 s for Liechtenstein's 6,200 junctions; `geoengine.routing.ch`)."""
    cache = net.__dict__.setdefault("_access_ch", {})
    if metric not in cache:
        from geoengine.routing.ch import ContractionHierarchy

        off, tgt, w = graph_arrays(net, metric, reverse=False)
        cache[metric] = ContractionHierarchy.build(net.n_nodes, off, tgt.astype(np.int32), w, np.zeros(len(w)))
    return cache[metric]


def chunk_partials(net, pj: PoiJunctions, parts: list[slice], metric: str, limit: float, out_nodes: np.ndarray):
    """[(count, sum, min, max) over out_nodes of the POI junctions pj[part]] for each chunk of `parts`
    (consecutive chunks). Chunks are swept together, as many as keep the reach bit matrix within
    CHUNK_BITS, so one call makes two parallel regions rather than two per chunk; the partials are those
    of each chunk alone, so how chunks are grouped (here or over `geoengine.batch` tasks) does not change
    the result."""
    ch = hierarchy(net, metric)
    rank = np.asarray(ch.rank, dtype=np.int64)
    out_ranks = rank[out_nodes]
    per_group = max(1, CHUNK_BITS // max(net.n_nodes, 1))  # POI junctions per sweep
    results = []
    i = 0
    while i < len(parts):
        j = i + 1
        while j < len(parts) and parts[j].stop - parts[i].start <= per_group and parts[j].start == parts[j - 1].stop:
            j += 1
        a, b = parts[i].start, parts[j - 1].stop
        bits = _reach_bits(ch.up_off, ch.up_tgt, ch.up_w, ch.dn_off, ch.dn_tgt, ch.dn_w, rank[pj.node[a:b]], limit,
                           net.n_nodes, numba.get_num_threads())
        bounds = np.array([p.start - a for p in parts[i:j]] + [b - a], dtype=np.int64)
        cnt, sm, mn, mx = _aggregate(bits, bounds, pj.count[a:b], pj.sum[a:b], pj.min[a:b], pj.max[a:b], out_ranks)
        results.extend((cnt[c], sm[c], mn[c], mx[c]) for c in range(j - i))
        i = j
    return results


def combine(parts, m: int):
    """Combine chunk partials in chunk order (the one order in-process and batch calls both use)."""
    cnt = np.zeros(m, dtype=np.int64)
    sm = np.zeros(m, dtype=np.float64)
    mn = np.full(m, np.inf)
    mx = np.full(m, -np.inf)
    for c, s, lo, hi in parts:
        cnt += c
        sm += s
        np.minimum(mn, lo, out=mn)
        np.maximum(mx, hi, out=mx)
    return cnt, sm, mn, mx


def finish(aggregation: str, cnt, sm, mn, mx) -> np.ndarray:
    if aggregation == "count":
        return cnt.astype(np.float64)
    if aggregation == "sum":
        return sm
    with np.errstate(invalid="ignore", divide="ignore"):
        if aggregation == "mean":
            return np.where(cnt > 0, sm / np.maximum(cnt, 1), np.nan)
    return np.where(cnt > 0, mn if aggregation == "min" else mx, np.nan)


@dataclass
class AccessibilityResult:
    """value: float64 per output (count as float; NaN for mean/min/max where no POI is in reach);
    count: int64 POIs in reach; node: the junction each output is attached to; snap_distance_m: metres
    from each input point to that junction (0 at="nodes"); lon/lat: the output points (junctions for
    at="nodes", the given points otherwise)."""

    value: np.ndarray
    count: np.ndarray
    node: np.ndarray
    snap_distance_m: np.ndarray
    lon: np.ndarray
    lat: np.ndarray
    aggregation: str
    metric: str
    limit: float

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame({"lon": self.lon, "lat": self.lat, "node": self.node,
                             "snap_distance_m": self.snap_distance_m, "count": self.count,
                             self.aggregation if self.aggregation != "count" else "value": self.value})

    def to_geopandas(self):
        from geoengine.frames import points_frame

        return points_frame(self.to_pandas(), self.lon, self.lat)


def prepare(net, pois, weights, aggregation, at):
    """Validated (poi junctions, output junctions, snap distances, lon, lat) of an accessibility call."""
    if aggregation not in AGGREGATIONS:
        raise InvalidRequest.field("aggregation", f"unknown aggregation '{aggregation}'; use one of: "
                                   + ", ".join(AGGREGATIONS))
    p = points_array(pois, "pois")
    if weights is None:
        w = np.ones(len(p))
    else:
        try:
            w = np.asarray(weights, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise InvalidRequest.field("weights", "must be numbers, one per POI") from None
        if len(w) != len(p):
            raise InvalidRequest.field("weights", f"has {len(w)} values for {len(p)} POIs: give one per POI")
        if not np.isfinite(w).all():
            raise InvalidRequest.field("weights", "must be finite numbers (no NaN or inf)")
    poi_nodes, _ = net.nearest_nodes(p[:, 0], p[:, 1])
    pj = poi_junctions(poi_nodes.astype(np.int64), w)
    if isinstance(at, str):
        if at != "nodes":
            raise InvalidRequest.field("at", "must be 'nodes' or an array of (lon, lat) points")
        out = np.arange(net.n_nodes, dtype=np.int64)
        return pj, out, np.zeros(net.n_nodes), net.lon, net.lat
    q = points_array(at, "at")
    out, d = net.nearest_nodes(q[:, 0], q[:, 1])
    return pj, out.astype(np.int64), d, q[:, 0].copy(), q[:, 1].copy()


def accessibility(net, pois, *, max_time_s=None, max_distance_m=None, aggregation="count", weights=None,
                  at="nodes") -> AccessibilityResult:
    metric, limit = impedance(max_time_s, max_distance_m)
    pj, out, snap_d, lon, lat = prepare(net, pois, weights, aggregation, at)
    parts = chunk_partials(net, pj, pj.chunks(net.n_nodes), metric, limit, out)
    cnt, sm, mn, mx = combine(parts, len(out))
    return AccessibilityResult(finish(aggregation, cnt, sm, mn, mx), cnt, out, snap_d, lon, lat,
                               aggregation, metric, limit)


# ----------------------------------------------------------------------------------------------------
# Nearest POIs
# ----------------------------------------------------------------------------------------------------
@dataclass
class NearestPoisResult:
    """distance: float64 [n, k] travel time (s) or length (m) to the 1st..k-th nearest POI (inf where
    fewer are in reach); poi: int64 [n, k] index into the given POIs (-1 where none); node,
    snap_distance_m: each point's junction and its distance to it."""

    distance: np.ndarray
    poi: np.ndarray
    node: np.ndarray
    snap_distance_m: np.ndarray
    metric: str
    limit: float

    def to_pandas(self):
        """Long form: point, rank (1..k), poi, distance (only rows with a POI in reach)."""
        import pandas as pd

        n, k = self.poi.shape
        ok = self.poi >= 0
        return pd.DataFrame({"point": np.repeat(np.arange(n), k)[ok.ravel()],
                             "rank": np.tile(np.arange(1, k + 1), n)[ok.ravel()],
                             "poi": self.poi[ok], "time_s" if self.metric == "time_s" else "distance_m":
                             self.distance[ok]})


def nearest_pois(net, points, pois, k: int = 1, *, max_time_s=None, max_distance_m=None) -> NearestPoisResult:
    metric, limit = impedance(max_time_s, max_distance_m)
    q = points_array(points, "points")
    p = points_array(pois, "pois")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidRequest.field("k", "must be an integer >= 1")
    if k > len(p):
        raise InvalidRequest.field("k", f"is {k} but there are only {len(p)} POIs")
    poi_nodes, _ = net.nearest_nodes(p[:, 0], p[:, 1])
    order = np.argsort(poi_nodes, kind="stable")
    ptr = np.zeros(net.n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(poi_nodes, minlength=net.n_nodes), out=ptr[1:])
    nodes, d = net.nearest_nodes(q[:, 0], q[:, 1])
    off, tgt, w = graph_arrays(net, metric, reverse=False)
    dist, idx = _nearest(off, tgt, w, nodes.astype(np.int64), ptr, order.astype(np.int64), int(k), limit,
                         net.n_nodes, numba.get_num_threads())
    return NearestPoisResult(dist, idx, nodes, d, metric, limit)
