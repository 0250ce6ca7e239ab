"""The bundle's CCH on real road graphs (Andorra, Liechtenstein): for every costing, every option of
its option table at its minimum and at its maximum (booleans both ways, enums at both ends), the
customised hierarchy gives the same costs as Dijkstra (scipy csgraph on the same turn graph) for
200 random pairs per option set; avoid areas (blocked edges) likewise."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from osm_graph import check_against_dijkstra

from geoengine.costing import COSTINGS, TABLES, default_options, parse_costing_options
from geoengine.routing.cch import CCHTopology
from geoengine.routing.profile import Profile

N_SRC, N_TGT = 4, 50  # 200 pairs per option set


def extreme_option_sets(costing):
    """[(label, raw options)] : each option at its minimum and at its maximum."""
    out = []
    for opt in TABLES[costing]:
        if opt.type == "boolean":
            vals = [False, True]
        elif opt.enum:
            vals = [opt.enum[0], opt.enum[-1]]
        elif opt.minimum is not None and opt.maximum is not None:
            vals = [opt.minimum, opt.maximum]
            if opt.type == "integer":
                vals = [int(v) for v in vals]
        else:
            continue
        for v in vals:
            out.append((f"{opt.name}={v}", {opt.name: v}))
    return out


@pytest.fixture(scope="module", params=["andorra", "liechtenstein"])
def bundle(request, engine_for):
    engine = engine_for(request.param)
    topo = CCHTopology.load(engine.bundle.path / "routing" / "cch")
    return request.param, engine.graph, topo


@pytest.mark.parametrize("costing", COSTINGS)
def test_every_option_extreme_equals_dijkstra(bundle, costing):
    name, graph, topo = bundle
    rng = np.random.default_rng(zlib.crc32(f"{name}/{costing}".encode()))
    found = 0
    sets = [("defaults", None), *extreme_option_sets(costing)]
    for label, raw in sets:
        opts = default_options(costing) if raw is None else parse_costing_options(costing, raw)
        try:
            found += check_against_dijkstra(graph, topo, Profile(graph, costing, opts), rng)
        except AssertionError as exc:
            raise AssertionError(f"{name} {costing} {label}: {exc}") from exc
    assert found > 0  # the pairs are not all unreachable


def test_blocked_edges_equal_dijkstra(bundle):
    name, graph, topo = bundle
    rng = np.random.default_rng(11)
    blocked = np.zeros(graph.n_edges, bool)
    segs = rng.choice(graph.n_edges // 2, graph.n_edges // 20, replace=False)
    blocked[2 * segs] = True
    blocked[2 * segs + 1] = True
    for costing in ("auto", "pedestrian"):
        assert check_against_dijkstra(graph, topo, Profile(graph, costing, blocked=blocked), rng) > 0


def test_parallel_order_is_the_serial_order(bundle, monkeypatch):
    """Nested dissection on two threads (parts cut at once from the second level down) gives the same
    ranks as on one, on a real turn graph, and a valid order: a permutation whose supergraph is as
    small."""
    from geoengine.routing import order
    from geoengine.routing.cch import CCHTopology
    from geoengine.routing.customise import edge_middles, full_turn_csr

    _, graph, _ = bundle
    off, tgt = full_turn_csr(graph)
    lon, lat = edge_middles(graph)
    n = graph.n_edges
    monkeypatch.setattr(order, "PARALLEL_MIN_PART", 300)  # the extract is small: share its top levels too
    one = order.nested_dissection(n, off, tgt, lon, lat, threads=1)
    two = order.nested_dissection(n, off, tgt, lon, lat, threads=2)
    three = order.nested_dissection(n, off, tgt, lon, lat, threads=3)
    assert np.array_equal(np.sort(one), np.arange(n))
    assert np.array_equal(one, two) and np.array_equal(one, three)
    assert CCHTopology.build(n, off, tgt, two).edges == CCHTopology.build(n, off, tgt, one).edges


@pytest.mark.parametrize("costing", COSTINGS)
def test_stage_checks_the_weights_the_router_uses(bundle, costing):
    """The routing stage checks each costing's weights slice by slice (`stage.costing_weights`): the
    slices, joined, are the arcs and weights of `Profile.turn_csr`, which the router customises."""
    from geoengine.routing.stage import costing_weights

    _, graph, _ = bundle
    prof = Profile(graph, costing, default_options(costing))
    _off, tgt, w, _packed = prof.turn_csr()
    slices = list(costing_weights(graph, prof, arcs_per_slice=max(len(tgt) // 7, 1)))
    assert len(slices) >= 5
    assert np.concatenate([t for t, _ in slices]).tobytes() == tgt.tobytes()
    assert np.concatenate([x for _, x in slices]).tobytes() == w.tobytes()


def test_stage_topology_is_the_topology_of_every_possible_turn(bundle, tmp_path):
    """build_topology (the stage's, written while built) gives the bytes of CCHTopology.build on the
    graph's full turn CSR, and that topology connects every possible turn."""
    from geoengine.routing.customise import build_topology, edge_middles, full_turn_csr, possible_turns

    _, graph, _ = bundle
    off, tgt = full_turn_csr(graph)
    p_off, p_tgt = possible_turns(type("G", (), {k: getattr(graph, k) for k in
                                                  ("edge_dst", "node_out_offsets", "node_out_edges")})())
    assert p_off.tobytes() == off.tobytes() and p_tgt.tobytes() == tgt.tobytes()
    lon, lat = edge_middles(graph)
    CCHTopology.build(graph.n_edges, off, tgt, lon=lon, lat=lat, directory=tmp_path / "ref")
    topo = build_topology(graph, tmp_path / "stage")
    for name in CCHTopology.files()[:-1]:
        assert (tmp_path / "stage" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    topo.check(off, tgt)
    assert topo.edges > graph.n_edges
