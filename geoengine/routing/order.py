"""Metric-independent contraction orders for customisable contraction hierarchies (cch.py).

`nested_dissection(n, offsets, targets, lon, lat)` orders the vertices of a directed CSR graph (arcs
are read as undirected edges) by recursive bisection: a part is cut by the straight line through the
median of its vertices' projection on one of four directions (0, 45, 90, 135 degrees), the direction
with the fewest cut edges wins, and the cut edges' endpoints on the side with fewer of them form the
vertex separator. A part takes a range of ranks: its separator the top of the range, its two sides
the ranges below (so a part's separator ranks above everything inside the part), parts of at most
`leaf` vertices their range in order. This is the geometric ("inertial") half of inertial flow, with
a max-flow refinement of the cut on the best two directions (see docs/routing-algorithms.md for the
measured effect and the comparison with KaHIP).

One Numba kernel over an explicit stack of parts held as slices of one permutation array. Since a
part's ranks are fixed by its place in the tree, parts are independent: below the top cut, threads cut
disjoint parts at once (the top cut alone is serial, about half of the time at a million vertices),
and the order is the same for any number of threads.
"""

from __future__ import annotations

import numba
import numpy as np

PARTS_PER_THREAD = 4  # parts cut serially from the top before the threads share them
PARALLEL_MIN_PART = 20_000  # smaller parts are not worth a thread
_DIRS = np.array([[1.0, 0.0], [0.70710678, 0.70710678], [0.0, 1.0], [-0.70710678, 0.70710678]])


def undirected(n: int, offsets, targets):
    """Symmetric CSR (offsets int64[n+1], neighbours int32, rows sorted) of a directed CSR graph, without
    self loops and duplicate edges. One kernel: both directions of each arc into one array, each row
    sorted and deduplicated in place (the sort of int64 keys it replaced held about 250 MB of
    temporaries at 2.8 M arcs)."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    targets = np.ascontiguousarray(targets)
    if targets.dtype != np.int32 and targets.dtype != np.int64:
        targets = targets.astype(np.int64)
    off, adj, m = _undirected(int(n), offsets, targets)
    return off, adj[:m].copy()


@numba.njit(cache=True, nogil=True)
def _undirected(n, offsets, targets):
    off = np.zeros(n + 1, np.int64)
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            v = targets[k]
            if v != u:
                off[u + 1] += 1
                off[v + 1] += 1
    for u in range(n):
        off[u + 1] += off[u]
    adj = np.empty(off[n], np.int32)
    fill = off[:-1].copy()
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            v = targets[k]
            if v != u:
                adj[fill[u]] = v
                fill[u] += 1
                adj[fill[v]] = u
                fill[v] += 1
    m = 0  # compact in place: a row's kept entries never pass its start
    for u in range(n):
        a = off[u]
        b = off[u + 1]
        adj[a:b].sort()
        off[u] = m
        for j in range(a, b):
            if j == a or adj[j] != adj[j - 1]:
                adj[m] = adj[j]
                m += 1
    off[n] = m
    return off, adj, m


@numba.njit(cache=True, nogil=True)
def lower_bound(a, lo, hi, x):
    """The first index in [lo, hi) of the sorted slice a[lo:hi] whose value is >= x (hi when none)."""
    while lo < hi:
        h = (lo + hi) >> 1
        if a[h] < x:
            lo = h + 1
        else:
            hi = h
    return lo


@numba.njit(cache=True, nogil=True)
def _reverse_slots(off, adj, rev):
    """rev[j]: the slot of edge (w, v) for slot j = (v, w) in a symmetric CSR with sorted rows."""
    n = off.shape[0] - 1
    for v in range(n):
        for j in range(off[v], off[v + 1]):
            w = adj[j]
            rev[j] = lower_bound(adj, off[w], off[w + 1], v)
    return rev


@numba.njit(cache=True, nogil=True)
def _flow_cut(verts, k, off, adj, rev, mark, stamp, tagbase, role, fint, fedge, seen, level, ptr, queue, cut):
    """Minimum vertex cut between the vertices with role 1 (sources) and role 2 (sinks) of one part
    (vertices `verts[:k]`, mark == stamp), by Dinic's blocking flows on the split graph: node 2v is v's
    in-node, 2v+1 its out-node, the arc between them has capacity 1, edges have infinite capacity;
    paths start at a source's in-node and end at a sink's out-node, so every path saturates at least one
    vertex and the flow is at most the number of sources. Each phase is one BFS from the sources over
    the residual graph (levels), then depth-first augmenting paths along rising levels, each arc tried
    once per phase. The cut is read from the last BFS, which reaches no sink: the minimum cut nearest
    the sources (the same for every maximum flow).
    Writes the cut to `cut`; returns (its size, the tag of the last BFS): `seen[2v+1] == tag` marks the
    source side. `level` and `ptr` (2n) are scratch."""
    path = np.empty(2 * k + 2, queue.dtype)
    pslot = np.empty(2 * k + 2, queue.dtype)
    phase = 0
    while True:
        phase += 1
        tag = tagbase * 1000003 + phase
        qh = 0
        qt = 0
        for i in range(k):
            v = verts[i]
            if role[v] == 1:
                node = 2 * v
                seen[node] = tag
                level[node] = 0
                queue[qt] = node
                qt += 1
        nsrc = qt
        reached = False
        while qh < qt:
            node = queue[qh]
            qh += 1
            v = node >> 1
            nl = level[node] + 1
            if node & 1:  # v out: edges to w in, or back into v in against v's own flow
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] != stamp:
                        continue
                    x = 2 * w
                    if seen[x] != tag:
                        seen[x] = tag
                        level[x] = nl
                        queue[qt] = x
                        qt += 1
                if fint[v] == 1:
                    x = 2 * v
                    if seen[x] != tag:
                        seen[x] = tag
                        level[x] = nl
                        queue[qt] = x
                        qt += 1
            else:  # v in: through v (capacity 1), or back to u out against flow on edge (u, v)
                if fint[v] == 0:
                    x = 2 * v + 1
                    if seen[x] != tag:
                        seen[x] = tag
                        level[x] = nl
                        if role[v] == 2:
                            reached = True  # a sink's out-node ends paths: not expanded
                        else:
                            queue[qt] = x
                            qt += 1
                for j in range(off[v], off[v + 1]):
                    u = adj[j]
                    if mark[u] != stamp or fedge[rev[j]] <= 0:
                        continue
                    x = 2 * u + 1
                    if seen[x] != tag:
                        seen[x] = tag
                        level[x] = nl
                        queue[qt] = x
                        qt += 1
        if not reached:
            break
        for i in range(qt):
            ptr[queue[i]] = 0
        # blocking flow: depth-first along rising levels from each source in turn
        for si in range(nsrc):
            s = queue[si]
            while True:
                depth = 0
                path[0] = s
                found = False
                while True:
                    x = path[depth]
                    v = x >> 1
                    if (x & 1) and role[v] == 2:
                        found = True
                        break
                    deg = off[v + 1] - off[v]
                    want = level[x] + 1
                    y = -1
                    sl = 0
                    while ptr[x] <= deg:
                        q = ptr[x]
                        if x & 1:
                            if q < deg:
                                j = off[v] + q
                                w = adj[j]
                                if mark[w] == stamp and seen[2 * w] == tag and level[2 * w] == want:
                                    y = 2 * w
                                    sl = j
                            elif fint[v] == 1 and seen[2 * v] == tag and level[2 * v] == want:
                                y = 2 * v
                                sl = -1
                        else:
                            if q == 0:
                                if fint[v] == 0 and seen[2 * v + 1] == tag and level[2 * v + 1] == want:
                                    y = 2 * v + 1
                                    sl = -1
                            else:
                                j = off[v] + q - 1
                                u = adj[j]
                                if (mark[u] == stamp and fedge[rev[j]] > 0 and seen[2 * u + 1] == tag
                                        and level[2 * u + 1] == want):
                                    y = 2 * u + 1
                                    sl = -(rev[j] + 2)
                        if y >= 0:
                            break
                        ptr[x] += 1
                    if y >= 0:
                        depth += 1
                        path[depth] = y
                        pslot[depth] = sl
                        continue
                    level[x] = -1  # a dead end for the rest of the phase
                    if depth == 0:
                        break
                    depth -= 1
                    ptr[path[depth]] += 1
                if not found:
                    break
                for i in range(depth, 0, -1):
                    x = path[i]
                    p = path[i - 1]
                    sl = pslot[i]
                    if sl >= 0:  # along edge slot sl (p out -> x in): its own arc of the split graph. The
                        # opposite arc (x's out -> p's in) joins other nodes: a flow on it is not cancelled
                        # here (that broke conservation at both ends and left orphan vertex flows, which
                        # the cut then counted)
                        fedge[sl] += 1
                    elif sl == -1:  # a vertex's own arc
                        if x == p + 1:
                            fint[x >> 1] = 1
                        else:
                            fint[x >> 1] = 0
                    else:
                        fedge[-sl - 2] -= 1
    c = 0
    for i in range(k):
        v = verts[i]
        if seen[2 * v] == tag and seen[2 * v + 1] != tag:
            cut[c] = v
            c += 1
    return c, tag


@numba.njit(cache=True, nogil=True)
def _grown(a, used):
    b = np.empty(2 * a.shape[0], a.dtype)
    b[:used] = a[:used]
    return b


@numba.njit(cache=True, nogil=True)
def _nd_kernel(off, adj, x, y, dirs, leaf, use_flow, share, flow_dirs, parts, perm, rank, stamp0, stamp_step,
               split_once, mark, side, best_side, sep, rev, role, fint, fedge, seen, pnode, pslot, queue, cut):
    """Nested dissection of `parts` (rows a, b, lo: the vertices perm[a:b], to take ranks lo..lo+b-a-1).
    A part's separator takes the top ranks of its range, its sides the ranges below, in order, so parts
    are independent: threads may run disjoint parts at once, sharing the vertex- and slot-indexed
    scratch arrays (mark .. pslot) as long as their stamps differ (stamp0 + i * stamp_step); `queue`
    and `cut` are positional and belong to one caller. With `split_once` each part is cut once and
    its two sides are returned (rows a, b, lo) instead of being cut in turn."""
    nparts = parts.shape[0]
    # the stack holds at most one part per level of the tree plus one: it grows when needed (sized for
    # every vertex it took 48 MB per thread at a million vertices; small at first, so that every real
    # order runs the growth)
    stack_a = np.empty(nparts + 8, np.int64)
    stack_b = np.empty(stack_a.shape[0], np.int64)
    stack_lo = np.empty(stack_a.shape[0], np.int64)
    kids = np.empty((2 * nparts if split_once else 0, 3), np.int64)
    nkids = 0
    sp = 0
    for i in range(nparts):
        stack_a[sp] = parts[i, 0]
        stack_b[sp] = parts[i, 1]
        stack_lo[sp] = parts[i, 2]
        sp += 1
    stamp = stamp0 - stamp_step
    nd = dirs.shape[0]
    while sp > 0:
        sp -= 1
        a = stack_a[sp]
        b = stack_b[sp]
        lo = stack_lo[sp]
        k = b - a
        if k <= 0:
            continue
        if k <= leaf:
            for i in range(a, b):
                rank[perm[i]] = lo + i - a
            continue
        stamp += stamp_step
        for i in range(a, b):
            mark[perm[i]] = stamp
        proj = np.empty(k)
        verts = perm[a:b]
        best_cut = -1
        gcut = np.empty(nd, np.int64)
        for d in range(nd):
            cx = dirs[d, 0]
            cy = dirs[d, 1]
            for i in range(k):
                v = verts[i]
                proj[i] = x[v] * cx + y[v] * cy
            med = np.partition(proj.copy(), k // 2)[k // 2]
            below = 0
            for i in range(k):
                if proj[i] < med:
                    below += 1
            # ties at the median are split by position so both sides get about half
            need = k // 2 - below
            for i in range(k):
                v = verts[i]
                if proj[i] < med:
                    side[v] = 0
                elif proj[i] == med and need > 0:
                    side[v] = 0
                    need -= 1
                else:
                    side[v] = 1
            cutn = 0
            for i in range(k):
                v = verts[i]
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and side[w] != side[v]:
                        cutn += 1
            gcut[d] = cutn
            if best_cut < 0 or cutn < best_cut:
                best_cut = cutn
                for i in range(k):
                    v = verts[i]
                    best_side[v] = side[v]
        if use_flow:
            # the max-flow cut on the directions whose plain median cut was smallest
            dorder = np.argsort(gcut)
            best_cut = -1
            for t in range(min(flow_dirs, nd)):
                d = dorder[t]
                cx = dirs[d, 0]
                cy = dirs[d, 1]
                for i in range(k):
                    v = verts[i]
                    proj[i] = x[v] * cx + y[v] * cy
                o = np.argsort(proj)
                q = max(1, int(k * share))
                for i in range(k):
                    v = verts[o[i]]
                    role[v] = 1 if i < q else (2 if i >= k - q else 0)
                    fint[v] = 0
                    for j in range(off[v], off[v + 1]):
                        fedge[j] = 0
                c, tag = _flow_cut(verts, k, off, adj, rev, mark, stamp, stamp * 8 + d, role, fint, fedge, seen,
                                   pnode, pslot, queue, cut)
                if best_cut < 0 or c < best_cut:
                    best_cut = c
                    for i in range(k):
                        v = verts[i]
                        sep[v] = False
                        best_side[v] = 0 if seen[2 * v + 1] == tag else 1
                    for i in range(c):
                        sep[cut[i]] = True
                for i in range(k):
                    role[verts[i]] = 0
        if not use_flow:
            # boundary vertices of each side; the smaller set is the separator
            nb0 = 0
            nb1 = 0
            for i in range(k):
                v = verts[i]
                for j in range(off[v], off[v + 1]):
                    w = adj[j]
                    if mark[w] == stamp and best_side[w] != best_side[v]:
                        if best_side[v] == 0:
                            nb0 += 1
                        else:
                            nb1 += 1
                        break
            sep_side = 0 if nb0 <= nb1 else 1
            for i in range(k):
                v = verts[i]
                sep[v] = False
                if best_side[v] == sep_side:
                    for j in range(off[v], off[v + 1]):
                        w = adj[j]
                        if mark[w] == stamp and best_side[w] != sep_side:
                            sep[v] = True
                            break
        nsep = 0
        for i in range(k):
            if sep[verts[i]]:
                nsep += 1
        if nsep == k:
            for i in range(a, b):
                rank[perm[i]] = lo + i - a
            continue
        top = lo + k  # the separator takes the part's top ranks, the first of it in perm order the highest
        for i in range(a, b):
            v = perm[i]
            if sep[v]:
                top -= 1
                rank[v] = top
        # reorder the slice: side 0, side 1 (separator vertices are ranked and leave the slice)
        tmp = np.empty(k, perm.dtype)
        c = 0
        for s in range(2):
            for i in range(a, b):
                v = perm[i]
                if not sep[v] and best_side[v] == s:
                    tmp[c] = v
                    c += 1
        n0 = 0
        for i in range(c):
            if best_side[tmp[i]] == 0:
                n0 += 1
        for i in range(c):
            perm[a + i] = tmp[i]
        if split_once:
            kids[nkids, 0] = a
            kids[nkids, 1] = a + n0
            kids[nkids, 2] = lo
            kids[nkids + 1, 0] = a + n0
            kids[nkids + 1, 1] = a + c
            kids[nkids + 1, 2] = lo + n0
            nkids += 2
            continue
        if sp + 2 > stack_a.shape[0]:
            stack_a = _grown(stack_a, sp)
            stack_b = _grown(stack_b, sp)
            stack_lo = _grown(stack_lo, sp)
        stack_a[sp] = a
        stack_b[sp] = a + n0
        stack_lo[sp] = lo
        sp += 1
        stack_a[sp] = a + n0
        stack_b[sp] = a + c
        stack_lo[sp] = lo + n0
        sp += 1
    return kids[:nkids]


def nested_dissection(n: int, offsets, targets, lon=None, lat=None, *, leaf: int = 2, seed: int = 0,
                      method: str = "flow", share: float = 0.25, flow_dirs: int = 2,
                      threads: int | None = None, symmetric: bool = False) -> np.ndarray:
    """Contraction order (int32[n]: rank of each vertex) by geometric nested dissection.

    `lon`, `lat`: a position per vertex (for a turn-expanded graph: the middle of the directed edge).
    Without positions the vertices get seeded random ones (any order gives correct CCH answers; only
    the search-space size depends on it). `threads` (default: Numba's thread count) cut disjoint parts
    at once below the top of the tree; the order is the same for any number. `symmetric`: (offsets,
    targets) is already the symmetric CSR of `undirected` (the topology reuses it for the supergraph)."""
    n = int(n)
    if lon is None or lat is None:
        rng = np.random.default_rng(seed)
        xs, ys = rng.random(n), rng.random(n)
    else:
        lat = np.asarray(lat, dtype=np.float64)
        xs = np.asarray(lon, dtype=np.float64) * np.cos(np.radians(np.nanmean(lat) if n else 0.0))
        ys = lat
    if method not in ("flow", "geometric"):
        raise ValueError("method must be 'flow' or 'geometric'")
    off, adj = (offsets, targets) if symmetric else undirected(n, offsets, targets)
    use_flow = method == "flow"
    xs, ys = np.ascontiguousarray(xs, dtype=np.float64), np.ascontiguousarray(ys, dtype=np.float64)
    leaf = int(max(leaf, 1))
    m = adj.shape[0]
    # ids, slots and flow-graph nodes in int32 while they fit, and the flow on an edge slot (0 or 1: each
    # vertex passes one unit) in int8 (the same cuts: only the storage differs); the stamps in `mark`
    # and the BFS tags in `seen` grow past 2^31 and stay int64
    vid = np.int32 if n < 2**31 else np.int64
    idx = np.int32 if max(2 * n, m) + 2 < 2**31 else np.int64
    perm = np.arange(n, dtype=vid)
    rank = np.full(n, -1, np.int32)
    rev = np.zeros(1, idx)
    if use_flow:
        rev = np.empty(m, idx)
        _reverse_slots(off, adj, rev)
    big = 2 * n if use_flow else 1
    shared = (np.zeros(n, np.int64), np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(n, np.bool_),
              rev, np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(m if use_flow else 1, np.int8),
              np.zeros(big, np.int64), np.zeros(big, idx), np.zeros(big, idx))

    def own():  # positional scratch: one per thread
        return np.zeros(big, idx), np.zeros(n, vid)

    def run(parts, stamp0, step, split_once, scratch):
        return _nd_kernel(off, adj, xs, ys, _DIRS, leaf, use_flow, float(share), int(flow_dirs),
                          np.asarray(parts, np.int64).reshape(-1, 3), perm, rank, stamp0, step, split_once,
                          *shared, *scratch)

    threads = max(1, int(threads or numba.get_num_threads()))
    if threads == 1:
        run([(0, n, 0)], 1, 1, False, own())
        return rank
    from concurrent.futures import ThreadPoolExecutor

    # The top of the tree level by level: the largest parts are cut once each, one per thread, until every
    # thread has several parts; then each thread takes a group of parts (biggest first to the least
    # loaded) and cuts them to the leaves. The order does not depend on the threads: each part is cut
    # the same way whoever cuts it, and takes the rank range its place in the tree gives it.
    scratch = [own() for _ in range(threads)]
    pending = [(0, n, 0)]
    stamp = 1
    with ThreadPoolExecutor(threads) as pool:
        while len(pending) < PARTS_PER_THREAD * threads:
            pending.sort(key=lambda p: p[1] - p[0])
            take = [p for p in pending[-threads:] if p[1] - p[0] >= PARALLEL_MIN_PART]
            if not take:
                break
            del pending[len(pending) - len(take):]
            futures = [pool.submit(run, [p], stamp + i, 1, True, scratch[i]) for i, p in enumerate(take)]
            stamp += len(take)
            for f in futures:
                pending.extend(tuple(r) for r in f.result().tolist())
        groups = [[] for _ in range(threads)]
        load = [0] * threads
        for p in sorted(pending, key=lambda p: p[0] - p[1]):
            t = load.index(min(load))
            groups[t].append(p)
            load[t] += p[1] - p[0]
        futures = [pool.submit(run, g, stamp + t, threads, False, scratch[t]) for t, g in enumerate(groups) if g]
        for f in futures:
            f.result()
    return rank
