"""Stop order: the best order in which to visit stops, given their cost matrix (the kernels of
POST /optimised_route; the service is geoengine.services.optimised_route).

The FIRST and the LAST location stay where they are (start and end of the tour; give the same place
twice for a round trip); the locations between them are reordered. Costs are travel times (seconds) from
the router's many-to-many matrix (the CH bucket table for default options), asymmetric as the roads are.

- Up to `EXACT_MAX` locations: exact Held-Karp dynamic programming over subsets (Numba), O(2^k k^2) for k
  intermediate stops.
- Above: iterated local search (Numba): start from the better of the given order and a nearest-neighbour
  order, descend with 2-opt (segment reversal; exact for asymmetric costs through prefix sums of forward
  and backward path costs) and Or-opt (moving runs of 1-3 stops, kept or reversed) to a local optimum,
  then perturb (double bridge) and descend again for a fixed number of rounds with a fixed seed, keeping
  the best. The result is never worse than the given order.

The kernels `held_karp(D)`, `local_search(D, order)` and `solve(D, order)` work on any square cost
matrix.
"""

from __future__ import annotations

import numba
import numpy as np

EXACT_MAX = 14  # locations (12 intermediate stops): 2^12 * 12^2 = 0.6 M steps
ILS_ROUNDS = 200
UNREACHABLE = 1e12  # stands for an infinite matrix cell inside the kernels


# -- kernels --------------------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def path_cost(D, order):
    s = 0.0
    for i in range(len(order) - 1):
        s += D[order[i], order[i + 1]]
    return s


@numba.njit(cache=True, nogil=True)
def held_karp(D):
    """Exact cheapest path 0 -> (all of 1..n-2 in some order) -> n-1 over the cost matrix D (n >= 2)."""
    n = D.shape[0]
    k = n - 2
    order = np.empty(n, dtype=np.int64)
    order[0] = 0
    order[n - 1] = n - 1
    if k == 0:
        return order
    full = (1 << k) - 1
    dp = np.full(((1 << k), k), np.inf)
    par = np.full(((1 << k), k), -1, dtype=np.int64)
    for j in range(k):
        dp[1 << j, j] = D[0, j + 1]
    for mask in range(1, full + 1):
        for j in range(k):
            if not (mask >> j) & 1:
                continue
            cur = dp[mask, j]
            if cur == np.inf:
                continue
            for t in range(k):
                if (mask >> t) & 1:
                    continue
                nm = mask | (1 << t)
                c = cur + D[j + 1, t + 1]
                if c < dp[nm, t]:
                    dp[nm, t] = c
                    par[nm, t] = j
    best = np.inf
    last = 0
    for j in range(k):
        c = dp[full, j] + D[j + 1, n - 1]
        if c < best:
            best = c
            last = j
    mask = full
    pos = n - 2
    j = last
    while j >= 0:
        order[pos] = j + 1
        pos -= 1
        pj = par[mask, j]
        mask = mask ^ (1 << j)
        j = pj
    return order


@numba.njit(cache=True, nogil=True)
def _prefix(D, p, fwd, bwd):
    fwd[0] = 0.0
    bwd[0] = 0.0
    for i in range(len(p) - 1):
        fwd[i + 1] = fwd[i] + D[p[i], p[i + 1]]
        bwd[i + 1] = bwd[i] + D[p[i + 1], p[i]]


@numba.njit(cache=True, nogil=True)
def _two_opt(D, p, fwd, bwd):
    """One best-improvement pass of 2-opt on the open path p (ends fixed). True if p improved."""
    n = len(p)
    _prefix(D, p, fwd, bwd)
    best = -1e-9
    bi = -1
    bj = -1
    for i in range(1, n - 2):
        for j in range(i + 1, n - 1):
            # reverse p[i..j]
            old = D[p[i - 1], p[i]] + (fwd[j] - fwd[i]) + D[p[j], p[j + 1]]
            new = D[p[i - 1], p[j]] + (bwd[j] - bwd[i]) + D[p[i], p[j + 1]]
            d = new - old
            if d < best:
                best = d
                bi = i
                bj = j
    if bi < 0:
        return False
    p[bi:bj + 1] = p[bi:bj + 1][::-1].copy()
    return True


@numba.njit(cache=True, nogil=True)
def _or_opt(D, p, fwd, bwd):
    """One best-improvement pass of Or-opt: move a run of 1-3 stops (kept or reversed) elsewhere."""
    n = len(p)
    _prefix(D, p, fwd, bwd)
    best = -1e-9
    bi = -1
    bl = 0
    bk = -1
    brev = False
    for L in range(1, 4):
        for i in range(1, n - L):
            j = i + L - 1  # run p[i..j]
            if j >= n - 1:
                break
            a = p[i - 1]
            b = p[j + 1]
            remove = D[a, p[i]] + D[p[j], b] - D[a, b]
            inner_f = fwd[j] - fwd[i]
            inner_b = bwd[j] - bwd[i]
            for k in range(0, n - 1):
                # insert between p[k] and p[k+1], outside the run and not at its own place
                if k >= i - 1 and k <= j:
                    continue
                u = p[k]
                v = p[k + 1]
                base = -D[u, v]
                d1 = base + D[u, p[i]] + D[p[j], v] - remove
                if d1 < best:
                    best = d1
                    bi = i
                    bl = L
                    bk = k
                    brev = False
                if L > 1:
                    d2 = base + D[u, p[j]] + D[p[i], v] + inner_b - inner_f - remove
                    if d2 < best:
                        best = d2
                        bi = i
                        bl = L
                        bk = k
                        brev = True
    if bi < 0:
        return False
    run = p[bi:bi + bl].copy()
    if brev:
        run = run[::-1].copy()
    rest = np.concatenate((p[:bi], p[bi + bl:]))
    # position of insertion in `rest`: after the element that was p[bk]
    k = bk if bk < bi else bk - bl
    out = np.concatenate((rest[:k + 1], run, rest[k + 1:]))
    p[:] = out
    return True


@numba.njit(cache=True, nogil=True)
def local_search(D, order):
    """2-opt and Or-opt to a local optimum from `order` (first and last fixed); returns a new array."""
    p = order.copy()
    n = len(p)
    if n < 4:
        return p
    fwd = np.empty(n)
    bwd = np.empty(n)
    while True:
        if _two_opt(D, p, fwd, bwd):
            continue
        if _or_opt(D, p, fwd, bwd):
            continue
        break
    return p


@numba.njit(cache=True, nogil=True)
def nearest_neighbour(D):
    n = D.shape[0]
    used = np.zeros(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    order[0] = 0
    order[n - 1] = n - 1
    used[0] = True
    used[n - 1] = True
    cur = 0
    for pos in range(1, n - 1):
        best = np.inf
        nxt = -1
        for t in range(n):
            if not used[t] and D[cur, t] < best:
                best = D[cur, t]
                nxt = t
        if nxt < 0:
            for t in range(n):
                if not used[t]:
                    nxt = t
                    break
        order[pos] = nxt
        used[nxt] = True
        cur = nxt
    return order


@numba.njit(cache=True, nogil=True)
def iterated_local_search(D, order, rounds, seed):
    np.random.seed(seed)
    n = len(order)
    best = local_search(D, order)
    nn = local_search(D, nearest_neighbour(D))
    if path_cost(D, nn) < path_cost(D, best):
        best = nn
    best_c = path_cost(D, best)
    cur = best.copy()
    cur_c = best_c
    if n < 8:
        return best
    for _ in range(rounds):
        # double bridge on the interior 1..n-2
        m = n - 2
        cuts = np.sort(np.random.choice(m - 1, 3, replace=False) + 1)
        a, b, c = cuts[0], cuts[1], cuts[2]
        inner = cur[1:n - 1]
        q = np.concatenate((inner[:a], inner[c:], inner[b:c], inner[a:b]))
        cand = cur.copy()
        cand[1:n - 1] = q
        cand = local_search(D, cand)
        cc = path_cost(D, cand)
        if cc < cur_c - 1e-9:
            cur = cand
            cur_c = cc
            if cc < best_c - 1e-9:
                best = cand.copy()
                best_c = cc
    return best


def solve(D: np.ndarray, order: np.ndarray | None = None, *, rounds: int = ILS_ROUNDS, seed: int = 1):
    """(order, method) for the cost matrix D: exact up to EXACT_MAX locations, heuristic above; never
    worse than `order` (default: the given order 0..n-1). Infinite cells must be replaced beforehand."""
    D = np.ascontiguousarray(D, dtype=np.float64)
    n = D.shape[0]
    given = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    if n <= 3:
        return given.copy(), "trivial"
    if n <= EXACT_MAX:
        return held_karp(D), "exact"
    best = iterated_local_search(D, given, rounds, seed)
    if path_cost(D, best) > path_cost(D, given):
        best = given.copy()
    return best, "heuristic"
