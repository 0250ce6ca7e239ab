"""Contraction hierarchies over a generic directed graph in CSR form (Numba).

Input graph: `n` vertices, `offsets` int64[n+1], `targets` int32[m], `weights` float64[m] (the primary
metric that is minimised, e.g. seconds, >= 0) and `secondary` float64[m] (a second metric carried along,
e.g. metres). Self loops are dropped; of parallel arcs the one with the smallest (primary, secondary) is
kept.

Preprocessing (`contract`): bottom-up node ordering with lazy updates; the priority of a vertex is
`level + added/removed arcs + added/removed hops` (the RoutingKit formula); a vertex is contracted by
adding a shortcut u->w for each in-neighbour u and out-neighbour w unless a witness search (Dijkstra from
u that avoids the vertex, bounded by the via cost and a settle limit) finds a path no longer than the
via path. Every shortcut carries both metrics, its middle vertex and its two child arcs.

Result, stored in RANK space (vertex ids renumbered by contraction order, which gives query locality):
- the upward graph `up_*`: for each rank r, the arcs r->x with rank x > r;
- the downward graph `dn_*` stored reversed: for each rank r, the arcs x->r with rank x > r, listed
  under r with `dn_tgt = x` (the backward search climbs them from r to x).
- `up_mid`/`dn_mid`: middle vertex of a shortcut as an ORIGINAL vertex id, -1 for an original arc;
  `*_c1` is the first child (always a dn arc id, x->mid), `*_c2` the second (always an up arc id,
  mid->y), which makes unpacking a constant-time walk per arc.
- `rank[v]` (original -> rank) and `order[r]` (rank -> original).

Queries (see `ContractionHierarchy`): bidirectional point-to-point with stall-on-demand and multi-vertex
sources and targets with offsets (`query`), bucket many-to-many (`table`), batch point-to-point (`pairs`),
and path unpacking. Many locations travel as one `Locations` (flat candidate arrays); each thread's
search labels are one `Workspace` (`ContractionHierarchy.workspace()`), whose arrays the kernels take.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from geoengine.arrays import readonly
from geoengine.routing._heap import heap_decrease, heap_pop, heap_push, heap_update, init_labels

FORMAT_VERSION = 1
INF = np.inf

# ---------------------------------------------------------------------------------------------------
# contraction: dynamic adjacency lists in a pool (start/len/cap per vertex, rows of I and F)
# I columns: 0 neighbour, 1 middle vertex (-1 original), 2 child1 (dn arc id), 3 child2 (up arc id),
#            4 hops (number of original arcs)
# F columns: 0 primary, 1 secondary
# ---------------------------------------------------------------------------------------------------

_I_COLS = 5


@numba.njit(cache=True, nogil=True)
def _adj_find(start, ln, pi, u, x):
    b = start[u]
    for k in range(b, b + ln[u]):
        if pi[k, 0] == x:
            return k
    return -1


@numba.njit(cache=True, nogil=True)
def _adj_set(start, ln, cap, pi, pf, top, u, x, w, s, mid, c1, c2, hops):
    """Insert arc u->x into u's list, or improve the existing one. Returns (pi, pf, top)."""
    k = _adj_find(start, ln, pi, u, x)
    if k >= 0:
        if w < pf[k, 0] or (w == pf[k, 0] and s < pf[k, 1]):
            pf[k, 0] = w
            pf[k, 1] = s
            pi[k, 1] = mid
            pi[k, 2] = c1
            pi[k, 3] = c2
            pi[k, 4] = hops
        return pi, pf, top
    if ln[u] == cap[u]:
        newcap = max(4, 2 * cap[u])
        if top + newcap > pi.shape[0]:
            size = max(2 * pi.shape[0], top + newcap)
            pi2 = np.empty((size, _I_COLS), np.int64)
            pf2 = np.empty((size, 2), np.float64)
            pi2[:top] = pi[:top]
            pf2[:top] = pf[:top]
            pi = pi2
            pf = pf2
        b = start[u]
        for t in range(ln[u]):
            for c in range(_I_COLS):
                pi[top + t, c] = pi[b + t, c]
            pf[top + t, 0] = pf[b + t, 0]
            pf[top + t, 1] = pf[b + t, 1]
        start[u] = top
        cap[u] = newcap
        top += newcap
    k = start[u] + ln[u]
    ln[u] += 1
    pi[k, 0] = x
    pi[k, 1] = mid
    pi[k, 2] = c1
    pi[k, 3] = c2
    pi[k, 4] = hops
    pf[k, 0] = w
    pf[k, 1] = s
    return pi, pf, top


@numba.njit(cache=True, nogil=True)
def _adj_remove(start, ln, pi, pf, u, x):
    k = _adj_find(start, ln, pi, u, x)
    if k < 0:
        return
    last = start[u] + ln[u] - 1
    for c in range(_I_COLS):
        pi[k, c] = pi[last, c]
    pf[k, 0] = pf[last, 0]
    pf[k, 1] = pf[last, 1]
    ln[u] -= 1


@numba.njit(cache=True, nogil=True)
def _witness(oS, oL, oI, oF, src, skip, bound, limit, maxhops, hop, ntargets, tmark, dist, stamp, cur, hk, hv, hpos,
             st):
    """Dijkstra from src over the remaining graph avoiding `skip`, up to `bound` and `limit` settled
    vertices, stopping early once the `ntargets` vertices with tmark == cur are settled. Labels are left
    in dist where stamp == cur (upper bounds of real path costs)."""
    stamp[src] = cur
    dist[src] = 0.0
    hop[src] = 0
    size = heap_push(hk, hv, hpos, 0, src, 0.0)
    settled = 0
    while size > 0:
        v, d, size = heap_pop(hk, hv, hpos, size)
        if d > bound:
            break
        if tmark[v] == cur:
            ntargets -= 1
            if ntargets <= 0:
                break
        settled += 1
        st[2] += 1
        if settled > limit:
            break
        if hop[v] >= maxhops:
            continue
        h1 = hop[v] + 1
        b = oS[v]
        for k in range(b, b + oL[v]):
            x = oI[k, 0]
            if x == skip:
                continue
            nd = d + oF[k, 0]
            if nd > bound:
                continue
            if stamp[x] != cur:
                stamp[x] = cur
                dist[x] = nd
                hop[x] = h1
                size = heap_push(hk, hv, hpos, size, x, nd)
            elif hpos[x] >= 0 and nd < dist[x]:
                dist[x] = nd
                hop[x] = h1
                heap_decrease(hk, hv, hpos, x, nd)
    return size


@numba.njit(cache=True, nogil=True)
def _simulate(v, oS, oL, oI, oF, iS, iL, iI, iF, level, limit, maxhops, hop, tmark, dist, stamp, ctr, hk, hv, hpos,
              st):
    """Priority of v: level + added/removed arcs + added/removed hops."""
    st[0] += 1
    nin = iL[v]
    nout = oL[v]
    removed = nin + nout
    if removed == 0:
        return float(level[v])
    removed_hops = 0
    maxout = 0.0
    for k in range(oS[v], oS[v] + nout):
        removed_hops += oI[k, 4]
        if oF[k, 0] > maxout:
            maxout = oF[k, 0]
    for k in range(iS[v], iS[v] + nin):
        removed_hops += iI[k, 4]
    added = 0
    added_hops = 0
    if nout > 0:
        for ka in range(iS[v], iS[v] + nin):
            a = iI[ka, 0]
            wa = iF[ka, 0]
            ctr[0] += 1
            cur = ctr[0]
            nt = 0
            for kb in range(oS[v], oS[v] + nout):
                b = oI[kb, 0]
                if b != a and tmark[b] != cur:
                    tmark[b] = cur
                    nt += 1
            if nt == 0:
                continue
            st[1] += 1
            _witness(oS, oL, oI, oF, a, v, wa + maxout, limit, maxhops, hop, nt, tmark, dist, stamp, cur, hk, hv, hpos,
                     st)
            for kb in range(oS[v], oS[v] + nout):
                b = oI[kb, 0]
                if b == a:
                    continue
                via = wa + oF[kb, 0]
                if stamp[b] == cur and dist[b] <= via:
                    continue
                added += 1
                added_hops += iI[ka, 4] + oI[kb, 4]
    return level[v] + added / removed + added_hops / max(removed_hops, 1)


@numba.njit(cache=True, nogil=True)
def _grow_out(UI, UF, cnt):
    if cnt < UI.shape[0]:
        return UI, UF
    size = 2 * UI.shape[0] + 16
    UI2 = np.empty((size, 4), np.int64)
    UF2 = np.empty((size, 2), np.float64)
    UI2[:cnt] = UI[:cnt]
    UF2[:cnt] = UF[:cnt]
    return UI2, UF2


@numba.njit(cache=True, nogil=True)
def _contract_kernel(n, offsets, targets, weights, secondary, sim_limit, limit, update_nbrs, sim_hops, hops_limit):
    m = targets.shape[0]
    # pools: out lists and in lists
    P = 2 * m + 8 * n + 16
    oS = np.zeros(n, np.int64)
    oL = np.zeros(n, np.int64)
    oC = np.zeros(n, np.int64)
    oI = np.empty((P, _I_COLS), np.int64)
    oF = np.empty((P, 2), np.float64)
    otop = 0
    iS = np.zeros(n, np.int64)
    iL = np.zeros(n, np.int64)
    iC = np.zeros(n, np.int64)
    iI = np.empty((P, _I_COLS), np.int64)
    iF = np.empty((P, 2), np.float64)
    itop = 0
    # pre-size lists by degree to avoid early relocations
    outdeg = np.zeros(n, np.int64)
    indeg = np.zeros(n, np.int64)
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            x = targets[k]
            if x != u:
                outdeg[u] += 1
                indeg[x] += 1
    for u in range(n):
        oS[u] = otop
        oC[u] = outdeg[u] + 2
        otop += oC[u]
        iS[u] = itop
        iC[u] = indeg[u] + 2
        itop += iC[u]
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            x = targets[k]
            if x == u:
                continue
            oI, oF, otop = _adj_set(oS, oL, oC, oI, oF, otop, u, x, weights[k], secondary[k], -1, -1, -1, 1)
            iI, iF, itop = _adj_set(iS, iL, iC, iI, iF, itop, x, u, weights[k], secondary[k], -1, -1, -1, 1)

    level = np.zeros(n, np.int64)
    tmark = np.zeros(n, np.int64)
    dist = np.zeros(n, np.float64)
    hop = np.zeros(n, np.int64)
    stamp = np.zeros(n, np.int64)
    ctr = np.zeros(1, np.int64)
    st = np.zeros(5, np.int64)  # simulations, their witness searches, settled (all), -, contraction searches
    whk = np.empty(n, np.float64)
    whv = np.empty(n, np.int32)
    whpos = np.full(n, -1, np.int64)
    # node order heap
    qk = np.empty(n, np.float64)
    qv = np.empty(n, np.int32)
    qpos = np.full(n, -1, np.int64)
    qsize = 0
    for v in range(n):
        p = _simulate(v, oS, oL, oI, oF, iS, iL, iI, iF, level, sim_limit, sim_hops, hop, tmark, dist, stamp, ctr, whk, whv,
                          whpos, st)
        qsize = heap_push(qk, qv, qpos, qsize, v, p)

    rank = np.full(n, -1, np.int64)
    order = np.empty(n, np.int64)
    up_off = np.zeros(n + 1, np.int64)
    dn_off = np.zeros(n + 1, np.int64)
    UI = np.empty((m + 16, 4), np.int64)  # tgt, mid, c1, c2 (original ids)
    UF = np.empty((m + 16, 2), np.float64)
    DI = np.empty((m + 16, 4), np.int64)
    DF = np.empty((m + 16, 2), np.float64)
    nu = 0
    nd = 0
    r = 0
    nbr_seen = np.full(n, -1, np.int64)
    while qsize > 0:
        v = qv[0]
        p = _simulate(v, oS, oL, oI, oF, iS, iL, iI, iF, level, sim_limit, sim_hops, hop, tmark, dist, stamp, ctr, whk, whv,
                          whpos, st)
        if p > qk[0]:
            heap_update(qk, qv, qpos, qsize, v, p)
            if qv[0] != v:
                continue
        v, _, qsize = heap_pop(qk, qv, qpos, qsize)
        rank[v] = r
        order[r] = v
        # emit v's remaining arcs: all neighbours are uncontracted, hence higher
        up_base = nu
        for k in range(oS[v], oS[v] + oL[v]):
            UI, UF = _grow_out(UI, UF, nu)
            UI[nu, 0] = oI[k, 0]
            UI[nu, 1] = oI[k, 1]
            UI[nu, 2] = oI[k, 2]
            UI[nu, 3] = oI[k, 3]
            UF[nu, 0] = oF[k, 0]
            UF[nu, 1] = oF[k, 1]
            nu += 1
        dn_base = nd
        for k in range(iS[v], iS[v] + iL[v]):
            DI, DF = _grow_out(DI, DF, nd)
            DI[nd, 0] = iI[k, 0]
            DI[nd, 1] = iI[k, 1]
            DI[nd, 2] = iI[k, 2]
            DI[nd, 3] = iI[k, 3]
            DF[nd, 0] = iF[k, 0]
            DF[nd, 1] = iF[k, 1]
            nd += 1
        up_off[r + 1] = nu
        dn_off[r + 1] = nd
        r += 1
        # detach v from its neighbours
        for k in range(oS[v], oS[v] + oL[v]):
            _adj_remove(iS, iL, iI, iF, oI[k, 0], v)
        for k in range(iS[v], iS[v] + iL[v]):
            _adj_remove(oS, oL, oI, oF, iI[k, 0], v)
        # shortcuts
        nout = oL[v]
        if nout > 0:
            maxout = 0.0
            for k in range(oS[v], oS[v] + nout):
                if oF[k, 0] > maxout:
                    maxout = oF[k, 0]
            for ia in range(iL[v]):
                ka = iS[v] + ia
                a = iI[ka, 0]
                wa = iF[ka, 0]
                ctr[0] += 1
                cur = ctr[0]
                nt = 0
                for kb in range(oS[v], oS[v] + nout):
                    b = oI[kb, 0]
                    if b != a and tmark[b] != cur:
                        tmark[b] = cur
                        nt += 1
                if nt == 0:
                    continue
                st[4] += 1
                _witness(oS, oL, oI, oF, a, v, wa + maxout, limit, hops_limit, hop, nt, tmark, dist, stamp, cur, whk,
                         whv, whpos, st)
                for ib in range(nout):
                    kb = oS[v] + ib
                    b = oI[kb, 0]
                    if b == a:
                        continue
                    via = wa + oF[kb, 0]
                    if stamp[b] == cur and dist[b] <= via:
                        continue
                    sv = iF[ka, 1] + oF[kb, 1]
                    hops = iI[ka, 4] + oI[kb, 4]
                    oI, oF, otop = _adj_set(oS, oL, oC, oI, oF, otop, a, b, via, sv, v, dn_base + ia, up_base + ib, hops)
                    iI, iF, itop = _adj_set(iS, iL, iC, iI, iF, itop, b, a, via, sv, v, dn_base + ia, up_base + ib, hops)
        # neighbours: level and priority
        for k in range(oS[v], oS[v] + oL[v]):
            x = oI[k, 0]
            if nbr_seen[x] != v:
                nbr_seen[x] = v
                if level[x] < level[v] + 1:
                    level[x] = level[v] + 1
        for k in range(iS[v], iS[v] + iL[v]):
            x = iI[k, 0]
            if nbr_seen[x] != v:
                nbr_seen[x] = v
                if level[x] < level[v] + 1:
                    level[x] = level[v] + 1
        for k in range(oS[v], oS[v] + oL[v]):
            x = oI[k, 0]
            if update_nbrs and nbr_seen[x] == v:
                nbr_seen[x] = n + v  # visited once
                p = _simulate(x, oS, oL, oI, oF, iS, iL, iI, iF, level, sim_limit, sim_hops, hop, tmark, dist, stamp, ctr, whk, whv,
                          whpos, st)
                heap_update(qk, qv, qpos, qsize, x, p)
        for k in range(iS[v], iS[v] + iL[v]):
            x = iI[k, 0]
            if update_nbrs and nbr_seen[x] == v:
                nbr_seen[x] = n + v
                p = _simulate(x, oS, oL, oI, oF, iS, iL, iI, iF, level, sim_limit, sim_hops, hop, tmark, dist, stamp, ctr, whk, whv,
                          whpos, st)
                heap_update(qk, qv, qpos, qsize, x, p)
        oL[v] = 0
        iL[v] = 0
    return rank, order, up_off, UI[:nu].copy(), UF[:nu].copy(), dn_off, DI[:nd].copy(), DF[:nd].copy(), st


@numba.njit(cache=True, nogil=True)
def _finish(n, rank, up_off, UI, dn_off, DI):
    """Convert neighbour ids to ranks and fill the row arrays."""
    nu = UI.shape[0]
    nd = DI.shape[0]
    up_tgt = np.empty(nu, np.int32)
    up_row = np.empty(nu, np.int32)
    dn_tgt = np.empty(nd, np.int32)
    dn_row = np.empty(nd, np.int32)
    for r in range(n):
        for k in range(up_off[r], up_off[r + 1]):
            up_tgt[k] = rank[UI[k, 0]]
            up_row[k] = r
        for k in range(dn_off[r], dn_off[r + 1]):
            dn_tgt[k] = rank[DI[k, 0]]
            dn_row[k] = r
    return up_tgt, up_row, dn_tgt, dn_row


# ---------------------------------------------------------------------------------------------------
# queries (rank space)
# ---------------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _stalled(v, d, s_off, s_tgt, s_w, ostamp_dir, odist_dir, cur):
    """Stall-on-demand: v is reached suboptimally if a higher vertex x with arc x->v (in the search's
    own direction) has label + weight < d."""
    for k in range(s_off[v], s_off[v + 1]):
        x = s_tgt[k]
        if ostamp_dir[x] == cur and odist_dir[x] + s_w[k] < d:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def _relax(v, d, sv, a_off, a_tgt, a_w, a_s, dist, sec, par, stamp, cur, hk, hv, hpos, size):
    for k in range(a_off[v], a_off[v + 1]):
        x = a_tgt[k]
        nd = d + a_w[k]
        if stamp[x] != cur:
            stamp[x] = cur
            dist[x] = nd
            sec[x] = sv + a_s[k]
            par[x] = k
            size = heap_push(hk, hv, hpos, size, x, nd)
        elif hpos[x] >= 0 and nd < dist[x]:
            dist[x] = nd
            sec[x] = sv + a_s[k]
            par[x] = k
            heap_decrease(hk, hv, hpos, x, nd)
    return size


@numba.njit(cache=True, nogil=True)
def _p2p(up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s,
         src, soff, soff2, tgt, toff, toff2, force_loop,
         fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk, bhv, bhp, ctr):
    """Bidirectional CH search. Returns (best primary, best secondary, meeting vertex or -1)."""
    ctr[0] += 1
    cur = ctr[0]
    fsize = init_labels(src, soff, soff2, fd, fs, fp, fst, cur, fhk, fhv, fhp)
    bsize = init_labels(tgt, toff, toff2, bd, bs, bp, bst, cur, bhk, bhv, bhp)
    min_s = INF
    for i in range(soff.shape[0]):
        if soff[i] < min_s:
            min_s = soff[i]
    min_t = INF
    for i in range(toff.shape[0]):
        if toff[i] < min_t:
            min_t = toff[i]
    best = INF
    best2 = INF
    mv = -1
    fdone = fsize == 0
    bdone = bsize == 0
    while not (fdone and bdone):
        forward = (not fdone) and (bdone or fhk[0] <= bhk[0])
        if forward:
            v, d, fsize = heap_pop(fhk, fhv, fhp, fsize)
            if fsize == 0:
                fdone = True
            if d + min_t >= best:
                fdone = True
                continue
            if bst[v] == cur:
                if not (force_loop and fp[v] == -1 and bp[v] == -1):
                    c = d + bd[v]
                    if c < best:
                        best = c
                        best2 = fs[v] + bs[v]
                        mv = v
            if _stalled(v, d, dn_off, dn_tgt, dn_w, fst, fd, cur):
                continue
            fsize = _relax(v, d, fs[v], up_off, up_tgt, up_w, up_s, fd, fs, fp, fst, cur, fhk, fhv, fhp, fsize)
            if fsize > 0:
                fdone = False
        else:
            v, d, bsize = heap_pop(bhk, bhv, bhp, bsize)
            if bsize == 0:
                bdone = True
            if d + min_s >= best:
                bdone = True
                continue
            if fst[v] == cur:
                if not (force_loop and fp[v] == -1 and bp[v] == -1):
                    c = d + fd[v]
                    if c < best:
                        best = c
                        best2 = fs[v] + bs[v]
                        mv = v
            if _stalled(v, d, up_off, up_tgt, up_w, bst, bd, cur):
                continue
            bsize = _relax(v, d, bs[v], dn_off, dn_tgt, dn_w, dn_s, bd, bs, bp, bst, cur, bhk, bhv, bhp, bsize)
            if bsize > 0:
                bdone = False
    return best, best2, mv


@numba.njit(cache=True, nogil=True)
def _p2p_pairs(up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sv, so, so2, sptr, tv, to, to2, tptr,
               fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk, bhv, bhp, ctr):
    """Point-to-point for k paired locations in one call: pair i is source location i -> target i."""
    k = sptr.shape[0] - 1
    P = np.full(k, INF)
    S = np.full(k, INF)
    for i in range(k):
        a, b = sptr[i], sptr[i + 1]
        c, d = tptr[i], tptr[i + 1]
        if a == b or c == d:
            continue
        best, best2, mv = _p2p(up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sv[a:b], so[a:b], so2[a:b],
                               tv[c:d], to[c:d], to2[c:d], False, fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk,
                               bhv, bhp, ctr)
        if mv >= 0:
            P[i] = best
            S[i] = best2
    return P, S


@numba.njit(cache=True, nogil=True)
def _unpack_arc(is_up, e, up_tgt, up_mid, up_c1, up_c2, dn_row, dn_mid, dn_c1, dn_c2, order, out, cnt, stack):
    """Append the original vertices after the tail of arc e (up arc if is_up else dn arc) to out."""
    sp = 0
    stack[sp] = e if is_up else -(e + 1)
    sp += 1
    while sp > 0:
        sp -= 1
        code = stack[sp]
        if code >= 0:
            mid = up_mid[code]
            c1 = up_c1[code]
            c2 = up_c2[code]
            head = up_tgt[code]
        else:
            k = -code - 1
            mid = dn_mid[k]
            c1 = dn_c1[k]
            c2 = dn_c2[k]
            head = dn_row[k]
        if mid < 0:
            out[cnt] = order[head]
            cnt += 1
        else:
            stack[sp] = c2  # up arc mid->head, done second
            sp += 1
            stack[sp] = -(c1 + 1)  # dn arc tail->mid, done first
            sp += 1
    return cnt


@numba.njit(cache=True, nogil=True)
def _path(mv, fp, bp, up_row, up_tgt, up_mid, up_c1, up_c2, up_hops, dn_row, dn_tgt, dn_mid, dn_c1, dn_c2,
          dn_hops, order):
    """Unpacked original-vertex path through meeting vertex mv; also the source and target ranks."""
    # forward chain, from mv down to the source
    nf = 0
    v = mv
    total = 1
    while fp[v] != -1:
        e = fp[v]
        total += up_hops[e]
        nf += 1
        v = up_row[e]
    srank = v
    nb = 0
    v = mv
    while bp[v] != -1:
        e = bp[v]
        total += dn_hops[e]
        nb += 1
        v = dn_row[e]
    trank = v
    fchain = np.empty(nf, np.int64)
    v = mv
    i = nf - 1
    while fp[v] != -1:
        e = fp[v]
        fchain[i] = e
        i -= 1
        v = up_row[e]
    out = np.empty(total, np.int64)
    stack = np.empty(total * 2 + 4, np.int64)
    out[0] = order[srank]
    cnt = 1
    for i in range(nf):
        cnt = _unpack_arc(True, fchain[i], up_tgt, up_mid, up_c1, up_c2, dn_row, dn_mid, dn_c1, dn_c2, order, out,
                          cnt, stack)
    v = mv
    while bp[v] != -1:
        e = bp[v]
        # dn arc e is stored at row dn_row[e] listing dn_tgt[e] = v: it stands for v -> dn_row[e], so its
        # unpacking starts after v and ends at dn_row[e]
        cnt = _unpack_arc(False, e, up_tgt, up_mid, up_c1, up_c2, dn_row, dn_mid, dn_c1, dn_c2, order, out, cnt,
                          stack)
        v = dn_row[e]
    return out[:cnt], srank, trank


@numba.njit(cache=True, nogil=True)
def _pick_kernel(ranks, offs, r, label):
    """Index of the candidate at rank r whose offset is nearest the final label (the first such), or -1."""
    best, bestd = -1, INF
    for i in range(ranks.shape[0]):
        if ranks[i] == r:
            d = abs(offs[i] - label)
            if best < 0 or d < bestd:
                best, bestd = i, d
    return best


@numba.njit(cache=True, nogil=True)
def query_ranks(n, rank, sv, tv):
    """(status, source ranks, target ranks) of a query's candidate vertices; status -1: a source out of
    range, -2: a target out of range, 1: fine."""
    sr = np.empty(sv.shape[0], np.int64)
    tr = np.empty(tv.shape[0], np.int64)
    for i in range(sv.shape[0]):
        if sv[i] < 0 or sv[i] >= n:
            return -1, sr, tr
        sr[i] = rank[sv[i]]
    for i in range(tv.shape[0]):
        if tv[i] < 0 or tv[i] >= n:
            return -2, sr, tr
        tr[i] = rank[tv[i]]
    return 1, sr, tr


@numba.njit(cache=True, nogil=True)
def query_result(best, best2, mv, want_path, sr, so, tr, to, fd, fp, bd, bp, order, up_row, up_tgt, up_mid, up_c1,
                  up_c2, up_hops, dn_row, dn_tgt, dn_mid, dn_c1, dn_c2, dn_hops):
    """What a query returns once its search met at mv (or not: mv < 0): (status 0 or 1, primary,
    secondary, unpacked path, source index, target index)."""
    empty = np.empty(0, np.int64)
    if mv < 0:
        return 0, INF, INF, empty, -1, -1
    if not want_path:
        return 1, best, best2, empty, -1, -1
    p, srank, trank = _path(mv, fp, bp, up_row, up_tgt, up_mid, up_c1, up_c2, up_hops, dn_row, dn_tgt, dn_mid,
                            dn_c1, dn_c2, dn_hops, order)
    return 1, best, best2, p, _pick_kernel(sr, so, srank, fd[srank]), _pick_kernel(tr, to, trank, bd[trank])


@numba.njit(cache=True, nogil=True)
def _query_kernel(n, rank, order, up_off, up_tgt, up_w, up_s, up_row, up_mid, up_c1, up_c2, up_hops,
                  dn_off, dn_tgt, dn_w, dn_s, dn_row, dn_mid, dn_c1, dn_c2, dn_hops,
                  sv, so, so2, tv, to, to2, want_path,
                  fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk, bhv, bhp, ctr):
    """`query` without force_loop in one call: ranks, the bidirectional search, the unpacked path and the
    candidates used. Returns (status, primary, secondary, path, source index, target index); status -1:
    a source vertex out of range, -2: a target out of range, 0: no path, 1: found."""
    status, sr, tr = query_ranks(n, rank, sv, tv)
    if status < 0:
        return status, INF, INF, np.empty(0, np.int64), -1, -1
    best, best2, mv = _p2p(up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s, sr, so, so2, tr, to, to2, False,
                           fd, fs, fp, fst, fhk, fhv, fhp, bd, bs, bp, bst, bhk, bhv, bhp, ctr)
    return query_result(best, best2, mv, want_path, sr, so, tr, to, fd, fp, bd, bp, order, up_row, up_tgt, up_mid,
                         up_c1, up_c2, up_hops, dn_row, dn_tgt, dn_mid, dn_c1, dn_c2, dn_hops)


@numba.njit(cache=True, nogil=True)
def _hops(up_off, up_mid, up_c1, up_c2, dn_off, dn_mid, dn_c1, dn_c2):
    """Number of original arcs behind each up and dn arc."""
    nu = up_mid.shape[0]
    nd = dn_mid.shape[0]
    up_h = np.ones(nu, np.int64)
    dn_h = np.ones(nd, np.int64)
    # arcs are emitted in contraction order; a shortcut's children belong to its middle vertex, which was
    # contracted before the shortcut was emitted, so children ids precede the parent's emission. Walk
    # both arrays in emission order by rank.
    n = up_off.shape[0] - 1
    for r in range(n):
        for k in range(up_off[r], up_off[r + 1]):
            if up_mid[k] >= 0:
                up_h[k] = dn_h[up_c1[k]] + up_h[up_c2[k]]
        for k in range(dn_off[r], dn_off[r + 1]):
            if dn_mid[k] >= 0:
                dn_h[k] = dn_h[dn_c1[k]] + up_h[dn_c2[k]]
    return up_h, dn_h


# ---------------------------------------------------------------------------------------------------
# many-to-many with buckets
# ---------------------------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _upward_space(vs, off, off2, a_off, a_tgt, a_w, a_s, s_off, s_tgt, s_w, dist, sec, par, stamp, ctr, hk, hv,
                  hpos, out_v, out_d, out_s, cnt):
    """Full upward search with stall-on-demand; appends unstalled settled (v, d, s) to out arrays."""
    ctr[0] += 1
    cur = ctr[0]
    size = init_labels(vs, off, off2, dist, sec, par, stamp, cur, hk, hv, hpos)
    while size > 0:
        v, d, size = heap_pop(hk, hv, hpos, size)
        if _stalled(v, d, s_off, s_tgt, s_w, stamp, dist, cur):
            continue
        if cnt >= out_v.shape[0]:
            nsz = 2 * out_v.shape[0] + 64
            o1 = np.empty(nsz, np.int32)
            o2 = np.empty(nsz, np.float64)
            o3 = np.empty(nsz, np.float64)
            o1[:cnt] = out_v[:cnt]
            o2[:cnt] = out_d[:cnt]
            o3[:cnt] = out_s[:cnt]
            out_v, out_d, out_s = o1, o2, o3
        out_v[cnt] = v
        out_d[cnt] = d
        out_s[cnt] = sec[v]
        cnt += 1
        size = _relax(v, d, sec[v], a_off, a_tgt, a_w, a_s, dist, sec, par, stamp, cur, hk, hv, hpos, size)
    return out_v, out_d, out_s, cnt


@numba.njit(cache=True, nogil=True)
def _table(n, up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w, dn_s,
           sv, so, so2, sptr, tv, to, to2, tptr,
           dist, sec, par, stamp, ctr, hk, hv, hpos):
    ns = sptr.shape[0] - 1
    nt = tptr.shape[0] - 1
    D = np.full((ns, nt), INF)
    S = np.full((ns, nt), INF)
    # backward spaces of the targets -> buckets
    bv = np.empty(1024, np.int32)
    bd = np.empty(1024, np.float64)
    bs = np.empty(1024, np.float64)
    bj = np.empty(1024, np.int32)
    cnt = 0
    for j in range(nt):
        a = tptr[j]
        b = tptr[j + 1]
        if b == a:
            continue
        start = cnt
        bv, bd, bs, cnt = _upward_space(tv[a:b], to[a:b], to2[a:b], dn_off, dn_tgt, dn_w, dn_s, up_off, up_tgt, up_w,
                                        dist, sec, par, stamp, ctr, hk, hv, hpos, bv, bd, bs, cnt)
        if bj.shape[0] < bv.shape[0]:
            nb = np.empty(bv.shape[0], np.int32)
            nb[:start] = bj[:start]
            bj = nb
        for k in range(start, cnt):
            bj[k] = j
    # counting sort of bucket entries by vertex
    boff = np.zeros(n + 1, np.int64)
    for k in range(cnt):
        boff[bv[k] + 1] += 1
    for r in range(n):
        boff[r + 1] += boff[r]
    fill = boff[:n].copy()
    ej = np.empty(cnt, np.int32)
    ed = np.empty(cnt, np.float64)
    es = np.empty(cnt, np.float64)
    for k in range(cnt):
        p = fill[bv[k]]
        fill[bv[k]] += 1
        ej[p] = bj[k]
        ed[p] = bd[k]
        es[p] = bs[k]
    # forward searches scan the buckets
    fv = np.empty(1024, np.int32)
    fdd = np.empty(1024, np.float64)
    fss = np.empty(1024, np.float64)
    for i in range(ns):
        a = sptr[i]
        b = sptr[i + 1]
        if b == a:
            continue
        fv, fdd, fss, fc = _upward_space(sv[a:b], so[a:b], so2[a:b], up_off, up_tgt, up_w, up_s, dn_off, dn_tgt, dn_w,
                                         dist, sec, par, stamp, ctr, hk, hv, hpos, fv, fdd, fss, 0)
        for q in range(fc):
            v = fv[q]
            d = fdd[q]
            s2 = fss[q]
            for k in range(boff[v], boff[v + 1]):
                c = d + ed[k]
                j = ej[k]
                if c < D[i, j]:
                    D[i, j] = c
                    S[i, j] = s2 + es[k]
    return D, S


# ---------------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------------

#: the arrays of a hierarchy (one .npy each in its folder)
ARRAYS = (
    "rank", "order",
    "up_off", "up_tgt", "up_w", "up_s", "up_mid", "up_c1", "up_c2", "up_row", "up_hops",
    "dn_off", "dn_tgt", "dn_w", "dn_s", "dn_mid", "dn_c1", "dn_c2", "dn_row", "dn_hops",
)


class Locations(NamedTuple):
    """Many locations' candidates in flat arrays: location i's candidates are `vertices[ptr[i]:ptr[i + 1]]`
    (int64), each with the primary and secondary cost already spent to reach it from the location
    (`offsets`, `offsets2`: float64). What `table` and `pairs` take; `flatten_locations` makes one from
    a list of locations. A plain 4-tuple too: `v, o, o2, ptr = locations`."""

    vertices: np.ndarray
    offsets: np.ndarray
    offsets2: np.ndarray
    ptr: np.ndarray


def _side(n: int) -> tuple:
    return (np.zeros(n), np.zeros(n), np.full(n, -1, np.int64), np.zeros(n, np.int64), np.empty(max(n, 1)),
            np.empty(max(n, 1), np.int32), np.full(n, -1, np.int64))


class Workspace:
    """One thread's search state over a graph of `n` vertices, reused by every search of that thread:
    `forward` and `backward`, each side's labels as the kernels take them (primary, secondary, parent
    arc, stamp, heap keys, heap vertices, heap positions); `counter` (int64[1], the current search's
    stamp, so labels are never reset); `tree`, the elimination-tree walk's two vertex lists (made when
    first used). A hierarchy hands each thread its own (`ContractionHierarchy.workspace()`)."""

    __slots__ = ("n", "forward", "backward", "counter", "_tree")

    def __init__(self, n: int):
        self.n = int(n)
        self.forward = _side(self.n)
        self.backward = _side(self.n)
        self.counter = np.zeros(1, np.int64)
        self._tree = None

    @property
    def tree(self) -> tuple:
        if self._tree is None:
            self._tree = (np.empty(max(self.n, 1), np.int64), np.empty(max(self.n, 1), np.int64))
        return self._tree


def as_locations(vertices, offsets, offsets2, name):
    """Normalise one location: scalar or 1-D vertices with optional offsets."""
    v = np.atleast_1d(np.asarray(vertices, dtype=np.int64))
    if v.ndim != 1:
        raise ValueError(f"{name}: vertices must be a scalar or 1-D")
    o = np.zeros(v.shape[0]) if offsets is None else np.atleast_1d(np.asarray(offsets, dtype=np.float64))
    o2 = np.zeros(v.shape[0]) if offsets2 is None else np.atleast_1d(np.asarray(offsets2, dtype=np.float64))
    if o.shape != v.shape or o2.shape != v.shape:
        raise ValueError(f"{name}: offsets must have the shape of vertices")
    return v, o, o2


def flatten_locations(locs, n) -> Locations:
    """A list of locations -> `Locations` (flat vertices, offsets, secondary offsets, ptr int64[len+1]).

    Each location is an int vertex, a 1-D array of vertices, or a tuple (vertices, offsets) or
    (vertices, offsets, secondary offsets): candidate vertices with the cost already spent to reach
    them from the location.
    """
    vs, os_, o2s, ptr = [], [], [], [0]
    for i, loc in enumerate(locs):
        if isinstance(loc, tuple):
            v, o, o2 = as_locations(loc[0], loc[1] if len(loc) > 1 else None, loc[2] if len(loc) > 2 else None,
                                     f"location {i}")
        else:
            v, o, o2 = as_locations(loc, None, None, f"location {i}")
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError(f"location {i}: vertex out of range [0, {n})")
        vs.append(v)
        os_.append(o)
        o2s.append(o2)
        ptr.append(ptr[-1] + v.shape[0])
    if not vs:
        return Locations(np.empty(0, np.int64), np.empty(0), np.empty(0), np.zeros(1, np.int64))
    return Locations(np.concatenate(vs), np.concatenate(os_), np.concatenate(o2s), np.asarray(ptr, np.int64))


class PathResult:
    """Result of a point-to-point query: primary and secondary totals, the original-vertex path, and
    the index (into the given source/target candidate arrays) of the candidates the path uses."""

    __slots__ = ("primary", "secondary", "path", "source_index", "target_index")

    def __init__(self, primary, secondary, path, source_index, target_index):
        self.primary = primary
        self.secondary = secondary
        self.path = path
        self.source_index = source_index
        self.target_index = target_index

    @property
    def found(self) -> bool:
        return bool(np.isfinite(self.primary))

    def __repr__(self) -> str:
        return (f"PathResult(primary={self.primary!r}, secondary={self.secondary!r}, vertices={len(self.path)}, "
                f"source_index={self.source_index}, target_index={self.target_index})")


class ContractionHierarchy:
    """A contracted graph and its queries. Build with `ContractionHierarchy.build(...)` or load with
    `ContractionHierarchy.load(dir)`. Query methods take and return ORIGINAL vertex ids and are safe to
    call from several threads (each thread gets its own search workspace; the kernels release the GIL).
    """

    def __init__(self, n: int, arrays: dict[str, np.ndarray], info: dict | None = None):
        self.n = int(n)
        for name in ARRAYS:
            setattr(self, name, readonly(arrays[name]))
        self.info = dict(info or {})
        self._local = threading.local()

    # -- build -------------------------------------------------------------------------------------
    @classmethod
    def build(cls, n, offsets, targets, weights, secondary=None, *, witness_limit=100, sim_witness_limit=30,
              update_neighbours=False, sim_hops=8, witness_hops=64):
        """Contract the CSR graph.

        `witness_limit`/`witness_hops` cap the settled vertices and the arcs per path of a witness search
        when a vertex is contracted, `sim_witness_limit`/`sim_hops` the same while its priority is
        simulated (larger: fewer shortcuts, slower build; a search that stops early only adds a
        superfluous shortcut, never a wrong distance). `update_neighbours` re-simulates the neighbours of
        each contracted vertex (otherwise only the lazy re-evaluation of the queue's top corrects
        priorities)."""
        import time

        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        targets = np.ascontiguousarray(targets, dtype=np.int32)
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        secondary = (np.zeros_like(weights) if secondary is None
                     else np.ascontiguousarray(secondary, dtype=np.float64))
        n = int(n)
        if offsets.shape != (n + 1,) or offsets[0] != 0 or offsets[-1] != targets.shape[0]:
            raise ValueError("offsets must be int64[n+1] starting at 0 and ending at len(targets)")
        if weights.shape != targets.shape or secondary.shape != targets.shape:
            raise ValueError("weights and secondary must have the shape of targets")
        if targets.size and (targets.min() < 0 or targets.max() >= n):
            raise ValueError("targets out of range")
        if not (np.all(np.isfinite(weights)) and np.all(weights >= 0)):
            raise ValueError("weights must be finite and >= 0")
        t0 = time.perf_counter()
        rank, order, up_off, UI, UF, dn_off, DI, DF, st = _contract_kernel(
            n, offsets, targets, weights, secondary, sim_witness_limit, witness_limit, bool(update_neighbours),
            sim_hops, witness_hops)
        up_tgt, up_row, dn_tgt, dn_row = _finish(n, rank, up_off, UI, dn_off, DI)
        arrays = dict(
            rank=rank.astype(np.int32), order=order.astype(np.int32),
            up_off=up_off, up_tgt=up_tgt, up_w=np.ascontiguousarray(UF[:, 0]), up_s=np.ascontiguousarray(UF[:, 1]),
            up_mid=UI[:, 1].astype(np.int32), up_c1=UI[:, 2].astype(np.int32), up_c2=UI[:, 3].astype(np.int32),
            up_row=up_row,
            dn_off=dn_off, dn_tgt=dn_tgt, dn_w=np.ascontiguousarray(DF[:, 0]), dn_s=np.ascontiguousarray(DF[:, 1]),
            dn_mid=DI[:, 1].astype(np.int32), dn_c1=DI[:, 2].astype(np.int32), dn_c2=DI[:, 3].astype(np.int32),
            dn_row=dn_row,
        )
        up_h, dn_h = _hops(up_off, arrays["up_mid"], arrays["up_c1"], arrays["up_c2"], dn_off, arrays["dn_mid"],
                           arrays["dn_c1"], arrays["dn_c2"])
        arrays["up_hops"] = up_h.astype(np.int32)
        arrays["dn_hops"] = dn_h.astype(np.int32)
        info = {
            "vertices": n, "arcs": int(targets.shape[0]),
            "up_arcs": int(up_tgt.shape[0]), "dn_arcs": int(dn_tgt.shape[0]),
            "shortcuts": int((arrays["up_mid"] >= 0).sum() + (arrays["dn_mid"] >= 0).sum()),
            "build_seconds": round(time.perf_counter() - t0, 3),
            "witness_limit": witness_limit, "sim_witness_limit": sim_witness_limit,
            "simulations": int(st[0]), "witness_searches": int(st[1] + st[4]), "witness_settled": int(st[2]),
            "witness_hops": witness_hops, "sim_hops": sim_hops, "update_neighbours": bool(update_neighbours),
        }
        return cls(n, arrays, info)

    # -- storage -----------------------------------------------------------------------------------
    def save(self, directory) -> list[str]:
        """Write one .npy per array plus ch.json into `directory`; returns the file names written."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        names = []
        for name in ARRAYS:
            np.save(d / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
            names.append(f"{name}.npy")
        meta = {"format_version": FORMAT_VERSION, "n": self.n, "info": self.info}
        (d / "ch.json").write_text(json.dumps(meta, indent=1))
        names.append("ch.json")
        return names

    @classmethod
    def load(cls, directory, mmap: bool = True) -> ContractionHierarchy:
        d = Path(directory)
        meta = json.loads((d / "ch.json").read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{d}: contraction hierarchy format {meta.get('format_version')}, "
                             f"this code reads {FORMAT_VERSION}")
        mode = "r" if mmap else None
        arrays = {name: np.load(d / f"{name}.npy", mmap_mode=mode) for name in ARRAYS}
        return cls(meta["n"], arrays, meta.get("info"))

    # -- workspaces --------------------------------------------------------------------------------
    def workspace(self) -> Workspace:
        """This thread's `Workspace` for this hierarchy (made at its first search)."""
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = self._local.ws = Workspace(self.n)
        return ws

    def warmup(self) -> None:
        """Load every query kernel from Numba's cache now (about half a second once per process) instead
        of on the first request; safe to run in a background thread."""
        if self.n:
            self.query(0, 0, force_loop=False)
            self.query(0, 0, force_loop=True)
            self.table(np.array([0]), np.array([0]))

    # -- queries -----------------------------------------------------------------------------------
    def query(self, sources, targets, source_offsets=None, target_offsets=None, source_offsets2=None,
              target_offsets2=None, *, force_loop=False, path=True) -> PathResult:
        """Shortest path from any source candidate to any target candidate.

        Cost = min over (s, t) of source_offset[s] + d(s, t) + target_offset[t], with d(v, v) = 0: when a
        vertex is both a source and a target candidate the trivial path [v] costs the sum of the offsets.
        With `force_loop=True` that trivial meeting is excluded and a path with at least one arc is
        returned (use it when the target lies behind the source on the same directed edge). Offsets may
        be negative (e.g. minus the unused remainder of a target edge) as long as every path cost stays
        meaningful; the search stays exact because its stopping test adds the other side's minimum offset.
        Returns a `PathResult`; primary = inf and an empty path when no path exists.
        """
        sv, so, so2 = as_locations(sources, source_offsets, source_offsets2, "sources")
        tv, to, to2 = as_locations(targets, target_offsets, target_offsets2, "targets")
        ws = self.workspace()
        f, b, ctr = ws.forward, ws.backward, ws.counter
        if not force_loop:  # the common case: one kernel call from ranks to the unpacked path
            status, best, best2, p, si, ti = _query_kernel(
                self.n, self.rank, self.order, self.up_off, self.up_tgt, self.up_w, self.up_s, self.up_row,
                self.up_mid, self.up_c1, self.up_c2, self.up_hops, self.dn_off, self.dn_tgt, self.dn_w, self.dn_s,
                self.dn_row, self.dn_mid, self.dn_c1, self.dn_c2, self.dn_hops, sv, so, so2, tv, to, to2, bool(path),
                *f, *b, ctr)
            if status < 0:
                raise ValueError(f"{'sources' if status == -1 else 'targets'}: vertex out of range [0, {self.n})")
            return PathResult(float(best), float(best2), p, int(si), int(ti))
        for name, v in (("sources", sv), ("targets", tv)):
            if v.size and (v.min() < 0 or v.max() >= self.n):
                raise ValueError(f"{name}: vertex out of range [0, {self.n})")
        src_index = None
        if force_loop and np.intersect1d(sv, tv).size:
            # a loop must start with an arc: replace each source candidate that is also a target candidate
            # by its original out-arcs (the highest vertex of a loop may be the source itself, which an
            # upward search cannot leave and come back to)
            sv, so, so2, src_index, first = self._expand_loop_sources(sv, so, so2, tv)
        sr = self.rank[sv].astype(np.int64)
        tr = self.rank[tv].astype(np.int64)
        best, best2, mv = self._search(sr, so, so2, tr, to, to2, ws)
        if mv < 0:
            return PathResult(INF, INF, np.empty(0, np.int64), -1, -1)
        if not path:
            return PathResult(float(best), float(best2), np.empty(0, np.int64), -1, -1)
        p, srank, trank = _path(mv, f[2], b[2], self.up_row, self.up_tgt, self.up_mid, self.up_c1, self.up_c2,
                                self.up_hops, self.dn_row, self.dn_tgt, self.dn_mid, self.dn_c1, self.dn_c2,
                                self.dn_hops, self.order)
        si = _pick(sr, so, srank, f[0][srank])
        ti = _pick(tr, to, trank, b[0][trank])
        if src_index is not None:
            if first[si] >= 0:
                p = np.concatenate([[first[si]], p])
            si = int(src_index[si])
        return PathResult(float(best), float(best2), p, si, ti)

    def _expand_loop_sources(self, sv, so, so2, tv):
        """Source candidates that are also targets -> their out-neighbours with the arc's costs added.
        Returns (vertices, offsets, offsets2, original candidate index, prepended vertex or -1)."""
        if not hasattr(self, "_orig_out"):
            # original arcs (middle -1) by tail, in original ids: up arcs are stored by tail, dn arcs by head
            ou = self.up_mid < 0
            od = self.dn_mid < 0
            tail = np.concatenate([self.order[self.up_row[ou]], self.order[self.dn_tgt[od]]]).astype(np.int64)
            head = np.concatenate([self.order[self.up_tgt[ou]], self.order[self.dn_row[od]]]).astype(np.int64)
            w = np.concatenate([self.up_w[ou], self.dn_w[od]])
            s2 = np.concatenate([self.up_s[ou], self.dn_s[od]])
            o = np.argsort(tail, kind="stable")
            off = np.searchsorted(tail[o], np.arange(self.n + 1))
            self._orig_out = (off, head[o], w[o], s2[o])
        off, head, w, s2 = self._orig_out
        common = np.isin(sv, tv)
        vs, os_, o2s, idx, first = [], [], [], [], []
        for i in range(sv.shape[0]):
            if not common[i]:
                vs.append([sv[i]]), os_.append([so[i]]), o2s.append([so2[i]]), idx.append([i]), first.append([-1])
                continue
            a, b = off[sv[i]], off[sv[i] + 1]
            vs.append(head[a:b]), os_.append(so[i] + w[a:b]), o2s.append(so2[i] + s2[a:b])
            idx.append(np.full(b - a, i)), first.append(np.full(b - a, sv[i]))
        return (np.concatenate(vs).astype(np.int64), np.concatenate(os_).astype(float),
                np.concatenate(o2s).astype(float), np.concatenate(idx), np.concatenate(first))

    def pairs(self, sources, targets):
        """Batch point-to-point without paths: pair i goes from `sources[i]` to `targets[i]` (locations as
        in `table`, equal numbers). Returns (primary, secondary) float64 arrays, inf where no path; one
        kernel call, so a million pairs cost no Python loop."""
        sv, so, so2, sp = self.locations(sources)
        tv, to, to2, tp = self.locations(targets)
        if sp.shape[0] != tp.shape[0]:
            raise ValueError("sources and targets must have the same length")
        return self._pairs(self.rank[sv].astype(np.int64), so, so2, sp, self.rank[tv].astype(np.int64), to, to2, tp,
                           self.workspace())

    query_pairs = pairs

    def _search(self, sr, so, so2, tr, to, to2, ws):
        """(best primary, best secondary, meeting rank or -1) with the search labels left in the
        workspace's sides."""
        return _p2p(self.up_off, self.up_tgt, self.up_w, self.up_s, self.dn_off, self.dn_tgt, self.dn_w,
                    self.dn_s, sr, so, so2, tr, to, to2, False, *ws.forward, *ws.backward, ws.counter)

    def _pairs(self, sv, so, so2, sp, tv, to, to2, tp, ws):
        return _p2p_pairs(self.up_off, self.up_tgt, self.up_w, self.up_s, self.dn_off, self.dn_tgt, self.dn_w,
                          self.dn_s, sv, so, so2, sp, tv, to, to2, tp, *ws.forward, *ws.backward, ws.counter)

    def table(self, sources, targets):
        """Many-to-many: `sources` and `targets` are `Locations`, lists of locations (see
        `flatten_locations`), or 1-D int arrays of one vertex each. Returns (primary, secondary) float64
        matrices [len(sources), len(targets)], inf where no path. A vertex shared by a source and a
        target gives the offsets' sum (d(v, v) = 0), as in `query` without force_loop."""
        sv, so, so2, sp = self.locations(sources)
        tv, to, to2, tp = self.locations(targets)
        ws = self.workspace()
        b = ws.backward
        return _table(self.n, self.up_off, self.up_tgt, self.up_w, self.up_s, self.dn_off, self.dn_tgt, self.dn_w,
                      self.dn_s, self.rank[sv].astype(np.int64), so, so2, sp, self.rank[tv].astype(np.int64), to, to2,
                      tp, b[0], b[1], b[2], b[3], ws.counter, b[4], b[5], b[6])

    def locations(self, locs) -> Locations:
        """`Locations` of `locs` (`Locations`, a list of locations or a 1-D int array of one vertex each),
        its vertices checked against this hierarchy."""
        return checked_locations(locs, self.n)


def checked_locations(locs, n: int) -> Locations:
    """`Locations` of `locs` (`Locations`, a list of locations as `flatten_locations` takes, or a 1-D int
    array of one vertex each), with every vertex in [0, n) and the kernels' dtypes."""
    if isinstance(locs, Locations):
        v = np.ascontiguousarray(locs.vertices, dtype=np.int64)
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError(f"vertex out of range [0, {n})")
        return Locations(v, np.ascontiguousarray(locs.offsets, dtype=np.float64),
                         np.ascontiguousarray(locs.offsets2, dtype=np.float64),
                         np.ascontiguousarray(locs.ptr, dtype=np.int64))
    if isinstance(locs, np.ndarray) and locs.ndim == 1 and np.issubdtype(locs.dtype, np.integer):
        v = locs.astype(np.int64)
        if v.size and (v.min() < 0 or v.max() >= n):
            raise ValueError(f"vertex out of range [0, {n})")
        z = np.zeros(v.shape[0])
        return Locations(v, z, z.copy(), np.arange(v.shape[0] + 1, dtype=np.int64))
    return flatten_locations(list(locs), n)


def _pick(ranks, offs, r, label):
    """Index of the candidate at rank r whose offset produced the final label."""
    idx = np.nonzero(ranks == r)[0]
    if idx.size == 0:
        return -1
    return int(idx[np.argmin(np.abs(offs[idx] - label))])
