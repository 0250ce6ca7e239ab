"""The motor costings' turn delays follow OSRM car.lua's `process_turn` (the profile shipped with
osrm-bindings 26.10, which speeds_bench.py compares against): the seconds of every turn of a real
graph equal the Lua function's, written out here turn by turn from its source with `math.exp`; the
roads counted at a junction equal a count over the graph's segments; a route's time through the
classic CH and through the CCH customised with the same weights is the same."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geoengine.costing import (
    MotorTurns,
    edge_costs,
    motor_turn_seconds,
    turn_penalty,
)
from geoengine.geo import haversine_m
from geoengine.graph import tags as T
from geoengine.graph.turns import car_continuation, perceived_bearings, turn_base


def lua_process_turn(angle, roads, uturn, mode_change, roundabout):
    """car.lua's process_turn for a right-hand-traffic turn without obstacles (turn_penalty 7.5,
    turn_bias 1.075, oncoming_turn_penalty 2, u_turn_penalty 20), then OSRM's cast to whole tenths
    of a second (boost::numeric_cast of duration * 10: truncation)."""
    turn_penalty_s, turn_bias = 7.5, 1.075
    duration = 0.0
    if roads > 2 or mode_change or uturn:
        if angle >= 0:
            duration += turn_penalty_s / (1 + math.exp(-((13 / turn_bias) * angle / 180 - 6.5 * turn_bias)))
        else:
            duration += turn_penalty_s / (1 + math.exp(-((13 * turn_bias) * -angle / 180 - 6.5 / turn_bias)))
        crosses_oncoming = angle < 0
        if crosses_oncoming and not uturn and roads > 2 and not roundabout:
            sharpness = 1 / (1 + math.exp(-(13 * abs(angle) / 180 - 3.25)))
            duration += 2.0 * sharpness
        if uturn:
            duration += 20
    return math.trunc(duration * 10 + 1e-9) / 10


def test_model_equals_car_lua_on_a_grid():
    rng = np.random.default_rng(5)
    angle = np.concatenate([np.arange(-180.0, 180.5, 0.5), rng.uniform(-180, 180, 500)])
    for roads in (1, 2, 3, 4, 6):
        for uturn in (False, True):
            for mode_change in (False, True):
                for roundabout in (False, True):
                    n = len(angle)
                    got = motor_turn_seconds(angle, np.full(n, roads), np.full(n, uturn), np.full(n, mode_change),
                                             np.full(n, roundabout))
                    want = [lua_process_turn(a, roads, uturn, mode_change, roundabout) for a in angle.tolist()]
                    np.testing.assert_allclose(got, want, atol=1e-9)


def test_model_known_values():
    def one(angle, roads=4, uturn=False):
        return float(motor_turn_seconds(np.array([angle]), np.array([roads]), np.array([uturn]),
                                        np.array([False]), np.array([False]))[0])

    assert one(0.0) == 0.0  # straight on: 0.007 s, cut to tenths
    assert one(90.0) == pytest.approx(2.1)  # right: 7.5 / (1 + e^0.941)
    assert one(-90.0) == pytest.approx(7.3)  # left: 5.39 s plus 1.93 s across oncoming traffic
    assert one(-90.0) > one(90.0) > one(60.0) > one(-10.0) > one(10.0) == 0.0
    assert one(90.0, roads=2) == 0.0  # a bend where two roads meet
    assert 27.0 <= one(179.0, roads=1, uturn=True) <= 27.5  # U-turn at a dead end: 7.5 + 20


def test_roads_at_each_node_are_the_segments_the_mode_may_use(liechtenstein_graph):
    g = liechtenstein_graph
    base = turn_base(g)
    acc = np.asarray(g.edge_access)
    u, v = np.asarray(g.seg_u), np.asarray(g.seg_v)
    rng = np.random.default_rng(0)
    nodes = rng.choice(g.n_nodes, 400, replace=False)
    cls = np.asarray(g.seg_class)
    car_lua = np.asarray(g.seg_car_lua)  # the ways car.lua keeps (tests/graph: from the file's tags)
    for mode in ("auto", "bicycle", "pedestrian", "truck"):
        bit = T.MODE_BITS[mode]
        roads = base.roads(mode)
        for n in nodes.tolist():
            segs = [s for s in np.flatnonzero((u == n) | (v == n)).tolist()
                    if (car_lua[s] if mode in ("auto", "truck") else ((int(acc[2 * s]) | int(acc[2 * s + 1])) & bit) != 0)]
            want = len(segs) + sum(u[s] == v[s] for s in segs)
            assert roads[n] == want, (mode, n)
    # a footway joining a road is a junction for pedestrians, not for cars; a track cars may drive but
    # car.lua has no speed or car access tag for is none for cars either
    assert (base.roads("pedestrian") > base.roads("auto")).any()
    car_track = (cls == T.CLASS["track"]) & ((((acc[0::2] | acc[1::2]) & T.AUTO)) != 0) & ~car_lua
    assert car_track.any()
    ends = np.concatenate([u[car_track], v[car_track]])
    assert (base.roads("bicycle")[ends] > base.roads("auto")[ends]).any()


@pytest.mark.parametrize("costing", ["auto", "truck", "motorcycle"])
def test_turn_graph_weights_are_car_lua_per_arc(liechtenstein_graph, costing):
    """Every arc of the costing's turn graph costs cost[e2] plus car.lua's seconds for that turn
    (the junction's roads counted from the segments, U-turn, ferry, roundabout read here; the angle
    between the perceived bearings)."""
    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, costing)
    tp = turn_penalty(costing)
    assert isinstance(tp, MotorTurns)
    base = turn_base(g)
    off, tgt, w, _sec, idx = base.turn_graph(cost, length, mode=costing if costing != "motorcycle" else "motorcycle",
                                             turn_penalty=tp)
    pen = w - cost[tgt]
    e1 = np.repeat(np.arange(g.n_edges), np.diff(off))
    seg_ok = np.asarray(g.seg_car_lua)  # the roads of car.lua's graph meeting at the junction
    roads_at = np.bincount(np.concatenate([np.asarray(g.seg_u)[seg_ok], np.asarray(g.seg_v)[seg_ok]]),
                           minlength=g.n_nodes)
    flags = np.asarray(g.edge_flags)
    ps, pe = perceived_bearings(g)
    perceived = (ps[tgt].astype(np.float64) - pe[e1] + 540.0) % 360.0 - 180.0
    rng = np.random.default_rng(1)
    for k in rng.choice(len(tgt), 3000, replace=False).tolist():
        a, b = int(e1[k]), int(tgt[k])
        # the junction's roads in car.lua's graph, and the turn's own edges when they are not in it
        roads = int(roads_at[g.edge_dst[a]]) + (not seg_ok[a >> 1]) + (not seg_ok[b >> 1] and (a >> 1) != (b >> 1))
        want = lua_process_turn(float(perceived[k]), roads, b == (a ^ 1),
                                bool((flags[a] ^ flags[b]) & T.F_FERRY), bool((flags[a] | flags[b]) & T.F_ROUNDABOUT))
        assert pen[k] == pytest.approx(want, abs=1e-6), (a, b)
    # most arcs go straight through a node of two roads and cost nothing; every U-turn costs 20 s or more
    r_all = (roads_at[np.asarray(g.edge_dst)[e1]] + ~seg_ok[e1 >> 1]
             + (~seg_ok[tgt >> 1] & ((tgt >> 1) != (e1 >> 1))))
    two = r_all <= 2
    assert two.any() and np.all(pen[two & (tgt != (e1 ^ 1))] == 0.0)
    assert np.all(pen[tgt == (e1 ^ 1)] >= 20.0)


class _Shapes:
    """A graph-like object of hand-made polylines (lon, lat lists), residential roads; `roundabout`:
    which of them are roads of a roundabout (`edge_flags`)."""

    def __init__(self, lines, roundabout=None):
        self.shape_offsets = np.cumsum([0] + [len(x) for x in lines])
        self.shape_lon = np.array([p[0] for x in lines for p in x])
        self.shape_lat = np.array([p[1] for x in lines for p in x])
        self.seg_class = np.full(len(lines), T.CLASS["residential"], np.uint8)
        self.seg_flags = np.zeros(len(lines), np.uint32)
        if roundabout is not None:
            self.edge_flags = np.repeat(np.where(roundabout, T.F_ROUNDABOUT, 0), 2).astype(np.uint32)


def _east_north(x_m, y_m, lon0=9.5, lat0=47.1):
    return (lon0 + x_m / (111_195.0 * math.cos(math.radians(lat0))), lat0 + y_m / 111_195.0)


def test_perceived_bearings_look_past_the_junction_geometry():
    lines = [
        [_east_north(0, 0), _east_north(0, 200)],  # straight north
        [_east_north(0, 0), _east_north(0, 30), _east_north(0, 200)],  # straight, three points
        [_east_north(0, 0), _east_north(20, 20), _east_north(20, 200)],  # a long first piece: its own bearing
        [_east_north(0, 0), _east_north(1.5, 5), _east_north(0, 15), _east_north(0, 200)],  # a kink within a lane
        [_east_north(0, 0), _east_north(5, 5), _east_north(200, 5)],  # a short bend, then east
    ]
    start, end = perceived_bearings(_Shapes(lines))
    assert start[0] == pytest.approx(0.0, abs=1e-3) and start[2] == pytest.approx(0.0, abs=1e-3)
    assert start[4] == pytest.approx(45.0, abs=0.1)  # the first piece is 28 m long
    assert abs(start[6]) < 3.0 or abs(start[6] - 360) < 3.0  # the kink is smoothed over: about north
    # the road bends at 7 m: the point 10 m along (the first piece's end plus 3 m east) sets the bearing
    assert 45.0 < start[8] < 70.0
    # reversed edges: the same lines seen from their other end
    np.testing.assert_allclose((end[0::2] + 180.0) % 360.0, start[1::2], atol=0.01)  # great circles: not exact
    np.testing.assert_allclose((start[0::2] + 180.0) % 360.0, end[1::2], atol=0.01)


def test_roundabout_roads_bear_to_the_point_2_m_along():
    """On a roundabout's road OSRM reads the point 2 m along (coordinate_extractor.cpp, roundabouts),
    not 10-40 m of its curve: the turn from one piece of a roundabout into the next is nearly straight."""
    arc = [_east_north(20 * math.sin(math.radians(t)), 20 * math.cos(math.radians(t)) - 20) for t in range(0, 100, 10)]
    plain, _ = perceived_bearings(_Shapes([arc]))
    rb_start, rb_end = perceived_bearings(_Shapes([arc], roundabout=[True]))
    # the arc's chord to the point 2 m along: within a few degrees of its tangent (east, 90)
    assert abs(float(rb_start[0]) - 90.0) < 6.0
    assert abs(float(plain[0]) - 90.0) > 10.0  # a plain road's look-ahead reads the curve
    # at its other end the arc has turned a quarter round: it arrives heading south
    assert abs(float(rb_end[0]) - 180.0) < 6.0
    # a two-point roundabout road keeps its own bearing
    two_s, _ = perceived_bearings(_Shapes([[_east_north(0, 0), _east_north(10, 0)]], roundabout=[True]))
    assert float(two_s[0]) == pytest.approx(90.0, abs=1e-3)


def test_perceived_bearings_on_a_real_graph(liechtenstein_graph):
    g = liechtenstein_graph
    start, end = perceived_bearings(g)
    off = np.asarray(g.shape_offsets)
    nxt = car_continuation(g)
    two = np.flatnonzero(np.diff(off) == 2)  # straight segments: the first piece is the whole road ...
    chained = two[nxt[2 * two] >= 0]
    two = two[nxt[2 * two] < 0]  # ... unless the road goes on through a node car.lua compresses
    d = (start[2 * two] - np.asarray(g.edge_bearing_start)[2 * two] + 540.0) % 360.0 - 180.0
    assert np.abs(d).max() < 1e-3
    assert len(chained) > 50
    back = (end[0::2].astype(np.float64) + 180.0 - start[1::2] + 540.0) % 360.0 - 180.0
    assert np.abs(back).max() < 0.1  # the same line seen from its other end (great circles: nearly)
    # a roundabout's road (more than two points, not continued): the bearing to the point 2 m along
    rb = (np.asarray(g.edge_flags)[0::2] & T.F_ROUNDABOUT) != 0
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    ring = np.flatnonzero(rb & (np.diff(off) > 2) & (nxt[0::2] < 0))
    assert len(ring) > 20
    for s in ring[:200].tolist():
        a = off[s]
        seg = haversine_m(lat[a:off[s + 1] - 1], lon[a:off[s + 1] - 1], lat[a + 1:off[s + 1]], lon[a + 1:off[s + 1]])
        k = int(np.searchsorted(np.cumsum(seg), 2.0))  # the piece holding the point 2 m along
        if k >= len(seg) or seg[k] < 0.5:
            continue
        t = (2.0 - (np.cumsum(seg)[k] - seg[k])) / seg[k]
        px, py = lon[a + k] + t * (lon[a + k + 1] - lon[a + k]), lat[a + k] + t * (lat[a + k + 1] - lat[a + k])
        want = math.degrees(math.atan2((px - lon[a]) * math.cos(math.radians(lat[a])), py - lat[a])) % 360.0
        assert abs((float(start[2 * s]) - want + 540.0) % 360.0 - 180.0) < 1.0, s
    # where shapes curve near a junction, the two views differ
    diff = np.abs((start - np.asarray(g.edge_bearing_start) + 540.0) % 360.0 - 180.0)
    assert (diff > 10).mean() > 0.01


def test_look_ahead_continues_through_nodes_car_lua_compresses(liechtenstein_graph):
    """Where a road goes on through a node that is no junction in car.lua's graph (two of its roads
    meet there, of one name and class: a footway crossing, say), the perceived bearing is the one of
    the road as one polyline: the same as `perceived_bearings` of that polyline alone."""
    g = liechtenstein_graph
    nxt = car_continuation(g)
    u, v = np.asarray(g.seg_u), np.asarray(g.seg_v)
    car = np.asarray(g.seg_car_lua)
    ends = np.concatenate([u[car], v[car]])
    deg = np.bincount(ends, minlength=g.n_nodes)
    name, cls = np.asarray(g.seg_name), np.asarray(g.seg_class)
    e = np.flatnonzero(nxt >= 0)
    assert len(e) > 100
    for x in e[:300].tolist():
        y = int(nxt[x])
        node = v[x >> 1] if x % 2 == 0 else u[x >> 1]
        start_y = u[y >> 1] if y % 2 == 0 else v[y >> 1]
        assert start_y == node and deg[node] == 2 and car[x >> 1] and car[y >> 1]
        assert name[x >> 1] == name[y >> 1] and cls[x >> 1] == cls[y >> 1] and (x >> 1) != (y >> 1)
    start, _end = perceived_bearings(g)
    off = np.asarray(g.shape_offsets)
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    res = e[(cls[e >> 1] == T.CLASS["residential"]) & ((np.asarray(g.seg_flags)[e >> 1] & T.F_LINK) == 0)]
    assert len(res) > 20
    for x in res[:200].tolist():
        line, walked, y = [], 0.0, x
        for _ in range(16):  # the road as one polyline, 60 m or more of it
            idx = np.arange(off[y >> 1], off[(y >> 1) + 1])
            idx = idx[::-1] if y & 1 else idx
            pts = [(float(lon[i]), float(lat[i])) for i in idx]
            line += pts if not line else pts[1:]
            walked = float(haversine_m(np.array([p[1] for p in line[:-1]]), np.array([p[0] for p in line[:-1]]),
                                       np.array([p[1] for p in line[1:]]), np.array([p[0] for p in line[1:]])).sum())
            if walked > 60 or nxt[y] < 0:
                break
            y = int(nxt[y])
        want, _ = perceived_bearings(_Shapes([line]))
        d = (float(start[x]) - float(want[0]) + 540.0) % 360.0 - 180.0
        assert abs(d) < 0.5, x


def test_bicycle_and_pedestrian_turns_unchanged():
    ang = np.array([0.0, 50.0, -90.0, 175.0])
    np.testing.assert_allclose(turn_penalty("bicycle")(ang), [0.0, 2 * 50 / 180, 1.0, 10.0])
    assert turn_penalty("pedestrian") is None


def test_classic_ch_and_cch_give_the_same_route_times(liechtenstein):
    """The same weights through a classic CH (built from the profile's turn graph) and through the
    bundle's CCH customised with them: the same costs and the same packed time and length (with the
    new turn delays), for pairs whose routes turn."""
    from geoengine.routing.cch import CCHTopology
    from geoengine.routing.ch import ContractionHierarchy
    from geoengine.routing.profile import Profile, unpack

    graph = liechtenstein.graph
    prof = Profile(graph, "auto")
    off, tgt, w, packed = prof.turn_csr()
    ch = ContractionHierarchy.build(graph.n_edges, off, tgt, w, packed)
    topo = CCHTopology.load(liechtenstein.bundle.path / "routing" / "cch")
    cch = topo.customise(off, tgt, w, packed)
    comp = np.flatnonzero(prof.component)
    rng = np.random.default_rng(7)
    src, dst = rng.choice(comp, 40), rng.choice(comp, 40)
    c1, s1 = ch.query_pairs(src, dst)
    c2, s2 = cch.query_pairs(src, dst)
    np.testing.assert_allclose(c1, c2, rtol=1e-9)
    np.testing.assert_array_equal(s1, s2)
    t1, _ = unpack(s1)
    # the times include turn delays: more than the edges' own seconds along the same path
    turned = 0
    for i in range(5):
        r = cch.query(int(src[i]), int(dst[i]))
        p = np.asarray(r.path)
        edge_s = prof.time[p[1:]].sum()
        turned += t1[i] > edge_s + 1.0
    assert turned >= 3


def _turn_seconds(g, via_osm, from_osm, to_osm):
    """MotorTurns' seconds of the turn from_osm -> via_osm -> to_osm (OSM node ids) on graph g."""
    base = turn_base(g)
    sid, off = np.asarray(g.shape_osm_id), np.asarray(g.shape_offsets)
    e1, e2 = base.e1.astype(np.int64), base.e2.astype(np.int64)
    s1, s2 = e1 >> 1, e2 >> 1
    frm = np.where(e1 & 1, sid[off[s1] + 1], sid[off[s1 + 1] - 2])
    via = np.where(e1 & 1, sid[off[s1]], sid[off[s1 + 1] - 1])
    to = np.where(e2 & 1, sid[off[s2 + 1] - 2], sid[off[s2] + 1])
    k = np.flatnonzero((frm == from_osm) & (via == via_osm) & (to == to_osm))
    assert len(k) == 1, (from_osm, via_osm, to_osm)
    return float(base.penalty(turn_penalty("auto"), k, T.AUTO)[0])


def test_short_curved_roads_read_as_osrm_reads_them(liechtenstein_graph):
    """Poska at Lawenastrasse (Triesen): two short curved pieces of one street (20 m and 31 m) meet a
    third road. OSRM 26.10's car.lua turn penalties for its turns there (read from its
    .turn_duration_penalties, MLD build of the same extract) are 9.0 s, 5.0 s, 1.4 s, 0.3 s, 0.1 s
    and 0.0 s: it reads both short pieces towards their far ends (its curve case trims the points
    with a length cache that holds each piece's length, so it keeps the whole piece), a 115 degree
    left turn where their first metres give 52 degrees (the look-ahead before this version gave
    2.1, 0.2, 5.8, 1.8, 1.1 and 0.1 s). Within 0.25 s: OSRM rounds coordinates to 1e-6 degrees and
    measures with its cheap ruler, a degree or two at these lengths."""
    g = liechtenstein_graph
    poska_w, poska_e, lawena, via = 1499744116, 1499744119, 2769948451, 1499744117
    got = [_turn_seconds(g, via, poska_w, poska_e), _turn_seconds(g, via, poska_e, poska_w),
           _turn_seconds(g, via, poska_e, lawena), _turn_seconds(g, via, lawena, poska_w),
           _turn_seconds(g, via, lawena, poska_e), _turn_seconds(g, via, poska_w, lawena)]
    osrm = [9.0, 5.0, 1.4, 0.3, 0.1, 0.0]
    np.testing.assert_allclose(got, osrm, atol=0.25)
