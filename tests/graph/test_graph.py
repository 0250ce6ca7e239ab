"""The graph stage on the real sample extracts: storage, invariants, oneways, access, clipped input."""

from __future__ import annotations

import json

import numpy as np
import osmium
import pytest

from geoengine.bundle import Bundle, is_mapped
from geoengine.geo import haversine_m
from geoengine.graph import Graph
from geoengine.graph import tags as T


def test_graph_loads_memory_mapped_with_manifest_counts(build_region):
    for region in ("andorra", "liechtenstein"):
        bundle = Bundle.open(build_region(region))
        g = Graph.open(bundle.stage_dir("graph"))
        assert is_mapped(g.edge_src) and is_mapped(g.shape_lon)
        counts = bundle.stages["graph"]["counts"]
        assert counts["edges"] == g.n_edges == 2 * g.n_segments
        assert counts["nodes"] == g.n_nodes > 1000
        assert bundle.stages["graph"]["outputs"]  # every output checked by Bundle.open


def test_missing_graph_file_is_named(tmp_path, andorra_graph):
    import shutil

    from geoengine.errors import BundleError

    d = tmp_path / "graph"
    shutil.copytree(andorra_graph.path, d)
    (d / "edge_speed.npy").unlink()
    with pytest.raises(BundleError, match="edge_speed.npy"):
        Graph.open(d)


@pytest.mark.parametrize("name", ["andorra_graph", "liechtenstein_graph"])
def test_graph_invariants(name, request):
    g: Graph = request.getfixturevalue(name)
    src, dst = np.asarray(g.edge_src), np.asarray(g.edge_dst)
    assert np.array_equal(src[0::2], g.seg_u) and np.array_equal(dst[0::2], g.seg_v)
    assert np.array_equal(src[1::2], g.seg_v) and np.array_equal(dst[1::2], g.seg_u)
    off = np.asarray(g.shape_offsets)
    assert off[0] == 0 and np.all(np.diff(off) >= 2)
    # shapes start and end at their junction nodes
    assert np.allclose(g.shape_lon[off[:-1]], g.node_lon[g.seg_u]) and np.allclose(g.shape_lat[off[1:] - 1], g.node_lat[g.seg_v])
    # lengths are the sum of the shape's pieces
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    seg_of = np.repeat(np.arange(g.n_segments), np.diff(off))
    same = seg_of[1:] == seg_of[:-1]
    pieces = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])
    total = np.bincount(seg_of[:-1][same], weights=pieces[same], minlength=g.n_segments)
    assert np.allclose(total, g.seg_length)
    # out-edge CSR lists exactly the edges leaving each node
    noff, nout = np.asarray(g.node_out_offsets), np.asarray(g.node_out_edges)
    assert np.array_equal(np.repeat(np.arange(g.n_nodes), np.diff(noff)), src[nout])
    # every edge is usable by some mode in at least one of its two directions
    acc = np.asarray(g.edge_access)
    assert np.all((acc[0::2] | acc[1::2]) != 0)


def test_edge_shape_and_names(liechtenstein_graph):
    g = liechtenstein_graph
    e = int(np.flatnonzero(np.asarray(g.seg_name) > 0)[0]) * 2
    lon, lat = g.edge_shape(e)
    rlon, rlat = g.edge_shape(e ^ 1)
    assert np.array_equal(lon, rlon[::-1]) and np.array_equal(lat, rlat[::-1])
    assert g.edge_name(e) == g.edge_name(e ^ 1) != ""
    half_lon, half_lat = g.edge_shape(e, 0.0, 0.5)
    d_half = haversine_m(half_lat[:-1], half_lon[:-1], half_lat[1:], half_lon[1:]).sum()
    assert d_half == pytest.approx(g.seg_length[e >> 1] / 2, rel=1e-3)
    plon, _plat = g.path_shape([e, e ^ 1])
    assert len(plon) == 2 * len(lon) - 1


def test_real_oneway_is_honoured(liechtenstein_graph, sample, find_way):
    g = liechtenstein_graph
    pbf = sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf")
    way = find_way(pbf, lambda t: t.get("oneway") == "yes" and t.get("highway") in ("residential", "secondary", "tertiary", "primary", "unclassified") and "junction" not in t and "oneway:bicycle" not in t and "cycleway" not in t)
    edges = g.edges_of_way(way)
    assert len(edges)
    fwd, bwd = edges[edges % 2 == 0], edges[edges % 2 == 1]
    assert g.mode_mask("auto")[fwd].all() and not g.mode_mask("auto")[bwd].any()
    assert g.mode_mask("pedestrian")[bwd].all()  # walkers ignore oneway


def test_roundabout_implies_oneway(andorra_graph, sample, find_way):
    g = andorra_graph
    way = find_way(sample("andorra/andorra.osm.pbf"), lambda t: t.get("junction") == "roundabout" and "oneway" not in t and "highway" in t)
    edges = g.edges_of_way(way)
    assert g.mode_mask("auto")[edges[edges % 2 == 0]].all()
    assert not g.mode_mask("auto")[edges[edges % 2 == 1]].any()


def test_footway_for_pedestrians_not_cars(liechtenstein_graph, sample, find_way):
    g = liechtenstein_graph
    way = find_way(sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf"),
                    lambda t: t.get("highway") == "footway" and not set(t) & {"access", "motor_vehicle", "motorcar", "vehicle"})
    edges = g.edges_of_way(way)
    assert g.mode_mask("pedestrian")[edges].all()
    assert not g.mode_mask("auto")[edges].any() and not g.mode_mask("truck")[edges].any()


def test_toll_speed_and_units_on_real_and_handmade(andorra_graph, handmade_graph):
    flags = np.asarray(andorra_graph.seg_flags)
    assert ((flags & T.F_TOLL) != 0).any()  # the Envalira tunnel toll road
    g = handmade_graph
    mw = g.edges_of_way(101)
    assert g.edge_speed[mw[0]] == pytest.approx(60 * 1.609344, rel=1e-4)  # "60 mph"
    assert not g.mode_mask("auto")[mw[1]]  # motorway: implied oneway
    assert not g.mode_mask("pedestrian")[mw].any()
    sec = g.edges_of_way(103)[0] >> 1
    lim = dict(zip(T.LIMIT_NAMES, g.seg_limits[sec], strict=True))
    assert lim["maxwidth"] == pytest.approx(7 * 0.3048, rel=1e-4)
    assert lim["maxaxles"] == 3 and lim["maxlength"] == 12 and lim["maxaxleload"] == 8
    assert g.seg_flags[sec] & T.F_HAZMAT_NO
    ferry = g.edges_of_way(102)
    assert g.seg_flags[ferry[0] >> 1] & T.F_FERRY
    # duration 30 min over the ferry's length
    assert g.edge_speed[ferry[0]] == pytest.approx(g.seg_length[ferry[0] >> 1] / 1800 * 3.6, rel=1e-3)
    dest = g.edges_of_way(104)
    assert (np.asarray(g.edge_dest_only)[dest] & T.AUTO).all()
    mr = g.edges_of_way(106)
    assert not g.mode_mask("bicycle")[mr].any() and g.mode_mask("auto")[mr].all()


def test_helsinki_clipped_extract_builds_and_reports_cut_ways(build_region):
    bundle = Bundle.open(build_region("helsinki"))
    counts = bundle.stages["graph"]["counts"]
    assert counts["ways_cut"] > 0 and counts["missing_node_refs"] > 0
    g = Graph.open(bundle.stage_dir("graph"))
    assert np.isfinite(np.asarray(g.shape_lon)).all() and np.isfinite(np.asarray(g.node_lat)).all()
    assert g.n_edges == counts["edges"] > 1000
    meta = json.loads((bundle.stage_dir("graph") / "graph.json").read_text())
    assert meta["counts"]["ways_cut"] == counts["ways_cut"]


def test_clipped_way_is_cut_not_dropped(build_region, sample, find_way):
    """A way with some nodes outside the extract keeps its pieces between present nodes."""
    g = Graph.open(Bundle.open(build_region("helsinki")).stage_dir("graph"))
    pbf = sample("helsinki/helsinki.osm.pbf")
    found = None
    for w in osmium.FileProcessor(str(pbf)).with_locations().with_filter(osmium.filter.KeyFilter("highway")):
        if not w.is_way() or w.tags.get("highway") not in ("residential", "primary", "secondary", "tertiary", "footway"):
            continue
        valid = [n.location.valid() for n in w.nodes]
        # a way whose first node is missing but which has >= 2 present nodes after it
        if not valid[0] and sum(valid) >= 2 and all(valid[valid.index(True):]):
            found = w.id
            break
    assert found is not None
    assert len(g.edges_of_way(found)) >= 2


def test_path_info_reports_names_and_lengths(liechtenstein_graph):
    g = liechtenstein_graph
    named = np.flatnonzero(np.asarray(g.seg_name) > 0)[:3] * 2
    info = g.path_info(named)
    assert info["name"] == [g.edge_name(e) for e in named] and all(info["name"])
    assert np.array_equal(info["length_m"], g.edge_length[named])
    assert list(info["way"]) == [g.edge_way(e) for e in named]


def test_traffic_signals_counted_per_direction(liechtenstein_graph, sample):
    """Signals on a segment's shape count for both directions; a signal at a junction counts for the
    edges that end there."""
    g = liechtenstein_graph
    pbf = sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf")
    signal_nodes = {o.id for o in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.KeyFilter("highway"))
                    if o.is_node() and o.tags.get("highway") == "traffic_signals"}
    sig = np.asarray(g.edge_signals)
    assert sig.sum() > 0
    junction_signals = [v for v in range(g.n_nodes) if int(g.node_osm_id[v]) in signal_nodes]
    assert junction_signals
    for v in junction_signals[:20]:
        ending = np.flatnonzero(np.asarray(g.edge_dst) == v)
        assert (sig[ending] >= 1).all()
    from geoengine.costing import edge_costs
    from geoengine.costing.common import MOTOR_SIGNAL_DELAY_S

    _c, t, length = edge_costs(g, "auto")
    ok = np.isfinite(t)
    with_sig = ok & (sig > 0)
    # each signal adds the motor costings' delay (2 s, OSRM car.lua's) to the car time
    plain = np.asarray(g.edge_speed)
    assert np.all(t[with_sig] >= length[with_sig] / (plain[with_sig] / 3.6) + MOTOR_SIGNAL_DELAY_S - 1e-6)
