"""Exact searches over the original CSR graph (Numba): the fallback for option-weighted graphs, and the
bounded one-to-all search behind isochrones.

- `Graph`: the CSR arrays plus (lazily) arc tails and the reverse CSR.
- `dijkstra(graph, sources, targets, ...)`: unidirectional multi-source/multi-target search with offsets.
- `bidirectional_dijkstra(graph, ...)`: the same answer, meeting in the middle (fewer settled vertices).
- `table(graph, sources, targets)`: exact many-to-many (option-weighted matrices).
- `one_to_all(graph, sources, ..., limit=...)`: per-vertex primary/secondary labels, inf beyond the limit;
  `reverse=True` gives costs TO the sources instead of from them.

Offsets and the same-vertex contract are those of `ContractionHierarchy.query` (see ch.py): cost =
min over (s, t) of source_offset + d(s, t) + target_offset with d(v, v) = 0, unless `force_loop`.
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from geoengine.arrays import readonly
from geoengine.routing._heap import heap_decrease, heap_pop, heap_push, init_labels
from geoengine.routing.ch import Locations, PathResult, as_locations, checked_locations, flatten_locations

INF = np.inf


@numba.njit(cache=True, nogil=True)
def _mark_targets(tv, to, to2, tmark, tbest, tbest2, cur):
    mn = INF
    for i in range(tv.shape[0]):
        v = tv[i]
        if tmark[v] != cur or to[i] < tbest[v]:
            tmark[v] = cur
            tbest[v] = to[i]
            tbest2[v] = to2[i]
        if to[i] < mn:
            mn = to[i]
    return mn


@numba.njit(cache=True, nogil=True)
def _uni(offsets, targets, weights, secondary, sv, so, so2, tv, to, to2, force_loop,
         dist, sec, par, stamp, hk, hv, hpos, tmark, tbest, tbest2, ctr):
    """Returns (best, best2, last vertex before the final arc or the trivial vertex, final arc or -1)."""
    ctr[0] += 1
    cur = ctr[0]
    min_t = _mark_targets(tv, to, to2, tmark, tbest, tbest2, cur)
    size = init_labels(sv, so, so2, dist, sec, par, stamp, cur, hk, hv, hpos)
    best = INF
    best2 = INF
    end_v = -1
    end_arc = -1
    if not force_loop:
        for i in range(sv.shape[0]):
            v = sv[i]
            if tmark[v] == cur and dist[v] + tbest[v] < best:
                best = dist[v] + tbest[v]
                best2 = sec[v] + tbest2[v]
                end_v = v
                end_arc = -1
    while size > 0:
        v, d, size = heap_pop(hk, hv, hpos, size)
        if d + min_t >= best:
            break
        sv_ = sec[v]
        for k in range(offsets[v], offsets[v + 1]):
            x = targets[k]
            if x == v:
                continue
            nd = d + weights[k]
            if tmark[x] == cur and nd + tbest[x] < best:
                best = nd + tbest[x]
                best2 = sv_ + secondary[k] + tbest2[x]
                end_v = v
                end_arc = k
            if stamp[x] != cur:
                stamp[x] = cur
                dist[x] = nd
                sec[x] = sv_ + secondary[k]
                par[x] = k
                size = heap_push(hk, hv, hpos, size, x, nd)
            elif hpos[x] >= 0 and nd < dist[x]:
                dist[x] = nd
                sec[x] = sv_ + secondary[k]
                par[x] = k
                heap_decrease(hk, hv, hpos, x, nd)
    return best, best2, end_v, end_arc


@numba.njit(cache=True, nogil=True)
def _bi(offsets, targets, weights, secondary, roff, rarc, tails, sv, so, so2, tv, to, to2, force_loop,
        fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk, bhv, bhp, ctr):
    """Bidirectional Dijkstra; meetings are checked on every relaxed arc. Returns (best, best2, u, arc)
    where the path is source..u, arc, head(arc)..target; arc = -1 for the trivial path at u."""
    ctr[0] += 1
    cur = ctr[0]
    fsize = init_labels(sv, so, so2, fd, fs, fp, fst, cur, fhk, fhv, fhp)
    bsize = init_labels(tv, to, to2, bd, bs, bp, bst, cur, bhk, bhv, bhp)
    best = INF
    best2 = INF
    mu = -1
    marc = -1
    if not force_loop:
        for i in range(sv.shape[0]):
            v = sv[i]
            if bst[v] == cur and fd[v] + bd[v] < best:
                best = fd[v] + bd[v]
                best2 = fs[v] + bs[v]
                mu = v
                marc = -1
    while fsize > 0 and bsize > 0:
        if fhk[0] + bhk[0] >= best:
            break
        if fhk[0] <= bhk[0]:
            v, d, fsize = heap_pop(fhk, fhv, fhp, fsize)
            s0 = fs[v]
            for k in range(offsets[v], offsets[v + 1]):
                x = targets[k]
                if x == v:
                    continue
                nd = d + weights[k]
                if bst[x] == cur and nd + bd[x] < best:
                    best = nd + bd[x]
                    best2 = s0 + secondary[k] + bs[x]
                    mu = v
                    marc = k
                if fst[x] != cur:
                    fst[x] = cur
                    fd[x] = nd
                    fs[x] = s0 + secondary[k]
                    fp[x] = k
                    fsize = heap_push(fhk, fhv, fhp, fsize, x, nd)
                elif fhp[x] >= 0 and nd < fd[x]:
                    fd[x] = nd
                    fs[x] = s0 + secondary[k]
                    fp[x] = k
                    heap_decrease(fhk, fhv, fhp, x, nd)
        else:
            v, d, bsize = heap_pop(bhk, bhv, bhp, bsize)
            s0 = bs[v]
            for q in range(roff[v], roff[v + 1]):
                k = rarc[q]
                x = tails[k]
                if x == v:
                    continue
                nd = d + weights[k]
                if fst[x] == cur and nd + fd[x] < best:
                    best = nd + fd[x]
                    best2 = s0 + secondary[k] + fs[x]
                    mu = x
                    marc = k
                if bst[x] != cur:
                    bst[x] = cur
                    bd[x] = nd
                    bs[x] = s0 + secondary[k]
                    bp[x] = k
                    bsize = heap_push(bhk, bhv, bhp, bsize, x, nd)
                elif bhp[x] >= 0 and nd < bd[x]:
                    bd[x] = nd
                    bs[x] = s0 + secondary[k]
                    bp[x] = k
                    heap_decrease(bhk, bhv, bhp, x, nd)
    return best, best2, mu, marc


@numba.njit(cache=True, nogil=True)
def _table_kernel(n, offsets, targets, weights, secondary, sv, so, so2, sptr, tv, to, to2, tptr):
    """One multi-source Dijkstra per source location, stopping once every target candidate is settled."""
    ns = sptr.shape[0] - 1
    nt = tptr.shape[0] - 1
    D = np.full((ns, nt), INF)
    S = np.full((ns, nt), INF)
    # target candidates grouped by vertex
    tj = np.empty(tv.shape[0], np.int64)
    for j in range(nt):
        for q in range(tptr[j], tptr[j + 1]):
            tj[q] = j
    order = np.argsort(tv, kind="mergesort")
    voff = np.zeros(n + 1, np.int64)
    for q in range(tv.shape[0]):
        voff[tv[q] + 1] += 1
    for v in range(n):
        voff[v + 1] += voff[v]
    ndistinct = 0
    for v in range(n):
        if voff[v + 1] > voff[v]:
            ndistinct += 1
    dist = np.zeros(n)
    sec = np.zeros(n)
    par = np.full(n, -1, np.int64)
    stamp = np.zeros(n, np.int64)
    hk = np.empty(max(n, 1))
    hv = np.empty(max(n, 1), np.int32)
    hpos = np.full(n, -1, np.int64)
    for i in range(ns):
        size = init_labels(sv[sptr[i]:sptr[i + 1]], so[sptr[i]:sptr[i + 1]], so2[sptr[i]:sptr[i + 1]], dist, sec, par,
                     stamp, i + 1, hk, hv, hpos)
        left = ndistinct
        while size > 0 and left > 0:
            v, d, size = heap_pop(hk, hv, hpos, size)
            if voff[v + 1] > voff[v]:
                left -= 1
                for q in range(voff[v], voff[v + 1]):
                    e = order[q]
                    j = tj[e]
                    c = d + to[e]
                    if c < D[i, j]:
                        D[i, j] = c
                        S[i, j] = sec[v] + to2[e]
            s0 = sec[v]
            for k in range(offsets[v], offsets[v + 1]):
                x = targets[k]
                if x == v:
                    continue
                nd = d + weights[k]
                if stamp[x] != i + 1:
                    stamp[x] = i + 1
                    dist[x] = nd
                    sec[x] = s0 + secondary[k]
                    size = heap_push(hk, hv, hpos, size, x, nd)
                elif hpos[x] >= 0 and nd < dist[x]:
                    dist[x] = nd
                    sec[x] = s0 + secondary[k]
                    heap_decrease(hk, hv, hpos, x, nd)
    return D, S


@numba.njit(cache=True, nogil=True)
def _walk_back(v, par, tails):
    """Vertices from the root of v's parent chain to v."""
    cnt = 1
    x = v
    while par[x] != -1:
        x = tails[par[x]]
        cnt += 1
    out = np.empty(cnt, np.int64)
    x = v
    i = cnt - 1
    out[i] = x
    while par[x] != -1:
        x = tails[par[x]]
        i -= 1
        out[i] = x
    return out


@numba.njit(cache=True, nogil=True)
def _walk_fwd(v, bpar, targets):
    """Vertices from v along backward-search parents to the target root."""
    cnt = 1
    x = v
    while bpar[x] != -1:
        x = targets[bpar[x]]
        cnt += 1
    out = np.empty(cnt, np.int64)
    x = v
    out[0] = x
    i = 0
    while bpar[x] != -1:
        x = targets[bpar[x]]
        i += 1
        out[i] = x
    return out


@numba.njit(cache=True, nogil=True)
def _bounded(offsets, targets, weights, secondary, sv, so, so2, limit, n):
    """Multi-source Dijkstra up to `limit` (labels > limit stay inf)."""
    dist = np.full(n, INF)
    sec = np.full(n, INF)
    hk = np.empty(n, np.float64)
    hv = np.empty(n, np.int32)
    hpos = np.full(n, -1, np.int64)
    done = np.zeros(n, np.bool_)
    size = 0
    for i in range(sv.shape[0]):
        v = sv[i]
        o = so[i]
        if o > limit:
            continue
        if dist[v] == INF:
            dist[v] = o
            sec[v] = so2[i]
            size = heap_push(hk, hv, hpos, size, v, o)
        elif o < dist[v]:
            dist[v] = o
            sec[v] = so2[i]
            heap_decrease(hk, hv, hpos, v, o)
    while size > 0:
        v, d, size = heap_pop(hk, hv, hpos, size)
        done[v] = True
        s0 = sec[v]
        for k in range(offsets[v], offsets[v + 1]):
            x = targets[k]
            nd = d + weights[k]
            if nd > limit or done[x]:
                continue
            if dist[x] == INF:
                dist[x] = nd
                sec[x] = s0 + secondary[k]
                size = heap_push(hk, hv, hpos, size, x, nd)
            elif nd < dist[x]:
                dist[x] = nd
                sec[x] = s0 + secondary[k]
                heap_decrease(hk, hv, hpos, x, nd)
    return dist, sec


@numba.njit(cache=True, nogil=True)
def _reverse_csr(n, offsets, targets):
    m = targets.shape[0]
    tails = np.empty(m, np.int32)
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            tails[k] = u
    roff = np.zeros(n + 1, np.int64)
    for k in range(m):
        roff[targets[k] + 1] += 1
    for v in range(n):
        roff[v + 1] += roff[v]
    fill = roff[:n].copy()
    rarc = np.empty(m, np.int64)
    for k in range(m):
        x = targets[k]
        rarc[fill[x]] = k
        fill[x] += 1
    return tails, roff, rarc


class Graph:
    """A directed graph in CSR form with a primary and a secondary arc metric (see module doc)."""

    def __init__(self, n, offsets, targets, weights, secondary=None):
        self.n = int(n)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.targets = np.ascontiguousarray(targets, dtype=np.int32)
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.secondary = (np.zeros_like(self.weights) if secondary is None
                          else np.ascontiguousarray(secondary, dtype=np.float64))
        if self.offsets.shape != (self.n + 1,) or self.offsets[-1] != self.targets.shape[0]:
            raise ValueError("offsets must be int64[n+1] ending at len(targets)")
        if self.weights.shape != self.targets.shape or self.secondary.shape != self.targets.shape:
            raise ValueError("weights and secondary must have the shape of targets")
        if self.weights.size and not (np.all(np.isfinite(self.weights)) and self.weights.min() >= 0):
            raise ValueError("weights must be finite and >= 0")
        for name in ("offsets", "targets", "weights", "secondary"):
            setattr(self, name, readonly(getattr(self, name)))
        self._rev = None
        self._local = threading.local()

    def with_weights(self, weights, secondary=None) -> Graph:
        """Same topology, other metric (an option-weighted costing); shares the reverse index."""
        g = Graph(self.n, self.offsets, self.targets, weights, self.secondary if secondary is None else secondary)
        g._rev = self._rev
        return g

    @property
    def reverse(self):
        """(tails int32[m], reverse offsets int64[n+1], arc ids int64[m] grouped by head)."""
        if self._rev is None:
            self._rev = tuple(readonly(a) for a in _reverse_csr(self.n, self.offsets, self.targets))
        return self._rev

    def warmup(self) -> None:
        """Load the search kernels from Numba's cache now rather than on the first request."""
        if self.n:
            dijkstra(self, 0, 0)
            bidirectional_dijkstra(self, 0, 0)
            one_to_all(self, 0, limit=0.0)
            one_to_all(self, 0, limit=0.0, reverse=True)

    def _ws(self):
        ws = getattr(self._local, "ws", None)
        if ws is None:
            n = self.n

            def side():
                return (np.zeros(n), np.zeros(n), np.full(n, -1, np.int64), np.zeros(n, np.int64),
                        np.empty(max(n, 1)), np.empty(max(n, 1), np.int32), np.full(n, -1, np.int64))

            ws = (side(), side(), (np.zeros(n, np.int64), np.zeros(n), np.zeros(n)), np.zeros(1, np.int64))
            self._local.ws = ws
        return ws

    def _locs(self, vertices, off, off2, name):
        v, o, o2 = as_locations(vertices, off, off2, name)
        if v.size and (v.min() < 0 or v.max() >= self.n):
            raise ValueError(f"{name}: vertex out of range [0, {self.n})")
        return v, o, o2


def dijkstra(graph: Graph, sources, targets, source_offsets=None, target_offsets=None, source_offsets2=None,
             target_offsets2=None, *, force_loop=False) -> PathResult:
    """Exact shortest path by plain Dijkstra (stops once no better target can be reached)."""
    sv, so, so2 = graph._locs(sources, source_offsets, source_offsets2, "sources")
    tv, to, to2 = graph._locs(targets, target_offsets, target_offsets2, "targets")
    f, _b, (tmark, tbest, tbest2), ctr = graph._ws()
    best, best2, end_v, end_arc = _uni(graph.offsets, graph.targets, graph.weights, graph.secondary, sv, so, so2, tv,
                                       to, to2, bool(force_loop), f[0], f[1], f[2], f[3], f[4], f[5], f[6], tmark,
                                       tbest, tbest2, ctr)
    if end_v < 0:
        return PathResult(INF, INF, np.empty(0, np.int64), -1, -1)
    tails = graph.reverse[0]
    path = _walk_back(end_v, f[2], tails)
    if end_arc >= 0:
        path = np.append(path, np.int64(graph.targets[end_arc]))
    return PathResult(float(best), float(best2), path, _pick(sv, so, path[0], f[0][path[0]]),
                 _pick(tv, to, path[-1], None))


def bidirectional_dijkstra(graph: Graph, sources, targets, source_offsets=None, target_offsets=None,
                           source_offsets2=None, target_offsets2=None, *, force_loop=False) -> PathResult:
    """Exact shortest path by bidirectional Dijkstra over the original graph and its reverse."""
    sv, so, so2 = graph._locs(sources, source_offsets, source_offsets2, "sources")
    tv, to, to2 = graph._locs(targets, target_offsets, target_offsets2, "targets")
    tails, roff, rarc = graph.reverse
    f, b, _t, ctr = graph._ws()
    best, best2, mu, marc = _bi(graph.offsets, graph.targets, graph.weights, graph.secondary, roff, rarc, tails, sv, so,
                                so2, tv, to, to2, bool(force_loop), *f, *b, ctr)
    if mu < 0:
        return PathResult(INF, INF, np.empty(0, np.int64), -1, -1)
    head = mu if marc < 0 else int(graph.targets[marc])
    front = _walk_back(mu, f[2], tails)
    back = _walk_fwd(head, b[2], graph.targets)
    path = np.concatenate([front, back]) if marc >= 0 else np.concatenate([front, back[1:]])
    return PathResult(float(best), float(best2), path, _pick(sv, so, path[0], f[0][path[0]]),
                 _pick(tv, to, path[-1], b[0][path[-1]]))


def table(graph: Graph, sources, targets):
    """Exact many-to-many on the original graph (the fallback for option-weighted matrices): one
    Dijkstra per source location that stops once every target candidate is settled. Locations as in
    `ContractionHierarchy.table` (`Locations`, a list or a 1-D int array); returns (primary, secondary) float64 matrices, inf where no path."""
    sv, so, so2, sp = _flat(graph, sources)
    tv, to, to2, tp = _flat(graph, targets)
    return _table_kernel(graph.n, graph.offsets, graph.targets, graph.weights, graph.secondary, sv, so, so2, sp, tv,
                         to, to2, tp)


def _flat(graph, locs):
    if isinstance(locs, Locations):
        return checked_locations(locs, graph.n)
    if isinstance(locs, np.ndarray) and locs.ndim == 1 and np.issubdtype(locs.dtype, np.integer):
        locs = [int(v) for v in locs]
    return flatten_locations(list(locs), graph.n)


def one_to_all(graph: Graph, sources, source_offsets=None, source_offsets2=None, *, limit=INF, reverse=False):
    """Primary and secondary cost from the sources to every vertex (or, with reverse=True, from every
    vertex to the sources), inf where the primary cost exceeds `limit` or no path exists."""
    sv, so, so2 = graph._locs(sources, source_offsets, source_offsets2, "sources")
    if reverse:
        tails, roff, rarc = graph.reverse
        tg, w, s2 = tails[rarc], graph.weights[rarc], graph.secondary[rarc]
        return _bounded(roff, readonly(tg), readonly(w), readonly(s2), sv, so, so2, float(limit), graph.n)
    return _bounded(graph.offsets, graph.targets, graph.weights, graph.secondary, sv, so, so2, float(limit), graph.n)


def _pick(vs, offs, v, label):
    idx = np.nonzero(vs == v)[0]
    if idx.size == 0:
        return -1
    if label is None:
        return int(idx[np.argmin(offs[idx])])
    return int(idx[np.argmin(np.abs(offs[idx] - label))])
