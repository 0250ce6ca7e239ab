"""Alternative routes by the penalty method.

After the best route is found, the edges of every route found so far get their cost multiplied by
`PENALTY` (cumulatively) and all legs are searched again, exactly, with bidirectional Dijkstra over the
profile's edge-based graph with the penalised weights. A candidate is kept when

- its true (unpenalised) cost is at most `MAX_STRETCH` times the best route's cost,
- it shares less than `MAX_SHARE` of its length with every route kept before it (the best included),
- it uses no road segment twice (no loops),
- it is locally optimal (the "T-test"): around the middle and the quartiles of the part that leaves the best
  route, the stretch of the candidate worth `LOCAL_SHARE` of the best route's cost is itself a shortest path
  (within `LOCAL_SLACK`), so no alternative takes a pointless detour around a block.

The search stops after `n` alternatives or `MAX_ROUNDS(n)` re-searches. Everything except the choice of
edges to penalise (numpy, vectorised) runs in the routing package's Numba kernels (Dijkstra, and
`routing.pieces.path_prefix_costs` for the T-test).

Library use (the /route `alternates` option and /v1/routing/directions `alternatives`; see
geoengine.services.route.run):

    cands, best = router.route_legs(prof, locations)
    for pieces in alternatives(router, prof, cands, 2, best=best): ...  # lists of Leg, one per leg
"""

from __future__ import annotations

import copy

import numpy as np

from geoengine.arrays import unique
from geoengine.routing.pieces import Leg, path_prefix_costs

PENALTY = 1.6
MAX_STRETCH = 1.5
MAX_SHARE = 0.65
MAX_ALTERNATES = 3
LOCAL_SHARE = 0.25
LOCAL_SLACK = 0.05


def max_rounds(n: int) -> int:
    return 3 * n + 3


def route_edges(pieces: list[Leg]) -> np.ndarray:
    return np.concatenate([p.edges for p in pieces]) if pieces else np.empty(0, np.int64)


def shared_fraction(prof, a: list[Leg], b: list[Leg]) -> float:
    """Share of the length of route `a` that runs on road segments (either direction) route `b` uses."""
    ea = route_edges(a)
    eb = route_edges(b)
    la = np.asarray(prof.length)[ea]
    total = float(la.sum())
    if total <= 0:
        return 1.0
    common = np.isin(ea >> 1, eb >> 1)
    return float(la[common].sum()) / total


def has_loop(pieces: list[Leg]) -> bool:
    """True when one leg uses the same road segment twice."""
    for p in pieces:
        seg = p.edges >> 1
        if len(unique(seg)) != len(seg):
            return True
    return False


def _penalised_profile(prof, mult: np.ndarray):
    """A shallow copy of `prof` searching the edge-based graph with arc weights raised by the penalty of
    the edge each arc enters (source and target offsets keep the true costs)."""
    base = prof.search
    cost = np.where(np.isfinite(prof.cost), prof.cost, 0.0)
    extra = (mult - 1.0) * cost
    w = np.asarray(base.weights) + extra[np.asarray(base.targets)]
    shim = copy.copy(prof)
    shim.ch = None
    shim._search = base.with_weights(w)
    return shim


def locally_optimal(router, prof, piece: Leg, best: Leg, window: float, slack: float = LOCAL_SLACK) -> bool:
    """T-test of one piece against the best piece between the same locations: windows of cost `window`
    around the quartiles of the piece's part off the best route must be shortest paths (within `slack`)."""
    e = piece.edges
    off = ~np.isin(e >> 1, best.edges >> 1)
    if len(e) < 3 or not off.any():
        return True
    g = prof.search
    cost = np.where(np.isfinite(prof.cost), prof.cost, 0.0)
    c = path_prefix_costs(np.asarray(g.offsets), np.asarray(g.targets), np.asarray(g.weights), cost, e)
    if not np.isfinite(c[-1]):
        return False
    start = c - cost[e]  # cost at the start of each edge
    idx = np.flatnonzero(off)
    lo, hi = start[idx[0]], c[idx[-1]]
    for q in (0.25, 0.5, 0.75):
        x = lo + q * (hi - lo)
        i = int(np.searchsorted(c, x - window / 2))
        j = int(np.searchsorted(c, x + window / 2))
        i, j = max(0, min(i, len(e) - 1)), max(0, min(j, len(e) - 1))
        if j - i < 2:
            continue
        sub = c[j] - start[i]
        src = {"edge": e[i:i + 1], "fraction": np.zeros(1)}
        dst = {"edge": e[j:j + 1], "fraction": np.ones(1)}
        sp = router.shortest(prof, src, dst)
        if sp is None or sub > (1.0 + slack) * sp.cost + 1e-6:
            return False
    return True


def _true_cost(leg: Leg, mult: np.ndarray, cost: np.ndarray) -> float:
    e = leg.edges[1:]
    return float(leg.cost - np.sum((mult[e] - 1.0) * cost[e]))


def alternatives(router, prof, cands, n: int, *, best: list[Leg] | None = None,
                 max_stretch: float = MAX_STRETCH, max_share: float = MAX_SHARE, penalty: float = PENALTY,
                 local_check: bool = True) -> list[list[Leg]]:
    """Up to `n` (1-3) alternative routes through the snapped candidates `cands` (as returned by
    `Router.route_legs`), each a list of pieces (one `Leg` per consecutive pair of locations), best
    first. `best` is the primary route's pieces (computed when omitted); it is not part of the result.
    Fewer than `n` (possibly none) are returned when no meaningfully different route exists."""
    n = max(0, min(int(n), MAX_ALTERNATES))
    if best is None:
        best = [router.shortest(prof, cands[i], cands[i + 1]) for i in range(len(cands) - 1)]
        if any(p is None for p in best):
            return []
    if n == 0:
        return []
    best_cost = sum(p.cost for p in best)
    cost = np.where(np.isfinite(prof.cost), prof.cost, 0.0)
    mult = np.ones(len(cost))
    kept: list[list[Leg]] = [best]
    seen = [best]
    out: list[list[Leg]] = []
    for _ in range(max_rounds(n)):
        if len(out) >= n:
            break
        for r in seen[-1:]:
            e = route_edges(r)
            mult[e] *= penalty
        shim = _penalised_profile(prof, mult)
        pieces: list[Leg] = []
        for i in range(len(cands) - 1):
            leg = router.shortest(shim, cands[i], cands[i + 1])
            if leg is None:
                return out
            leg.cost = _true_cost(leg, mult, cost)
            pieces.append(leg)
        seen.append(pieces)
        total = sum(p.cost for p in pieces)
        if total > max_stretch * best_cost + 1e-9 and total > best_cost + 1.0:
            # penalties only grow from here: every later candidate is costlier still
            if total > 2.0 * max_stretch * best_cost:
                break
            continue
        if has_loop(pieces):
            continue
        window = LOCAL_SHARE * best_cost
        if local_check and not all(locally_optimal(router, prof, p, b, window) for p, b in zip(pieces, best, strict=True)):
            continue
        if all(shared_fraction(prof, pieces, k) < max_share for k in kept):
            kept.append(pieces)
            out.append(pieces)
    return out
