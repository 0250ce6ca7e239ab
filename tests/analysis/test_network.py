"""engine.network: documented arrays and exports whose shortest paths equal the router's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from geoengine.errors import InvalidRequest


def _sample_nodes(net, n, seed=3):
    rng = np.random.default_rng(seed)
    return rng.choice(np.flatnonzero(net.in_component), size=n, replace=False)


def test_arrays_are_the_usable_edges(andorra):
    net = andorra.network("auto")
    g = andorra.graph
    prof = andorra.router.profile("auto")
    assert net.n_nodes == g.n_nodes
    assert net.n_edges == int(prof.usable.sum())
    assert np.array_equal(net.src, np.asarray(g.edge_src)[net.edge_id])
    assert np.array_equal(net.dst, np.asarray(g.edge_dst)[net.edge_id])
    assert np.all(np.isfinite(net.cost)) and np.all(net.time_s > 0) and np.all(net.length_m >= 0)
    assert set(net.edges()) == {"src", "dst", "length_m", "time_s", "cost", "edge_id", "way_id"}
    assert set(net.nodes()) == {"node_id", "lon", "lat", "osm_id", "in_component"}
    # one-way streets: some car edges have no reverse twin in the export
    assert len(set(net.edge_id.tolist()) ^ {e ^ 1 for e in net.edge_id.tolist()}) > 0


def test_shortest_lengths_equal_the_router(andorra):
    """Pedestrian with shortest=True has no turn penalty or restriction: the junction graph's shortest
    lengths equal engine.matrix's distances between the same junctions."""
    opts = {"shortest": True}
    net = andorra.network("pedestrian", opts)
    nodes = _sample_nodes(net, 12)
    d = dijkstra(net.to_scipy("length_m"), indices=nodes)[:, nodes]
    pts = np.column_stack([net.lon[nodes], net.lat[nodes]])
    m = andorra.matrix(pts, pts, "pedestrian", opts)
    assert np.isfinite(d).all()
    # the router sums decimetre-rounded arc lengths: equal within rounding
    np.testing.assert_allclose(m.distance_m, d, rtol=1e-3, atol=0.5)


def test_time_equals_route_time_for_pedestrians(andorra):
    """Default pedestrian routes minimise cost; the export's cost-shortest paths cost the same."""
    net = andorra.network("pedestrian")
    nodes = _sample_nodes(net, 8, seed=5)
    cost = dijkstra(net.to_scipy("cost"), indices=nodes)[:, nodes]
    _, pred = dijkstra(net.to_scipy("cost"), indices=nodes, return_predecessors=True)
    csr_t = net.to_scipy("time_s")
    pts = np.column_stack([net.lon[nodes], net.lat[nodes]])
    m = andorra.matrix(pts, pts, "pedestrian")
    # time along the export's cheapest path = the router's time (same path, up to ties)
    for i in range(len(nodes)):
        for j in range(len(nodes)):
            v, t = nodes[j], 0.0
            while v != nodes[i]:
                u = pred[i, v]
                t += csr_t[u, v]
                v = u
            assert m.time_s[i, j] == pytest.approx(t, rel=2e-3, abs=0.5)
    assert np.isfinite(cost).all()


def test_networkx_and_igraph_agree_with_scipy(andorra):
    import networkx as nx

    net = andorra.network("auto")
    nodes = _sample_nodes(net, 5, seed=11)
    ref = dijkstra(net.to_scipy("time_s"), indices=nodes)
    g = net.to_networkx()
    assert g.number_of_nodes() == net.n_nodes and g.number_of_edges() == net.n_edges
    assert g.nodes[int(nodes[0])]["x"] == net.lon[nodes[0]]
    for k, s in enumerate(nodes.tolist()):
        lengths = nx.single_source_dijkstra_path_length(g, s, weight="time_s")
        got = np.full(net.n_nodes, np.inf)
        got[list(lengths)] = list(lengths.values())
        np.testing.assert_allclose(got, ref[k], rtol=1e-12)
    simple = net.to_networkx(multigraph=False)
    lengths = nx.single_source_dijkstra_path_length(simple, int(nodes[0]), weight="cost")
    ref_c = dijkstra(net.to_scipy("cost"), indices=nodes[0])
    assert max(abs(lengths[v] - ref_c[v]) for v in lengths) < 1e-6
    ig = pytest.importorskip("igraph")
    gi = net.to_igraph()
    assert isinstance(gi, ig.Graph) and gi.vcount() == net.n_nodes and gi.ecount() == net.n_edges
    d = np.asarray(gi.distances(source=nodes.tolist(), weights="time_s", mode="out"))
    np.testing.assert_allclose(d, ref, rtol=1e-12)


def test_turn_graph_is_the_routers(andorra):
    net = andorra.network("auto")
    tg = net.turns()
    off, tgt, w, _ = andorra.router.profile("auto").turn_csr()
    assert np.array_equal(tg.offsets, off) and np.array_equal(tg.targets, tgt)
    csr = tg.to_scipy("cost")
    assert csr.shape == (andorra.graph.n_edges, andorra.graph.n_edges)
    assert (tg.time_s >= 0).all() and np.isfinite(tg.length_m).all()


def test_bad_weight_and_costing(andorra):
    net = andorra.network("auto")
    with pytest.raises(InvalidRequest) as exc:
        net.to_scipy("speed")
    assert exc.value.errors[0].field == "weight"
    with pytest.raises(InvalidRequest):
        andorra.network("hovercraft")
