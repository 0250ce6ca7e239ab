"""CH, table and the exact searches against scipy.sparse.csgraph on real road graphs built from the
sample extracts (Andorra, Liechtenstein), node-based and turn-expanded (edge-based)."""

from __future__ import annotations

import numpy as np
import osm_graph
import pytest
from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

from geoengine.routing import (
    ContractionHierarchy,
    Graph,
    bidirectional_dijkstra,
    dijkstra,
    dijkstra_table,
    one_to_all,
)

EXTRACTS = {
    "andorra": "andorra/andorra.osm.pbf",
    "liechtenstein": "liechtenstein/valhalla-liechtenstein-latest.osm.pbf",
}


@pytest.fixture(scope="module", params=[("andorra", False), ("liechtenstein", False), ("liechtenstein", True)],
                ids=["andorra-nodes", "liechtenstein-nodes", "liechtenstein-edges"])
def road(request, shared_data_dir):
    name, edge_based = request.param
    g = osm_graph.load(shared_data_dir / EXTRACTS[name])
    if edge_based:
        n, offsets, targets, w, s, _tails, _heads = osm_graph.edge_based(g)
    else:
        n, offsets, targets, w, s = g.n, g.offsets, g.targets, g.seconds, g.metres
    ch = ContractionHierarchy.build(n, offsets, targets, w, s)
    return n, offsets, targets, w, s, ch


def test_real_graph_has_oneways(shared_data_dir):
    g = osm_graph.load(shared_data_dir / EXTRACTS["andorra"])
    m = osm_graph.to_scipy(g.n, g.offsets, g.targets, g.seconds)
    assert (m != m.T).nnz > 0, "the graph should contain one-way arcs"


def test_random_pairs_match_scipy(road):
    n, offsets, targets, w, s, ch = road
    rng = np.random.default_rng(7)
    src = rng.integers(0, n, 12)
    D = scipy_dijkstra(osm_graph.to_scipy(n, offsets, targets, w), indices=src)
    g = Graph(n, offsets, targets, w, s)
    found = 0
    for i, a in enumerate(src):
        for b in rng.integers(0, n, 10):
            r = ch.query(int(a), int(b))
            assert r.primary == pytest.approx(D[i, b], rel=1e-9, abs=1e-6)
            if np.isfinite(D[i, b]):
                found += 1
                p = r.path
                assert p[0] == a and p[-1] == b
                # every consecutive pair is an arc; the cheapest such arcs sum to both totals
                prim = sec = 0.0
                for x, y in zip(p[:-1], p[1:], strict=True):
                    ks = np.arange(offsets[x], offsets[x + 1])[targets[offsets[x]:offsets[x + 1]] == y]
                    assert ks.size, f"{x}->{y} is not an arc"
                    k = ks[np.argmin(w[ks])]
                    prim += w[k]
                    sec += s[k]
                assert prim == pytest.approx(r.primary, rel=1e-9)
                assert sec == pytest.approx(r.secondary, rel=1e-6)
                if found % 7 == 0:
                    for r2 in (dijkstra(g, int(a), int(b)), bidirectional_dijkstra(g, int(a), int(b))):
                        assert r2.primary == pytest.approx(r.primary, rel=1e-9)
    assert found > 20, "too few connected pairs to mean anything"


def test_table_matches_scipy(road):
    n, offsets, targets, w, s, ch = road
    rng = np.random.default_rng(11)
    src = rng.integers(0, n, 15)
    tgt = rng.integers(0, n, 40)
    D = scipy_dijkstra(osm_graph.to_scipy(n, offsets, targets, w), indices=src)[:, tgt]
    T, S = ch.table(src, tgt)
    np.testing.assert_allclose(T, D, rtol=1e-9, atol=1e-6)
    P, PS = ch.query_pairs(src, tgt[:15])
    np.testing.assert_allclose(P, T[np.arange(15), np.arange(15)], rtol=1e-9)
    T2, S2 = dijkstra_table(Graph(n, offsets, targets, w, s), src[:4], tgt)
    np.testing.assert_allclose(T2, D[:4], rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(S2, S[:4], rtol=1e-6)
    assert np.isfinite(T).sum() > 100
    # secondary (metres) of a cell equals the one of the point-to-point route
    i, j = np.argwhere(np.isfinite(T))[3]
    assert S[i, j] == pytest.approx(ch.query(int(src[i]), int(tgt[j])).secondary, rel=1e-6)


def test_one_to_all_matches_scipy(road):
    n, offsets, targets, w, s, _ch = road
    D = scipy_dijkstra(osm_graph.to_scipy(n, offsets, targets, w), indices=[5])[0]
    d, _ = one_to_all(Graph(n, offsets, targets, w, s), 5, limit=600.0)
    expect = np.where(D <= 600.0, D, np.inf)
    np.testing.assert_allclose(d, expect, rtol=1e-9)
