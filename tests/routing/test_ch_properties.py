"""Property tests: CH point-to-point, bucket table, Dijkstra variants and one-to-all agree with
scipy.sparse.csgraph.dijkstra on random directed graphs (one-way arcs, parallel arcs, self loops,
zero-weight arcs, disconnected parts), and unpacked paths are real arc sequences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from osm_graph import to_scipy
from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

from geoengine.bundle import is_mapped
from geoengine.routing import (
    ContractionHierarchy,
    Graph,
    bidirectional_dijkstra,
    dijkstra,
    dijkstra_table,
    one_to_all,
)

SETTINGS = dict(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 30))
    m = draw(st.integers(0, 4 * n))
    u = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    v = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    # integer weights (exact sums) with plenty of zeros and ties
    w = np.array(draw(st.lists(st.integers(0, 9), min_size=m, max_size=m)), np.float64)
    s = np.array(draw(st.lists(st.integers(0, 100), min_size=m, max_size=m)), np.float64)
    order = np.argsort(u, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.add.at(offsets, u + 1, 1)
    return n, np.cumsum(offsets), v[order].astype(np.int32), w[order], s[order]


def arc_cost(offsets, targets, weights, a, b):
    ks = [k for k in range(offsets[a], offsets[a + 1]) if targets[k] == b]
    assert ks, f"path uses {a}->{b}, which is not an arc"
    return min(weights[k] for k in ks)


def check_path(graph, path, src_set, tgt_set, primary, src_off, tgt_off):
    assert path[0] in src_set and path[-1] in tgt_set
    total = sum(arc_cost(graph[1], graph[2], graph[3], a, b) for a, b in zip(path[:-1], path[1:], strict=True))
    assert total + src_off + tgt_off == pytest.approx(primary)


def oracle(graph):
    n, offsets, targets, w, _s = graph
    return scipy_dijkstra(to_scipy(n, offsets, targets, w)) if n else np.zeros((0, 0))


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_ch_query_and_table_equal_scipy(graph, data):
    n, offsets, targets, w, s = graph
    D = np.round(oracle(graph), 6)
    ch = ContractionHierarchy.build(n, offsets, targets, w, s)
    g = Graph(n, offsets, targets, w, s)
    pairs = [(a, b) for a in range(n) for b in range(n)]
    for a, b in data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=25)):
        for r in (ch.query(a, b), dijkstra(g, a, b), bidirectional_dijkstra(g, a, b)):
            assert r.primary == pytest.approx(D[a, b], abs=1e-6)
            if np.isfinite(D[a, b]):
                assert r.path[0] == a and r.path[-1] == b
                check_path(graph, list(r.path), {a}, {b}, r.primary, 0, 0)
                # the secondary metric is the sum along the returned path of the arcs taken (among parallel
                # arcs of equal primary weight any one may be taken)
                lo = hi = 0.0
                for x, y in zip(r.path[:-1], r.path[1:], strict=True):
                    ks = [k for k in range(offsets[x], offsets[x + 1]) if targets[k] == y]
                    best_w = min(w[k] for k in ks)
                    opts = [s[k] for k in ks if w[k] == best_w]
                    lo, hi = lo + min(opts), hi + max(opts)
                assert lo - 1e-9 <= r.secondary <= hi + 1e-9
            else:
                assert len(r.path) == 0
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
    tgt = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
    T, S = ch.table(src, tgt)
    assert T.shape == (len(src), len(tgt))
    np.testing.assert_allclose(T, D[np.ix_(src, tgt)], atol=1e-6)
    assert np.array_equal(np.isinf(S), np.isinf(T))
    k = min(len(src), len(tgt))
    P, PS = ch.query_pairs(src[:k], tgt[:k])
    np.testing.assert_allclose(P, D[src[:k], tgt[:k]], atol=1e-6)
    assert np.array_equal(np.isinf(PS), np.isinf(P))
    T2, S2 = dijkstra_table(g, src, tgt)
    np.testing.assert_allclose(T2, T, atol=1e-6)
    assert np.array_equal(np.isinf(S2), np.isinf(T))


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_multi_candidate_offsets(graph, data):
    """Several source and target candidates with offsets: min over (s, t) of os + d + ot."""
    n, offsets, targets, w, s = graph
    D = oracle(graph)
    ch = ContractionHierarchy.build(n, offsets, targets, w, s)
    g = Graph(n, offsets, targets, w, s)
    k1 = data.draw(st.integers(1, 3))
    k2 = data.draw(st.integers(1, 3))
    sv = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=k1, max_size=k1)))
    tv = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=k2, max_size=k2)))
    so = np.array(data.draw(st.lists(st.integers(0, 5), min_size=k1, max_size=k1)), float)
    to = np.array(data.draw(st.lists(st.integers(-3, 5), min_size=k2, max_size=k2)), float)
    expect = np.min(so[:, None] + D[np.ix_(sv, tv)] + to[None, :])
    for r in (ch.query(sv, tv, so, to), dijkstra(g, sv, tv, so, to), bidirectional_dijkstra(g, sv, tv, so, to)):
        assert r.primary == pytest.approx(expect, abs=1e-6)
        if np.isfinite(expect):
            assert sv[r.source_index] == r.path[0] and tv[r.target_index] == r.path[-1]
            check_path(graph, list(r.path), set(sv), set(tv), r.primary, so[r.source_index], to[r.target_index])
    # the table with the same candidates as one location each
    empty = (np.array([], np.int64), np.array([]))
    for T, _ in (ch.table([(sv, so), empty], [(tv, to), (tv[:1], to[:1]), empty]),
                 dijkstra_table(g, [(sv, so), empty], [(tv, to), (tv[:1], to[:1]), empty])):
        assert T[0, 0] == pytest.approx(expect, abs=1e-6)
        assert T[0, 1] == pytest.approx(np.min(so + D[sv, tv[0]] + to[0]), abs=1e-6)
        # a location without candidates (nothing snapped) gives an inf row / column
        assert np.isinf(T[1]).all() and np.isinf(T[:, 2]).all()


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_force_loop_excludes_the_trivial_path(graph, data):
    n, offsets, targets, w, s = graph
    D = oracle(graph)
    v = data.draw(st.integers(0, n - 1))
    # shortest non-empty cycle through v: an out-arc v->x then back
    loop = np.inf
    for k in range(offsets[v], offsets[v + 1]):
        x = targets[k]
        if x != v:
            loop = min(loop, w[k] + D[x, v])
    ch = ContractionHierarchy.build(n, offsets, targets, w, s)
    g = Graph(n, offsets, targets, w, s)
    assert ch.query(v, v).primary == 0 and list(ch.query(v, v).path) == [v]
    for r in (ch.query(v, v, force_loop=True), dijkstra(g, v, v, force_loop=True),
              bidirectional_dijkstra(g, v, v, force_loop=True)):
        assert r.primary == pytest.approx(loop, abs=1e-6)
        if np.isfinite(loop):
            assert r.path[0] == v and r.path[-1] == v and len(r.path) >= 3
            check_path(graph, list(r.path), {v}, {v}, r.primary, 0, 0)


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_one_to_all_bounded(graph, data):
    n, offsets, targets, w, s = graph
    D = oracle(graph)
    src = data.draw(st.integers(0, n - 1))
    limit = data.draw(st.sampled_from([0.0, 3.0, 10.0, np.inf]))
    g = Graph(n, offsets, targets, w, s)
    d, sec = one_to_all(g, src, limit=limit)
    expect = np.where(D[src] <= limit + 1e-9, np.round(D[src], 9), np.inf)  # zero arcs are 1e-12 in scipy
    np.testing.assert_allclose(d, expect, atol=1e-6)
    assert np.array_equal(np.isinf(sec), np.isinf(d))
    d_rev, _ = one_to_all(g, src, limit=limit, reverse=True)
    np.testing.assert_allclose(d_rev, np.where(D[:, src] <= limit + 1e-9, np.round(D[:, src], 9), np.inf), atol=1e-6)


def test_save_load_roundtrip(tmp_path):
    n, offsets, targets = 4, np.array([0, 2, 3, 4, 4]), np.array([1, 2, 3, 3], np.int32)
    w = np.array([1.0, 5.0, 1.0, 1.0])
    ch = ContractionHierarchy.build(n, offsets, targets, w, w * 10)
    files = ch.save(tmp_path / "ch")
    assert "ch.json" in files and "up_off.npy" in files
    ch2 = ContractionHierarchy.load(tmp_path / "ch")
    # a plain ndarray view (cheap to index) over the memory-mapped file
    assert is_mapped(ch2.up_w) and not isinstance(ch2.up_w, np.memmap)
    r = ch2.query(0, 3)
    assert (r.primary, r.secondary, list(r.path)) == (2.0, 20.0, [0, 1, 3])
    assert ch2.query(3, 0).primary == np.inf


def test_bad_inputs():
    offsets, targets = np.array([0, 1, 1]), np.array([1], np.int32)
    with pytest.raises(ValueError, match="weights"):
        ContractionHierarchy.build(2, offsets, targets, np.array([-1.0]))
    with pytest.raises(ValueError, match="weights"):
        ContractionHierarchy.build(2, offsets, targets, np.array([np.nan]))
    with pytest.raises(ValueError, match="offsets"):
        ContractionHierarchy.build(3, offsets, targets, np.array([1.0]))
    with pytest.raises(ValueError, match="targets out of range"):
        ContractionHierarchy.build(2, offsets, np.array([5], np.int32), np.array([1.0]))
    ch = ContractionHierarchy.build(2, offsets, targets, np.array([1.0]))
    with pytest.raises(ValueError, match="out of range"):
        ch.query(0, 2)
    with pytest.raises(ValueError, match="shape"):
        ch.query([0, 1], 1, source_offsets=[1.0])
    with pytest.raises(ValueError, match="out of range"):
        ch.table(np.array([0]), np.array([-1]))
    with pytest.raises(ValueError, match="same length"):
        ch.query_pairs(np.array([0, 1]), np.array([1]))
    with pytest.raises(ValueError, match="out of range"):
        dijkstra(Graph(2, offsets, targets, np.array([1.0])), 0, 7)


def test_concurrent_queries_use_separate_workspaces():
    """Kernels release the GIL and each thread has its own workspace: answers do not mix."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    n = 400
    u = rng.integers(0, n, 1600)
    v = rng.integers(0, n, 1600)
    w = rng.integers(1, 50, 1600).astype(float)
    order = np.argsort(u, kind="stable")
    offsets = np.cumsum(np.concatenate([[0], np.bincount(u, minlength=n)]))
    ch = ContractionHierarchy.build(n, offsets, v[order].astype(np.int32), w[order], w[order])
    pairs = rng.integers(0, n, (300, 2))
    expect = [ch.query(int(a), int(b)).primary for a, b in pairs]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: ch.query(int(p[0]), int(p[1])).primary, pairs))
    assert got == expect
    D = np.array(expect)
    assert np.isfinite(D).sum() > 200


def test_warmup_and_trivial_queries_on_tiny_graphs():
    ch = ContractionHierarchy.build(1, np.array([0, 0]), np.array([], np.int32), np.array([]))
    ch.warmup()
    assert ch.query(0, 0).primary == 0.0 and ch.query(0, 0, force_loop=True).primary == np.inf
    T, S = ch.table(np.array([0, 0]), np.array([0]))
    assert T.tolist() == [[0.0], [0.0]] and S.tolist() == [[0.0], [0.0]]
    g = Graph(1, np.array([0, 0]), np.array([], np.int32), np.array([]))
    g.warmup()
    assert one_to_all(g, 0)[0].tolist() == [0.0]
    empty = ContractionHierarchy.build(0, np.array([0]), np.array([], np.int32), np.array([]))
    empty.warmup()
    assert empty.table([], []) [0].shape == (0, 0)
