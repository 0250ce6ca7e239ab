"""Property tests: customisable contraction hierarchies (order, chordal topology, customisation,
queries) equal scipy.sparse.csgraph.dijkstra on random directed graphs with random metrics: blocked
arcs (inf), zero weights, one-ways, parallel arcs, self loops, disconnected parts, any order."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from osm_graph import to_scipy
from scipy.sparse.csgraph import dijkstra as scipy_dijkstra

from geoengine.routing.cch import CCHTopology
from geoengine.routing.order import nested_dissection

SETTINGS = dict(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 30))
    m = draw(st.integers(0, 4 * n))
    u = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    v = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    order = np.argsort(u, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.add.at(offsets, u + 1, 1)
    return n, np.cumsum(offsets), v[order].astype(np.int32)


@st.composite
def metrics(draw, m):
    """Integer weights (exact sums, many zeros and ties), about a fifth of the arcs blocked (inf)."""
    w = np.array(draw(st.lists(st.integers(0, 9), min_size=m, max_size=m)), np.float64)
    blocked = np.array(draw(st.lists(st.integers(0, 4), min_size=m, max_size=m)), np.int64) == 0
    w[blocked] = np.inf
    s = np.array(draw(st.lists(st.integers(0, 100), min_size=m, max_size=m)), np.float64)
    return w, s


def oracle(n, offsets, targets, w):
    keep = np.isfinite(w)
    src = np.repeat(np.arange(n), np.diff(offsets))[keep]
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=off[1:])
    return scipy_dijkstra(to_scipy(n, off, targets[keep], w[keep]))


def orders(n, offsets, targets, data):
    """The nested-dissection order and a random permutation (CCH answers do not depend on the order)."""
    perm = np.array(data.draw(st.permutations(range(n))), np.int64)
    return [None, perm]


def check_path(offsets, targets, w, s, path, a, b, primary, secondary):
    assert path[0] == a and path[-1] == b
    tot, lo, hi = 0.0, 0.0, 0.0
    for x, y in zip(path[:-1], path[1:], strict=True):
        ks = [k for k in range(offsets[x], offsets[x + 1]) if targets[k] == y and np.isfinite(w[k])]
        assert ks, f"path uses {x}->{y}, which is not a usable arc"
        best = min(w[k] for k in ks)
        tot += best
        opts = [s[k] for k in ks if w[k] == best]
        lo, hi = lo + min(opts), hi + max(opts)
    assert tot == pytest.approx(primary)
    assert lo - 1e-9 <= secondary <= hi + 1e-9


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_customised_queries_equal_scipy(graph, data):
    n, offsets, targets = graph
    for rank in orders(n, offsets, targets, data):
        topo = CCHTopology.build(n, offsets, targets, rank)
        for _ in range(2):  # two metrics on one topology
            w, s = data.draw(metrics(len(targets)))
            D = oracle(n, offsets, targets, w)
            perfect = bool(data.draw(st.booleans()))
            ch = topo.customise(offsets, targets, w, s, parallel=bool(data.draw(st.booleans())), perfect=perfect)
            if perfect:  # compacted: unusable arcs dropped
                assert np.all(np.isfinite(ch.up_w)) and np.all(np.isfinite(ch.dn_w))
            else:  # the supergraph's own layout, unusable arcs at inf
                assert len(ch.up_w) == len(ch.dn_w) == topo.edges
            assert (ch.parent is not None) == perfect  # elimination-tree queries after perfect customisation
            if perfect:  # pruning keeps a subset of the basic customisation's arcs
                basic = topo.customise(offsets, targets, w, s, perfect=False)
                assert len(ch.up_w) <= len(basic.up_w) and len(ch.dn_w) <= len(basic.dn_w)
            pairs = [(a, b) for a in range(n) for b in range(n)]
            for a, b in data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=20)):
                r = ch.query(a, b)
                assert r.primary == pytest.approx(D[a, b], abs=1e-9)
                if np.isfinite(D[a, b]):
                    check_path(offsets, targets, w, s, list(r.path), a, b, r.primary, r.secondary)
                else:
                    assert len(r.path) == 0
            src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
            tgt = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6)))
            T, S = ch.table(src, tgt)
            np.testing.assert_allclose(T, D[np.ix_(src, tgt)], atol=1e-9)
            assert np.array_equal(np.isinf(S), np.isinf(T))
            k = min(len(src), len(tgt))
            P, _PS = ch.query_pairs(src[:k], tgt[:k])
            np.testing.assert_allclose(P, D[src[:k], tgt[:k]], atol=1e-9)


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_spare_working_arrays_give_the_fresh_customisation(graph, data):
    """A perfect customisation leaves its working arrays as the topology's spare; the next customisation
    takes them (refilled) and is, array for array, the one made on fresh arrays (basic and perfect)."""
    n, offsets, targets = graph
    w1, s1 = data.draw(metrics(len(targets)))
    w2, s2 = data.draw(metrics(len(targets)))
    perfect = data.draw(st.booleans())
    fresh = CCHTopology.build(n, offsets, targets).customise(offsets, targets, w2, s2, perfect=perfect)
    topo = CCHTopology.build(n, offsets, targets)
    topo.customise(offsets, targets, w1, s1, perfect=True)
    assert topo._spare is None  # not kept unless asked (keep_spare: the router's speeds_spare setting)
    topo.keep_spare = True
    topo.customise(offsets, targets, w1, s1, perfect=True, parallel=data.draw(st.booleans()))
    assert topo._spare is not None and topo.spare_hits == 0
    again = topo.customise(offsets, targets, w2, s2, perfect=perfect)
    assert topo.spare_hits == 1
    assert (topo._spare is not None) == perfect  # a basic customisation keeps them: its arcs live in them
    for name in ("up_off", "up_tgt", "up_w", "up_s", "up_mid", "up_c1", "up_c2", "up_hops",
                 "dn_off", "dn_tgt", "dn_w", "dn_s", "dn_mid", "dn_c1", "dn_c2", "dn_hops"):
        np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name), err_msg=name)


@settings(**SETTINGS)
@given(graphs(), st.data())
def test_sub_graph_customisation_and_loops(graph, data):
    """A topology built on all arcs serves any subset of them (the router's per-option turn graphs);
    force_loop paths start with a real arc; multi-candidate offsets."""
    n, offsets, targets = graph
    m = len(targets)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), bool)
    src_all = np.repeat(np.arange(n), np.diff(offsets))
    sub_off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src_all[keep], minlength=n), out=sub_off[1:])
    sub_tgt = targets[keep]
    topo = CCHTopology.build(n, offsets, targets)
    if data.draw(st.booleans()):
        topo.set_base(offsets, targets)  # map sub-CSRs by the merge walk instead of binary searches
    w, s = data.draw(metrics(len(sub_tgt)))
    ch = topo.customise(sub_off, sub_tgt, w, s, perfect=bool(data.draw(st.booleans())))
    D = oracle(n, sub_off, sub_tgt, w)
    k1, k2 = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    sv = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=k1, max_size=k1)))
    tv = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=k2, max_size=k2)))
    so = np.array(data.draw(st.lists(st.integers(0, 5), min_size=k1, max_size=k1)), float)
    to = np.array(data.draw(st.lists(st.integers(-3, 5), min_size=k2, max_size=k2)), float)
    expect = np.min(so[:, None] + D[np.ix_(sv, tv)] + to[None, :])
    r = ch.query(sv, tv, so, to)
    assert r.primary == pytest.approx(expect, abs=1e-9)
    # loops: cheapest path of at least one arc from v back to v
    v = int(data.draw(st.integers(0, n - 1)))
    fin = np.isfinite(w)
    loop = np.inf
    for k in range(sub_off[v], sub_off[v + 1]):
        if fin[k] and sub_tgt[k] != v:  # self loops are ignored
            loop = min(loop, w[k] + D[sub_tgt[k], v])
    r = ch.query(v, v, force_loop=True)
    assert r.primary == pytest.approx(loop, abs=1e-9)
    if np.isfinite(loop):
        assert r.path[0] == v and r.path[-1] == v and len(r.path) >= 2


def test_arcs_outside_the_topology_and_bad_input():
    offsets = np.array([0, 1, 1, 1], np.int64)
    targets = np.array([1], np.int32)
    topo = CCHTopology.build(3, offsets, targets)
    with pytest.raises(ValueError, match="does not connect"):
        topo.customise(np.array([0, 1, 1, 1]), np.array([2]), np.array([1.0]))
    with pytest.raises(ValueError, match="weights"):
        topo.customise(offsets, targets, np.array([-1.0]))
    with pytest.raises(ValueError, match="shape"):
        topo.customise(offsets, targets, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="permutation"):
        CCHTopology.build(3, offsets, targets, np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="offsets"):
        CCHTopology.build(3, np.array([0, 1]), targets)


def test_nested_dissection_is_a_permutation_and_save_load(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    # a grid: nested dissection must give a far smaller supergraph than a random order
    side = 20
    ids = np.arange(n).reshape(side, side)
    u = np.concatenate([ids[:, :-1].ravel(), ids[:, 1:].ravel(), ids[:-1, :].ravel(), ids[1:, :].ravel()])
    v = np.concatenate([ids[:, 1:].ravel(), ids[:, :-1].ravel(), ids[1:, :].ravel(), ids[:-1, :].ravel()])
    o = np.argsort(u, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=offsets[1:])
    targets = v[o].astype(np.int32)
    lon, lat = (ids % side).ravel().astype(float), (ids // side).ravel().astype(float)
    rank = nested_dissection(n, offsets, targets, lon, lat)
    assert np.array_equal(np.sort(rank), np.arange(n))
    nd = CCHTopology.build(n, offsets, targets, rank)
    rnd = CCHTopology.build(n, offsets, targets, rng.permutation(n))
    assert nd.edges < 0.5 * rnd.edges
    nd.save(tmp_path / "t")
    again = CCHTopology.load(tmp_path / "t")
    w = rng.integers(1, 10, len(targets)).astype(float)
    a, b = nd.customise(offsets, targets, w), again.customise(offsets, targets, w)
    np.testing.assert_array_equal(a.table(np.arange(n), np.arange(n))[0], b.table(np.arange(n), np.arange(n))[0])
    D = oracle(n, offsets, targets, w)
    np.testing.assert_allclose(a.table(np.arange(n), np.arange(n))[0], D)


def test_concurrent_customisations_and_queries():
    rng = np.random.default_rng(5)
    n, m = 300, 1200
    u = np.sort(rng.integers(0, n, m))
    targets = rng.integers(0, n, m).astype(np.int32)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=offsets[1:])
    topo = CCHTopology.build(n, offsets, targets)
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(5):
            w = r.integers(0, 20, m).astype(float)
            w[r.random(m) < 0.1] = np.inf
            ch = topo.customise(offsets, targets, w)
            D = oracle(n, offsets, targets, w)
            src, tgt = r.integers(0, n, 20), r.integers(0, n, 20)
            got = ch.table(src, tgt)[0]
            if not np.allclose(got, D[np.ix_(src, tgt)]):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
@example(16516)  # CI found it: augmenting along one arc cancelled the flow on the opposite arc (orphan vertex flows)
def test_flow_cut_is_a_minimum_vertex_cut(seed):
    """order._flow_cut (Dinic on the split graph) finds the maximum number of vertex-disjoint paths from
    the sources to the sinks (networkx's maximum flow on the same split graph), and its cut separates
    them."""
    import networkx as nx

    from geoengine.routing import order

    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 70))
    m = int(rng.integers(n, 4 * n))
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    o = np.argsort(u, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=offsets[1:])
    off, adj = order.undirected(n, offsets, v[o])
    role = np.zeros(n, np.int8)
    perm = rng.permutation(n)
    q = max(1, n // 4)
    role[perm[:q]], role[perm[-q:]] = 1, 2
    verts = rng.permutation(n).astype(np.int64)
    cut = np.zeros(n, np.int64)
    c, _ = order._flow_cut(verts, n, off, adj, order._reverse_slots(off, adj, np.empty(len(adj), np.int64)), np.full(n, 3, np.int64), 3, 29, role,
                           np.zeros(n, np.int8), np.zeros(len(adj), np.int32), np.zeros(2 * n, np.int64),
                           np.zeros(2 * n, np.int64), np.zeros(2 * n, np.int64), np.zeros(2 * n, np.int64), cut)
    g = nx.DiGraph()
    for x in range(n):
        g.add_edge(("i", x), ("o", x), capacity=1)
        for j in range(off[x], off[x + 1]):
            g.add_edge(("o", x), ("i", int(adj[j])))
        if role[x] == 1:
            g.add_edge("S", ("i", x))
        if role[x] == 2:
            g.add_edge(("o", x), "T")
    assert c == nx.maximum_flow_value(g, "S", "T")
    removed = set(cut[:c].tolist())
    h = nx.Graph()
    h.add_nodes_from(x for x in range(n) if x not in removed)
    h.add_edges_from((x, int(adj[j])) for x in range(n) for j in range(off[x], off[x + 1])
                     if x not in removed and int(adj[j]) not in removed)
    reach = set()
    for s in np.flatnonzero(role == 1).tolist():
        if s not in removed and s not in reach:
            reach |= nx.node_connected_component(h, s)
    assert not any(role[x] == 2 for x in reach)


def _undirected_by_sort(n, offsets, targets):
    """The symmetric CSR the way `undirected` made it before its kernel: sort and deduplicate int64 keys."""
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    t = np.asarray(targets, np.int64)
    keep = src != t
    key = np.unique(np.concatenate([src[keep] * n + t[keep], t[keep] * n + src[keep]]))
    off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(key // n, minlength=n), out=off[1:])
    return off, (key % n).astype(np.int32)


@settings(**SETTINGS)
@given(graphs())
def test_undirected_is_the_sorted_symmetric_csr(graph):
    """Self loops, parallel arcs and both directions of an edge give one sorted entry per neighbour."""
    from geoengine.routing.order import undirected

    n, offsets, targets = graph
    off, adj = undirected(n, offsets, targets)
    ref_off, ref_adj = _undirected_by_sort(n, offsets, targets)
    assert off.dtype == np.int64 and adj.dtype == np.int32
    np.testing.assert_array_equal(off, ref_off)
    np.testing.assert_array_equal(adj, ref_adj)


@settings(**SETTINGS)
@given(graphs())
def test_topology_written_while_built_is_the_saved_one(tmp_path_factory, graph):
    """`build(directory=...)` writes, array by array, the bytes `save` writes of the topology built in
    memory, and returns it memory-mapped; `check` accepts the graph's own arcs."""
    n, offsets, targets = graph
    d = tmp_path_factory.mktemp("topo")
    mem = CCHTopology.build(n, offsets, targets)
    mem.save(d / "saved")
    disk = CCHTopology.build(n, offsets, targets, directory=d / "built")
    assert sorted(p.name for p in (d / "built").iterdir()) == sorted(CCHTopology.files())
    for name in CCHTopology.files()[:-1]:
        assert (d / "built" / name).read_bytes() == (d / "saved" / name).read_bytes(), name
        assert isinstance(getattr(disk, name[:-4]), np.memmap)
    disk.check(offsets, targets)
    assert disk.info["edges"] == mem.edges


def test_check_counts_arcs_the_topology_does_not_connect():
    offsets = np.array([0, 1, 1, 1], np.int64)
    topo = CCHTopology.build(3, offsets, np.array([1], np.int32), rank=np.arange(3))
    topo.check(np.array([0, 1, 1, 1], np.int64), np.array([1], np.int32))
    topo.check(np.array([0, 1, 1, 1], np.int64), np.array([0], np.int32))  # a self loop needs no edge
    with pytest.raises(ValueError, match="2 arc"):
        topo.check(np.array([0, 0, 1, 2], np.int64), np.array([2, 0], np.int32))
    with pytest.raises(ValueError, match="out of range"):
        topo.check(offsets, np.array([3], np.int32))
