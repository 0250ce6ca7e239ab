"""A deliberately simple directed road graph from an OSM extract, for oracle tests and benchmarks of the
routing algorithms (the real graph stage lives in geoengine.graph). Ways with a highway tag; consecutive
node pairs become arcs of haversine length; oneway=yes/true/1 (and motorways, roundabouts) forward only,
oneway=-1 backward only. Primary weight = seconds at a per-class speed, secondary = metres.

`edge_based(...)` turns it into the turn-expanded form that routing runs on: vertices are the directed
arcs, a turn a->b->c (c != a, no U-turn) is an arc weighted by the time and length of b->c.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPEED_KMH = {
    "motorway": 110, "trunk": 90, "primary": 70, "secondary": 60, "tertiary": 50,
    "motorway_link": 60, "trunk_link": 50, "primary_link": 50, "secondary_link": 40, "tertiary_link": 35,
    "unclassified": 40, "residential": 30, "living_street": 10, "service": 20, "track": 15,
}
DEFAULT_KMH = 5.0  # footways, paths, steps, ...


@dataclass
class RoadGraph:
    n: int
    offsets: np.ndarray
    targets: np.ndarray
    seconds: np.ndarray
    metres: np.ndarray
    lon: np.ndarray
    lat: np.ndarray


def load(path, car_only: bool = False) -> RoadGraph:
    import osmium

    src, dst, spd = [], [], []
    ids: dict[int, int] = {}
    lons: list[float] = []
    lats: list[float] = []
    fp = osmium.FileProcessor(str(path)).with_locations().with_filter(osmium.filter.KeyFilter("highway"))
    for obj in fp:
        if not obj.is_way():
            continue
        tags = obj.tags
        hw = tags.get("highway")
        if car_only and hw not in SPEED_KMH:
            continue
        kmh = SPEED_KMH.get(hw, DEFAULT_KMH)
        ow = tags.get("oneway", "no")
        fwd, bwd = True, True
        if ow in ("yes", "true", "1") or hw == "motorway" or tags.get("junction") == "roundabout":
            bwd = False
        elif ow == "-1":
            fwd = False
        prev = None
        for nd in obj.nodes:
            if not nd.location.valid():
                prev = None
                continue
            i = ids.get(nd.ref)
            if i is None:
                i = len(lons)
                ids[nd.ref] = i
                lons.append(nd.location.lon)
                lats.append(nd.location.lat)
            if prev is not None and prev != i:
                if fwd:
                    src.append(prev)
                    dst.append(i)
                    spd.append(kmh)
                if bwd:
                    src.append(i)
                    dst.append(prev)
                    spd.append(kmh)
            prev = i
    lon = np.asarray(lons)
    lat = np.asarray(lats)
    u = np.asarray(src, np.int64)
    v = np.asarray(dst, np.int64)
    metres = haversine(lon[u], lat[u], lon[v], lat[v])
    seconds = metres / (np.asarray(spd) / 3.6)
    order = np.argsort(u, kind="stable")
    n = lon.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    np.add.at(offsets, u + 1, 1)
    return RoadGraph(n, np.cumsum(offsets), v[order].astype(np.int32), seconds[order], metres[order], lon, lat)


def haversine(lon1, lat1, lon2, lat2):
    r = 6371008.8
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp = p2 - p1
    dl = np.radians(lon2 - lon1)
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * r * np.arcsin(np.sqrt(a))


def edge_based(g: RoadGraph):
    """(n, offsets, targets, seconds, metres, tails, heads) of the turn-expanded graph, no U-turns."""
    tails = np.repeat(np.arange(g.n), np.diff(g.offsets))
    heads = g.targets.astype(np.int64)
    deg = np.diff(g.offsets)
    cnt = deg[heads]                                   # candidate turns per arc
    e1 = np.repeat(np.arange(heads.shape[0]), cnt)
    start = g.offsets[heads]
    within = np.arange(e1.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    e2 = start[e1] + within
    keep = heads[e2] != tails[e1]                      # no U-turn
    e1, e2 = e1[keep], e2[keep]
    m = heads.shape[0]
    offsets = np.zeros(m + 1, np.int64)
    np.add.at(offsets, e1 + 1, 1)
    return (m, np.cumsum(offsets), e2.astype(np.int32), g.seconds[e2], g.metres[e2], tails, heads)


def to_scipy(n, offsets, targets, weights):
    """csr_matrix with the minimum of parallel arcs, self loops dropped, zero weights kept as tiny."""
    import scipy.sparse as sp

    u = np.repeat(np.arange(n), np.diff(offsets))
    v = targets.astype(np.int64)
    w = np.asarray(weights, float)
    keep = u != v
    u, v, w = u[keep], v[keep], w[keep]
    key = u * n + v
    order = np.lexsort((w, key))
    key, u, v, w = key[order], u[order], v[order], w[order]
    first = np.ones(key.shape[0], bool)
    first[1:] = key[1:] != key[:-1]
    # scipy's csgraph treats explicit zeros as missing arcs: nudge them (1e-12 does not change results
    # at the tolerance tests use)
    w = np.where(w[first] == 0, 1e-12, w[first])
    return sp.csr_matrix((w, (u[first], v[first])), shape=(n, n))


def check_against_dijkstra(graph, topo, prof, rng, n_src: int = 4, n_tgt: int = 50) -> int:
    """A customised hierarchy of `topo` for the profile `prof`, against scipy's Dijkstra on the same turn
    graph: the table, batch pairs and point-to-point costs for `n_src` x `n_tgt` random usable edges, and
    every point-to-point path's arcs summing to its cost. Returns how many pairs are reachable."""
    import pytest
    from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

    off, tgt, w, packed = prof.turn_csr()
    ch = topo.customise(off, tgt, w, packed)
    usable = np.flatnonzero(prof.usable)
    if len(usable) < 2:
        return 0
    src = rng.choice(usable, n_src)
    dst = rng.choice(usable, n_tgt)
    D = scipy_dijkstra(to_scipy(graph.n_edges, off, tgt, w), indices=src)[:, dst]
    T, S = ch.table(src, dst)
    np.testing.assert_allclose(T, D, rtol=1e-9, atol=1e-6)
    P, _ = ch.query_pairs(src[:, None].repeat(n_tgt, 1).ravel(), np.tile(dst, n_src))
    np.testing.assert_allclose(P.reshape(n_src, n_tgt), D, rtol=1e-9, atol=1e-6)
    # point to point with unpacking: the path's arcs sum to the cost
    for i in range(n_src):
        j = int(np.flatnonzero(np.isfinite(D[i]))[0]) if np.isfinite(D[i]).any() else 0
        r = ch.query(int(src[i]), int(dst[j]))
        assert r.primary == pytest.approx(D[i, j], rel=1e-9, abs=1e-6)
        if r.found:
            p = np.asarray(r.path)
            a, b = p[:-1], p[1:]
            cost = 0.0
            for x, y in zip(a.tolist(), b.tolist(), strict=True):
                ks = np.flatnonzero(tgt[off[x]:off[x + 1]] == y)
                assert len(ks), "path arc not in the turn graph"
                cost += w[off[x] + ks].min()
            assert cost == pytest.approx(r.primary, rel=1e-9, abs=1e-6)
    return int(np.isfinite(D).sum())
