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


def _car_lua_obstacles(pbf):
    """OSM node id -> (seconds along the way, against it) as OSRM car.lua's process_node and
    lib/obstacles.lua give them, read here from the file's tags."""
    out = {}
    for o in osmium.FileProcessor(str(pbf)).with_filter(osmium.filter.KeyFilter("highway", "barrier")):
        if not o.is_node():
            continue
        t = dict(o.tags)
        fw = bw = 0.0
        hw = t.get("highway")
        if hw == "traffic_signals":
            d = t.get("traffic_signals:direction") or t.get("direction")
            fw, bw = (2.0 if d != "backward" else 0.0), (2.0 if d != "forward" else 0.0)
        elif hw == "give_way":
            d = t.get("direction")
            fw, bw = (1.0 if d != "backward" else 0.0), (1.0 if d != "forward" else 0.0)
        elif hw == "stop" and t.get("stop") != "minor":
            d = t.get("direction")
            fw, bw = (2.0 if d != "backward" else 0.0), (2.0 if d != "forward" else 0.0)
        if t.get("barrier") in ("gate", "lift_gate") and not any(
                t.get(k) for k in ("motorcar", "motor_vehicle", "vehicle", "access")):
            fw, bw = fw + 60.0, bw + 60.0
        if fw or bw:
            out[o.id] = (fw, bw)
    return out


def test_car_obstacles_per_directed_edge_are_car_lua_s(liechtenstein_graph, sample):
    """`edge_obstacle_s`: each directed edge carries the seconds of car.lua's obstacles on its shape
    after its start point (signals in their `traffic_signals:direction`, give-way and stop signs,
    gates without access tags), counted here from the file's node tags and the shape's OSM node ids;
    the motor costings add them to the edge's time."""
    g = liechtenstein_graph
    obs = _car_lua_obstacles(sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf"))
    assert any(fw != bw for fw, bw in obs.values())  # a signal for one direction only
    assert any(fw >= 60 for fw, _ in obs.values())  # a gate
    sid, off = np.asarray(g.shape_osm_id), np.asarray(g.shape_offsets)
    got = np.asarray(g.edge_obstacle_s)
    hit_seg = np.unique(np.searchsorted(off, np.flatnonzero(np.isin(sid, list(obs))), side="right") - 1)
    assert len(hit_seg) >= 10
    rng = np.random.default_rng(5)
    check = np.unique(np.concatenate([hit_seg, rng.choice(g.n_segments, 500, replace=False)]))
    for k in check.tolist():
        ids = sid[off[k]:off[k + 1]].tolist()
        fw = sum(obs.get(n, (0.0, 0.0))[0] for n in ids[1:])
        bw = sum(obs.get(n, (0.0, 0.0))[1] for n in ids[:-1])
        assert got[2 * k] == pytest.approx(fw) and got[2 * k + 1] == pytest.approx(bw), k
    # a one-direction signal: the edges through it differ by its 2 s
    one_way = [n for n, (fw, bw) in obs.items() if fw != bw and fw + bw == 2.0]
    seg_dir = [k for k in hit_seg.tolist() if any(n in one_way for n in sid[off[k] + 1:off[k + 1] - 1].tolist())]
    assert seg_dir
    for k in seg_dir:
        assert got[2 * k] != got[2 * k + 1]
    from geoengine.costing import edge_costs

    _c, t, length = edge_costs(g, "auto")
    ok = np.isfinite(t) & (got > 0)
    assert ok.any()
    # each obstacle adds its seconds to the car's time: the time less them is the moving time
    moving = t - got
    plain = np.asarray(g.edge_speed)
    assert np.all(moving[ok] >= length[ok] / (np.maximum(plain[ok], 1.0) / 3.6) - 1e-6)


def test_ways_of_car_lua_s_graph_are_marked(liechtenstein_graph, sample):
    """`seg_car_lua` marks the segments of the ways OSRM car.lua keeps (read here from the file's way
    tags as car.lua's process_way reads them: a highway its speeds table has, or a car access tag in its
    whitelist; no blacklisted, unrestricted access): the roads its turn function counts at a junction.
    Private roads count though cars may not drive them; tracks without car access tags do not."""
    g = liechtenstein_graph
    speeds = {"motorway", "motorway_link", "trunk", "trunk_link", "primary", "primary_link", "secondary",
              "secondary_link", "tertiary", "tertiary_link", "unclassified", "residential", "living_street",
              "service"}
    white = {"yes", "motorcar", "motor_vehicle", "vehicle", "permissive", "designated", "hov"}
    black = {"no", "agricultural", "forestry", "emergency", "psv", "taxi", "share_taxi", "minibus", "bus", "foot",
             "emergency_vehicle", "restricted", "military", "official", "customers", "private", "delivery",
             "destination", "permit", "residents"}
    restricted = {"private", "delivery", "destination", "customers", "permit", "residents", "unknown"}
    want = {}
    pbf = sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf")
    for w in osmium.FileProcessor(str(pbf), osmium.osm.WAY).with_filter(osmium.filter.KeyFilter("highway", "route")):
        t = dict(w.tags)
        acc = next((t[k] for k in ("motorcar", "motor_vehicle", "vehicle", "access") if t.get(k)), None)
        keep = t.get("area") != "yes" and not (acc in black and acc not in restricted) \
            and not (t.get("highway") == "service" and t.get("service") == "emergency_access") \
            and (t.get("route") in ("ferry", "shuttle_train") or t.get("highway") in speeds or acc in white)
        want[w.id] = keep
    seg_way = np.asarray(g.seg_way)
    got = np.asarray(g.seg_car_lua)
    expect = np.array([want[int(x)] for x in seg_way.tolist()])
    np.testing.assert_array_equal(got, expect)
    cls, acc = np.asarray(g.seg_class), np.asarray(g.edge_access)
    car = ((acc[0::2] | acc[1::2]) & T.AUTO) != 0
    assert (got & ~car).any()  # private roads: in car.lua's graph, closed to geoengine's cars
    assert (car & ~got & (cls == T.CLASS["track"])).any()  # tracks geoengine's cars may drive, car.lua drops
