"""Property tests of the build on small random OSM files (hypothesis): splitting at junctions, cut
ways with missing nodes, lengths, oneways and restrictions, checked against plain recomputation."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geoengine.costing import edge_costs
from geoengine.geo import haversine_m
from geoengine.graph import Graph, turn_graph
from geoengine.graph.build import build_graph


@st.composite
def osm_files(draw):
    n = draw(st.integers(3, 14))
    coords = {i + 1: (9.5 + 0.001 * draw(st.integers(0, 30)), 47.0 + 0.001 * draw(st.integers(0, 30)))
              for i in range(n)}
    missing = set(draw(st.lists(st.sampled_from(sorted(coords)), max_size=2, unique=True)))
    ways = {}
    for w in range(draw(st.integers(1, 7))):
        seq = draw(st.lists(st.sampled_from(sorted(coords)), min_size=2, max_size=6))
        seq = [x for i, x in enumerate(seq) if i == 0 or x != seq[i - 1]]
        if len(seq) < 2:
            continue
        oneway = draw(st.sampled_from([None, "yes", "-1"]))
        ways[100 + w] = (seq, oneway)
    restrictions = []
    if len(ways) >= 2:
        for r in range(draw(st.integers(0, 3))):
            w1, w2 = draw(st.sampled_from(sorted(ways))), draw(st.sampled_from(sorted(ways)))
            common = sorted(set(ways[w1][0]) & set(ways[w2][0]))
            if common:
                via = draw(st.sampled_from(common))
                kind = draw(st.sampled_from(["no_left_turn", "only_straight_on", "no_u_turn"]))
                restrictions.append((900 + r, w1, via, w2, kind))
    return coords, missing, ways, restrictions


def _xml(coords, missing, ways, restrictions) -> str:
    out = ["<?xml version='1.0' encoding='UTF-8'?>", '<osm version="0.6">']
    for i, (lon, lat) in coords.items():
        if i not in missing:
            out.append(f'<node id="{i}" lat="{lat}" lon="{lon}" version="1"/>')
    for w, (seq, oneway) in ways.items():
        nds = "".join(f'<nd ref="{x}"/>' for x in seq)
        ow = f'<tag k="oneway" v="{oneway}"/>' if oneway else ""
        out.append(f'<way id="{w}" version="1">{nds}<tag k="highway" v="residential"/>{ow}</way>')
    for rid, w1, via, w2, kind in restrictions:
        out.append(f'<relation id="{rid}" version="1"><member type="way" ref="{w1}" role="from"/>'
                   f'<member type="node" ref="{via}" role="via"/><member type="way" ref="{w2}" role="to"/>'
                   f'<tag k="type" v="restriction"/><tag k="restriction" v="{kind}"/></relation>')
    out.append("</osm>")
    return "\n".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(osm_files())
def test_build_matches_plain_recomputation(tmp_path_factory, case):
    coords, missing, ways, restrictions = case
    d = tmp_path_factory.mktemp("prop")
    (d / "x.osm").write_text(_xml(coords, missing, ways, restrictions))
    build_graph(d / "x.osm", d / "g")
    g = Graph.open(d / "g")

    # pieces between consecutive present nodes of each way
    pieces = []
    for w, (seq, _ow) in ways.items():
        for a, b in zip(seq[:-1], seq[1:], strict=True):
            if a not in missing and b not in missing:
                pieces.append((w, a, b))
    total = sum(float(haversine_m(coords[a][1], coords[a][0], coords[b][1], coords[b][0])) for _w, a, b in pieces)
    assert np.isclose(float(np.sum(g.seg_length)), total, atol=1e-6)
    assert (g.n_segments == 0) == (not pieces)
    if not pieces:
        return
    # nodes shared by pieces of different ways (or used twice) are junctions
    use = {}
    for _w, a, b in pieces:
        for x in (a, b):
            use[x] = use.get(x, 0) + 1
    vertices = set(np.asarray(g.node_osm_id).tolist())
    interior_twice = {x for x, c in use.items() if c > 2}
    assert interior_twice <= vertices
    # per way, the segments' lengths add up to that way's present pieces
    for w in ways:
        want = sum(float(haversine_m(coords[a][1], coords[a][0], coords[b][1], coords[b][0])) for ww, a, b in pieces if ww == w)
        got = float(np.asarray(g.seg_length)[np.asarray(g.seg_way) == w].sum())
        assert np.isclose(got, want, atol=1e-6)
    # oneways
    for w, (_seq, ow) in ways.items():
        e = g.edges_of_way(w)
        if not len(e):
            continue
        fwd, bwd = g.mode_mask("auto")[e[e % 2 == 0]], g.mode_mask("auto")[e[e % 2 == 1]]
        assert fwd.all() == fwd.any() == (ow != "-1")
        assert bwd.all() == bwd.any() == (ow != "yes")
    # restrictions: no arc from the from way into the to way at the via node (cars), when resolved
    cost, _t, length = edge_costs(g, "auto")
    offsets, targets, _w, _s = turn_graph(g, cost, length, mode="auto")
    src = np.repeat(np.arange(g.n_edges), np.diff(offsets))
    arcs = set(zip(src.tolist(), targets.tolist(), strict=True))
    only_allowed: dict[int, set[int]] = {}  # several only_* from one edge: any of their to edges
    for _rid, w1, via, w2, kind in restrictions:
        v = g.node_of_osm(via)
        if v is not None and kind.startswith("only_"):
            outs = {int(e) for e in g.edges_of_way(w2) if g.edge_src[e] == v}
            for a in (int(e) for e in g.edges_of_way(w1) if g.edge_dst[e] == v):
                if outs:
                    only_allowed.setdefault(a, set()).update(outs)
    for _rid, w1, via, w2, kind in restrictions:
        v = g.node_of_osm(via)
        if v is None:
            continue
        ins = [int(e) for e in g.edges_of_way(w1) if g.edge_dst[e] == v]
        outs = [int(e) for e in g.edges_of_way(w2) if g.edge_src[e] == v]
        if not ins or not outs:
            continue  # a member clipped away: the relation is unresolved and binds nothing
        for a in ins:
            if kind.startswith("no_"):
                assert not any((a, b) in arcs for b in outs)
            else:
                assert all(b in only_allowed[a] for (x, b) in arcs if x == a)
    # arcs always join edges end to start and never U-turn away from a dead end
    assert np.array_equal(g.edge_dst[src], g.edge_src[targets])
    usable = np.isfinite(cost)
    outdeg = np.bincount(np.asarray(g.edge_src)[usable], minlength=g.n_nodes)
    u = targets == (src ^ 1)
    assert np.all(outdeg[g.edge_dst[src[u]]] == 1)


def test_segment_lengths_summed_in_chunks_equal_one_pass(tmp_path, monkeypatch, shared_data_dir):
    """Segment lengths are summed over chunks of whole segments to bound memory: on a real extract the
    arrays are identical, to the bit, whatever the chunk size."""
    from geoengine.graph import build as B

    path = shared_data_dir / "andorra" / "andorra.osm.pbf"
    B.build_graph(path, tmp_path / "one")
    monkeypatch.setattr(B, "PIECE_CHUNK_SEGMENTS", 97)
    B.build_graph(path, tmp_path / "many")
    for f in sorted((tmp_path / "one").glob("*.npy")):
        a, b = np.load(f), np.load(tmp_path / "many" / f.name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), f.name
