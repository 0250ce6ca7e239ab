"""Every costing option moves edge costs (or times, or access) the way its name says, on real edges
of the sample extracts (the hand-made file only for tags no sample carries: ferry, hgv toll, hazmat,
maxaxles, maxlength, maxaxleload, trunk)."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.costing import (
    COSTINGS,
    edge_costs,
    inactive_options,
    mode_of,
    parse_costing_options,
    turn_penalty,
)
from geoengine.graph import tags as T


def flag(bit):
    return lambda g: (g.edge_flags & bit) != 0


def cls(*names):
    return lambda g: np.isin(g.edge_class, [T.CLASS[n] for n in names])


def way(*ids):
    return lambda g: np.isin(np.repeat(np.asarray(g.seg_way), 2), ids)


def limit(name, below):
    col = T.LIMIT_NAMES.index(name)
    return lambda g: g.edge_attr(np.asarray(g.seg_limits)[:, col]) < below


def sac_above(n):
    return lambda g: g.edge_attr(g.seg_sac) > n


HIGHWAY = cls("motorway", "trunk")
PAVED = lambda g: g.edge_attr(g.seg_surface) <= 2  # noqa: E731
TRAILS = lambda g: cls("track")(g) | flag(T.F_UNPAVED)(g)  # noqa: E731

# (graph, costing, base options, changed options, edges concerned, what happens to them)
# up/down: cost rises/falls there and nowhere else; excluded/included: access there changes;
# time_up/time_down: travel time moves there.
CASES = [
    ("nominatim_graph", "auto", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("nominatim_graph", "auto", {}, {"use_highways": 1.0}, HIGHWAY, "down"),
    ("nominatim_graph", "bus", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("nominatim_graph", "taxi", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("nominatim_graph", "truck", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("nominatim_graph", "motorcycle", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("handmade_graph", "motor_scooter", {}, {"use_highways": 0.0}, HIGHWAY, "up"),
    ("andorra_graph", "auto", {}, {"use_tolls": 0.0}, flag(T.F_TOLL), "up"),
    ("andorra_graph", "auto", {}, {"use_tolls": 1.0}, flag(T.F_TOLL), "down"),
    ("andorra_graph", "motorcycle", {}, {"use_tolls": 0.0}, flag(T.F_TOLL), "up"),
    ("handmade_graph", "truck", {}, {"use_tolls": 0.0}, flag(T.F_TOLL_HGV), "up"),
    ("handmade_graph", "auto", {}, {"use_ferry": 0.0}, flag(T.F_FERRY), "up"),
    ("handmade_graph", "truck", {}, {"use_ferry": 1.0}, flag(T.F_FERRY), "down"),
    ("handmade_graph", "bicycle", {}, {"use_ferry": 0.0}, flag(T.F_FERRY), "up"),
    ("handmade_graph", "pedestrian", {}, {"use_ferry": 0.0}, flag(T.F_FERRY), "up"),
    ("handmade_graph", "motorcycle", {}, {"use_ferry": 0.0}, flag(T.F_FERRY), "up"),
    ("liechtenstein_graph", "auto", {}, {"use_living_streets": 1.0}, cls("living_street"), "down"),
    ("liechtenstein_graph", "auto", {}, {"use_tracks": 1.0}, cls("track"), "down"),
    ("liechtenstein_graph", "auto", {}, {"service_penalty": 100.0}, cls("service"), "up"),
    ("liechtenstein_graph", "auto", {}, {"country_crossing_penalty": 600.0}, flag(T.F_BORDER), "up"),
    ("liechtenstein_graph", "auto", {}, {"exclude_unpaved": True}, flag(T.F_UNPAVED), "excluded"),
    ("liechtenstein_graph", "auto", {}, {"height": 4.5}, limit("maxheight", 4.5), "excluded"),
    ("liechtenstein_graph", "auto", {}, {"width": 4.0}, limit("maxwidth", 4.0), "excluded"),
    ("liechtenstein_graph", "auto", {}, {"top_speed": 30.0}, lambda g: (np.asarray(g.edge_speed) > 30 / 0.8) & PAVED(g), "time_up"),
    ("liechtenstein_graph", "truck", {}, {"top_speed": 40.0}, lambda g: (np.asarray(g.edge_speed) > 40 / 0.8) & PAVED(g), "time_up"),
    ("liechtenstein_graph", "truck", {"weight": 5.0}, {"weight": 40.0}, limit("maxweight", 40.0), "excluded"),
    ("handmade_graph", "truck", {"height": 2, "width": 2, "length": 10, "weight": 3, "axle_load": 5, "axle_count": 2},
     {"length": 13.0}, way(103), "excluded"),
    ("handmade_graph", "truck", {"height": 2, "width": 2, "length": 10, "weight": 3, "axle_load": 5, "axle_count": 2},
     {"axle_load": 9.0}, way(103), "excluded"),
    ("handmade_graph", "truck", {"height": 2, "width": 2, "length": 10, "weight": 3, "axle_load": 5, "axle_count": 2},
     {"axle_count": 4}, way(103), "excluded"),
    ("handmade_graph", "truck", {"height": 2, "width": 2, "length": 10, "weight": 3, "axle_load": 5, "axle_count": 2},
     {"width": 2.5}, way(103), "excluded"),
    ("handmade_graph", "truck", {"height": 2, "width": 2, "length": 10, "weight": 3, "axle_load": 5, "axle_count": 2},
     {"hazmat": True}, way(103), "excluded"),
    ("liechtenstein_graph", "bicycle", {}, {"use_roads": 0.0}, cls("residential", "secondary", "primary"), "up"),
    ("liechtenstein_graph", "bicycle", {}, {"use_roads": 1.0}, cls("residential", "secondary", "primary"), "down"),
    ("liechtenstein_graph", "bicycle", {}, {"cycling_speed": 30.0}, cls("cycleway"), "time_down"),
    ("liechtenstein_graph", "bicycle", {"cycling_speed": 20.0}, {"bicycle_type": "Road"},
     lambda g: np.isin(g.edge_attr(g.seg_surface), [4, 5, 6]), "time_up"),
    ("liechtenstein_graph", "bicycle", {"bicycle_type": "Road"}, {"bicycle_type": "Road", "avoid_bad_surfaces": 1.0},
     lambda g: g.edge_attr(g.seg_surface) >= 5, "excluded"),
    ("liechtenstein_graph", "bicycle", {}, {"avoid_bad_surfaces": 0.9},
     lambda g: np.isin(g.edge_attr(g.seg_surface), [4, 5, 6]), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"walking_speed": 10.0}, cls("footway", "residential"), "time_down"),
    ("liechtenstein_graph", "pedestrian", {}, {"walkway_factor": 0.5}, cls("footway", "path", "pedestrian", "bridleway", "cycleway"), "down"),
    ("liechtenstein_graph", "pedestrian", {}, {"sidewalk_factor": 2.0}, flag(T.F_SIDEWALK), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"alley_factor": 4.0}, flag(T.F_ALLEY), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"driveway_factor": 1.0}, flag(T.F_DRIVEWAY), "down"),
    ("liechtenstein_graph", "pedestrian", {}, {"step_penalty": 60.0}, cls("steps"), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"use_living_streets": 0.0}, cls("living_street"), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"use_tracks": 0.0}, cls("track"), "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"use_lit": 1.0}, lambda g: (g.edge_flags & T.F_LIT) == 0, "up"),
    ("liechtenstein_graph", "pedestrian", {}, {"max_hiking_difficulty": 6}, sac_above(1), "included"),
    ("liechtenstein_graph", "motorcycle", {}, {"use_trails": 1.0}, TRAILS, "down"),
    ("liechtenstein_graph", "motor_scooter", {}, {"use_trails": 1.0}, TRAILS, "down"),
]


@pytest.mark.parametrize(("graph", "costing", "base", "changed", "where", "effect"), CASES,
                         ids=[f"{c[1]}-{'-'.join(c[3])}-{c[5]}" for c in CASES])
def test_option_moves_costs(request, graph, costing, base, changed, where, effect):
    g = request.getfixturevalue(graph)
    sel = where(g)
    c0, t0, l0 = edge_costs(g, costing, parse_costing_options(costing, base))
    c1, t1, l1 = edge_costs(g, costing, parse_costing_options(costing, {**base, **changed}))
    assert np.array_equal(l0, l1)
    ok0 = np.isfinite(c0)
    if effect == "excluded":
        hit = sel & ok0
        assert hit.any(), "the data has usable edges this option concerns"
        assert not np.isfinite(c1[hit]).any() and np.array_equal(ok0 & ~sel, np.isfinite(c1) & ~sel)
    elif effect == "included":
        hit = sel & ~ok0 & np.isfinite(c1)
        assert hit.any()
        assert np.array_equal(c0[ok0], c1[ok0])
    elif effect in ("up", "down"):
        hit = sel & ok0
        assert hit.any(), "the data has usable edges this option concerns"
        assert np.array_equal(ok0, np.isfinite(c1))
        diff = c1[hit] - c0[hit]
        assert (diff > 0).all() if effect == "up" else (diff < 0).all()
        assert np.allclose(c0[ok0 & ~sel], c1[ok0 & ~sel]) or changed.keys() & {"use_roads", "avoid_bad_surfaces"}
    else:
        hit = sel & ok0
        assert hit.any()
        diff = t1[hit] - t0[hit]
        assert (diff > 0).all() if effect == "time_up" else (diff < 0).all()


@pytest.mark.parametrize("costing", COSTINGS)
def test_shortest_switches_to_distance(liechtenstein_graph, costing):
    g = liechtenstein_graph
    cost, time_s, length = edge_costs(g, costing, parse_costing_options(costing, {"shortest": True}))
    ok = np.isfinite(cost)
    assert ok.sum() > 1000
    dest = (np.asarray(g.edge_dest_only) & T.MODE_BITS[mode_of(costing)]) != 0
    assert np.array_equal(cost[ok & ~dest], length[ok & ~dest]) and np.isfinite(time_s[ok]).all()
    # destination-only edges keep a penalty (in metres) so that they carry no through traffic
    assert np.allclose(cost[ok & dest], length[ok & dest] + 2000.0)
    assert turn_penalty(costing, parse_costing_options(costing, {"shortest": True})) is None


def test_mode_access_on_real_edges(liechtenstein_graph, sample, find_way):
    g = liechtenstein_graph
    foot = np.isfinite(edge_costs(g, "pedestrian")[0])
    car = np.isfinite(edge_costs(g, "auto")[0])
    bike = np.isfinite(edge_costs(g, "bicycle")[0])
    footway = cls("footway")(g)
    assert foot[footway].all() and not car[footway].any()
    plain = find_way(sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf"),
                     lambda t: t.get("highway") == "cycleway" and not any(k.startswith("motor") for k in t))
    cycleway = g.edges_of_way(plain)
    assert bike[cycleway].all() and not car[cycleway].any()
    # a cycleway tagged motor_vehicle=yes is open to cars (Rietstrasse in Vaduz)
    assert (car & cls("cycleway")(g)).any()
    # car time is length over speed
    _c, t, length = edge_costs(g, "auto")
    assert np.all(t[car] > 0) and np.all(length[car] / t[car] * 3.6 <= 140 + 1e-9)


def test_use_hills_is_reported_inactive(liechtenstein_graph):
    opts = parse_costing_options("bicycle", {"use_hills": 0.9})
    assert any("use_hills" in n for n in inactive_options(liechtenstein_graph, opts))
    assert inactive_options(liechtenstein_graph, parse_costing_options("bicycle", {})) == []


def test_destination_only_edges_cost_more(liechtenstein_graph):
    g = liechtenstein_graph
    dest = (np.asarray(g.edge_dest_only) & T.AUTO) != 0
    cost, time_s, _ = edge_costs(g, "auto")
    assert dest.any() and np.all(cost[dest] > time_s[dest] + 200)



def test_destination_penalty_only_for_the_named_mode(handmade_graph):
    g = handmade_graph  # way 104: access=destination (every mode); compare with bicycle=yes override
    e = g.edges_of_way(104)
    assert (np.asarray(g.edge_dest_only)[e] & T.AUTO).all()
    cost, time_s, _ = edge_costs(g, "auto")
    bcost, btime, _ = edge_costs(g, "bicycle")
    assert np.all(cost[e] >= time_s[e] + 300) and np.all(bcost[e] >= btime[e] + 120)
    w = g.edges_of_way(103)  # no destination rule: no penalty
    assert np.allclose(cost[w[np.isfinite(cost[w])]], time_s[w[np.isfinite(cost[w])]])
