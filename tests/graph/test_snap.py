"""Snapping on the real Liechtenstein graph: access, radius, heading, side, ranking, errors."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.costing import edge_costs
from geoengine.errors import InvalidRequest, Unsnappable
from geoengine.geo import bearing_deg, haversine_m
from geoengine.graph import tags as T
from geoengine.routing.snap import MAX_DEFAULT_RADIUS, Snapper


@pytest.fixture(scope="module")
def snapper(liechtenstein_graph):
    return Snapper(liechtenstein_graph)


@pytest.fixture(scope="module")
def masks(liechtenstein_graph):
    g = liechtenstein_graph
    return {c: np.isfinite(edge_costs(g, c)[0]) for c in ("auto", "pedestrian")}


def _mid_piece(g, seg):
    """Midpoint of the middle shape piece of a segment and that piece's bearing (way direction)."""
    a = int(g.shape_offsets[seg]) + (int(g.shape_offsets[seg + 1]) - int(g.shape_offsets[seg]) - 1) // 2
    lon0, lat0, lon1, lat1 = g.shape_lon[a], g.shape_lat[a], g.shape_lon[a + 1], g.shape_lat[a + 1]
    return (lon0 + lon1) / 2, (lat0 + lat1) / 2, float(bearing_deg(lat0, lon0, lat1, lon1))


def _long_segments(g, mask_fwd, mask_bwd, cls=None, min_len=80):
    segs = np.flatnonzero((np.asarray(g.seg_length) > min_len) & mask_fwd[0::2] & mask_bwd[1::2])
    if cls is not None:
        segs = segs[np.isin(np.asarray(g.seg_class)[segs], [T.CLASS[c] for c in cls])]
    return segs


def test_point_on_a_road_snaps_onto_it(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    seg = int(_long_segments(g, masks["auto"], masks["auto"], ["residential"])[0])
    lon, lat, _ = _mid_piece(g, seg)
    c = snapper.snap(lon, lat, masks["auto"])
    assert c.edge[0] >> 1 == seg and c.distance[0] < 0.5
    assert c.fraction[0 if c.edge[0] % 2 == 0 else 1] >= 0
    # the two directions are both offered, with complementary fractions
    both = {int(e): f for e, f in zip(c.edge, c.fraction, strict=True) if e >> 1 == seg}
    assert set(both) == {2 * seg, 2 * seg + 1}
    assert both[2 * seg] + both[2 * seg + 1] == pytest.approx(1.0)
    # fraction: the snapped point splits the edge's shape at that share of its length
    lo, la = g.edge_shape(2 * seg, 0.0, both[2 * seg])
    assert haversine_m(la[:-1], lo[:-1], la[1:], lo[1:]).sum() == pytest.approx(both[2 * seg] * g.seg_length[seg], abs=0.5)


def test_access_decides_candidates(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    footway_segs = _long_segments(g, masks["pedestrian"], masks["pedestrian"], ["footway"])
    seg = int(footway_segs[0])
    lon, lat, _ = _mid_piece(g, seg)
    walk = snapper.snap(lon, lat, masks["pedestrian"])
    assert walk.edge[0] >> 1 == seg and walk.distance[0] < 0.5
    car = snapper.snap(lon, lat, masks["auto"])
    assert masks["auto"][car.edge].all() and not np.isin(car.edge, [2 * seg, 2 * seg + 1]).any()
    assert car.distance[0] > walk.distance[0]


def test_oneway_offers_one_direction(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    m = masks["auto"]
    oneway = np.flatnonzero(m[0::2] & ~m[1::2] & (np.asarray(g.seg_length) > 50))
    seg = int(oneway[0])
    lon, lat, _ = _mid_piece(g, seg)
    c = snapper.snap(lon, lat, m)
    mine = c.edge[(c.edge >> 1) == seg]
    assert list(mine) == [2 * seg]


def test_radius_strict_and_growing(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    rng = np.random.default_rng(7)
    lo0, la0, lo1, la1 = g.node_lon.min(), g.node_lat.min(), g.node_lon.max(), g.node_lat.max()
    found = None
    for _ in range(400):
        lon, lat = rng.uniform(lo0, lo1), rng.uniform(la0, la1)
        try:
            c = snapper.snap(lon, lat, masks["auto"])
        except Unsnappable:
            continue
        if 110 < c.distance[0] < MAX_DEFAULT_RADIUS:
            found = (lon, lat, c)
            break
    assert found, "some point of Liechtenstein lies 110-500 m from a road"
    lon, lat, c = found
    assert c.radius >= 200
    with pytest.raises(Unsnappable) as exc:
        snapper.snap(lon, lat, masks["auto"], search_radius=100, index=3)
    assert exc.value.status == 422 and exc.value.errors[0].field == "locations[3]"
    # within a strict radius every candidate lies inside it
    seg = int(_long_segments(g, masks["auto"], masks["auto"], ["residential"])[3])
    lon, lat, _ = _mid_piece(g, seg)
    c = snapper.snap(lon + 0.0003, lat, masks["auto"], search_radius=60)
    assert (c.distance <= 60).all() and c.radius == 60


def test_far_away_is_unsnappable(snapper, masks):
    with pytest.raises(Unsnappable) as exc:
        snapper.snap(0.0, 0.0, masks["auto"], index=1, field="targets")
    assert exc.value.errors[0].field == "targets[1]"


def test_heading_picks_the_direction(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    seg = int(_long_segments(g, masks["auto"], masks["auto"], ["secondary", "tertiary", "residential"])[5])
    lon, lat, b = _mid_piece(g, seg)
    fwd = snapper.snap(lon, lat, masks["auto"], heading=b, heading_tolerance=30)
    assert fwd.edge[0] == 2 * seg and not fwd.relaxed
    assert (np.abs((fwd.bearing - b + 180) % 360 - 180) <= 30).all()
    bwd = snapper.snap(lon, lat, masks["auto"], heading=(b + 180) % 360, heading_tolerance=30)
    assert bwd.edge[0] == 2 * seg + 1


def test_preferred_side(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    seg = int(_long_segments(g, masks["auto"], masks["auto"], ["secondary", "tertiary", "residential"])[5])
    lon, lat, b = _mid_piece(g, seg)
    # 6 m to the right of the way's direction
    r = np.radians(b + 90)
    plon = lon + 6 * np.sin(r) / (111195 * np.cos(np.radians(lat)))
    plat = lat + 6 * np.cos(r) / 111195
    same = snapper.snap(plon, plat, masks["auto"], preferred_side="same")
    opp = snapper.snap(plon, plat, masks["auto"], preferred_side="opposite")
    assert same.edge[0] == 2 * seg and opp.edge[0] == 2 * seg + 1
    either = snapper.snap(plon, plat, masks["auto"], preferred_side="either")
    assert {int(either.edge[0]), int(either.edge[1])} == {2 * seg, 2 * seg + 1}


def test_rank_candidates(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    lon, lat, _ = _mid_piece(g, int(_long_segments(g, masks["auto"], masks["auto"])[10]))
    ranked = snapper.snap(lon + 0.0004, lat, masks["auto"], search_radius=100)
    assert np.all(np.diff(ranked.distance) >= -1e-6) and len(ranked) > 2
    plain = snapper.snap(lon + 0.0004, lat, masks["auto"], search_radius=100, rank_candidates=False)
    assert np.all(np.diff(plain.edge) > 0) and set(plain.edge) == set(ranked.edge)


@pytest.mark.parametrize("kw", [{"preferred_side": "left"}, {"search_radius": 0}, {"search_radius": 150}])
def test_bad_snap_parameters(snapper, masks, kw):
    with pytest.raises(InvalidRequest) as exc:
        snapper.snap(9.52, 47.14, masks["auto"], index=2, **kw)
    assert exc.value.errors[0].field.startswith("locations[2].")


def test_bad_coordinates(snapper, masks):
    with pytest.raises(InvalidRequest):
        snapper.snap(200.0, 47.0, masks["auto"])
    with pytest.raises(InvalidRequest):
        snapper.snap(float("nan"), 47.0, masks["auto"])


def test_snap_many_agrees_with_snap(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    m = masks["auto"]
    rng = np.random.default_rng(3)
    k = np.asarray(g.edge_src)[rng.choice(np.flatnonzero(m), 300)]
    lon = g.node_lon[k] + rng.normal(0, 0.0005, 300)
    lat = g.node_lat[k] + rng.normal(0, 0.0005, 300)
    cs = snapper.snap_many(lon, lat, m)
    assert len(cs) == 300
    for i in range(300):
        one = snapper.snap(lon[i], lat[i], m)
        many = cs.of(i)
        assert np.allclose(one.distance, many.distance) and set(one.edge) == set(many.edge)
    strict = snapper.snap_many(lon[:20], lat[:20], m, search_radius=100)
    assert (strict.distance <= 100).all()


def test_snap_many_names_every_unsnappable_location(snapper, masks):
    with pytest.raises(Unsnappable) as exc:
        snapper.snap_many([9.52, 0.0, 1.0], [47.14, 0.0, 1.0], masks["auto"], field="sources")
    assert [e.field for e in exc.value.errors] == ["sources[1]", "sources[2]"]
    with pytest.raises(InvalidRequest) as exc:
        snapper.snap_many([9.52, 9.52], [47.14, 95.0], masks["auto"], field="targets")
    assert exc.value.errors[0].field == "targets[1]"


def test_street_hint_ranks_the_named_street_first(liechtenstein_graph, snapper, masks):
    g = liechtenstein_graph
    m = masks["auto"]
    rng = np.random.default_rng(11)
    segs = _long_segments(g, m, m, ["residential", "tertiary", "secondary"])
    checked = 0
    for seg in rng.permutation(segs)[:200].tolist():
        lon, lat, _ = _mid_piece(g, seg)
        c = snapper.snap(lon + 0.0003, lat + 0.0002, m, search_radius=100)
        names = [g.edge_name(e) for e in c.edge]
        if len(set(names)) < 2 or not names[-1] or names[-1] == names[0]:
            continue
        hinted = snapper.snap(lon + 0.0003, lat + 0.0002, m, search_radius=100, street=names[-1].upper())
        assert g.edge_name(hinted.edge[0]) == names[-1]
        assert set(hinted.edge) == set(c.edge)
        checked += 1
        if checked >= 5:
            break
    assert checked >= 1


def test_remaining_part_gives_route_lengths(liechtenstein_graph, snapper, masks):
    """Length between two snapped points along the edge-based graph = remaining(source) + Dijkstra
    over arcs - remaining(target); checked against the straight shape length on one edge pair."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    from geoengine.graph import turn_graph

    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, "pedestrian")
    o, t, _w, sec = turn_graph(g, cost, length, mode="pedestrian")
    m = sp.csr_matrix((sec + 1e-9, t, o), shape=(g.n_edges, g.n_edges))
    seg = int(_long_segments(g, masks["pedestrian"], masks["pedestrian"], ["residential"])[2])
    lon, lat, _ = _mid_piece(g, seg)
    src = snapper.snap(lon, lat, masks["pedestrian"], search_radius=5)
    e = 2 * seg
    i = int(np.flatnonzero(src.edge == e)[0])
    start = src.remaining(length)[i]
    assert start == pytest.approx((1 - src.fraction[i]) * g.seg_length[seg])
    # to the far end of the next edge: the whole next edge is covered
    nxt = int(t[o[e]])
    d = dijkstra(m, indices=[e])[0]
    assert start + d[nxt] == pytest.approx(start + g.edge_length[nxt], rel=1e-9)


def test_component_mask_prefers_the_connected_network(liechtenstein_graph, snapper, masks):
    from geoengine.graph import turn_graph
    from geoengine.graph.turns import largest_component

    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, "auto")
    o, t, _w, _s = turn_graph(g, cost, length, mode="auto")
    big = largest_component(o, t, np.isfinite(cost))
    island = np.isfinite(cost) & ~big
    assert big.sum() > 0.9 * np.isfinite(cost).sum() and island.any()
    # a point on an island segment: without the mask it snaps there, with it onto the main network
    # (unless nothing else lies within reach, then the island is the fallback)
    checked = 0
    for e in np.flatnonzero(island[0::2] & island[1::2]).tolist():
        lon, lat, _ = _mid_piece(g, e)
        plain = snapper.snap(lon, lat, masks["auto"])
        assert plain.edge[0] >> 1 == e
        pref = snapper.snap(lon, lat, masks["auto"], component_mask=big)
        if big[pref.edge].all():
            assert pref.distance[0] > plain.distance[0]
            checked += 1
        else:
            assert pref.edge[0] >> 1 == e  # fallback to the island
    assert checked >= 1


def test_snap_many_component_mask_matches_snap(liechtenstein_graph, snapper, masks):
    from geoengine.graph import turn_graph
    from geoengine.graph.turns import largest_component

    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, "auto")
    o, t, _w, _s = turn_graph(g, cost, length, mode="auto")
    big = largest_component(o, t, np.isfinite(cost))
    island = np.flatnonzero((np.isfinite(cost) & ~big)[0::2])[:30]
    pts = [_mid_piece(g, int(e))[:2] for e in island]
    rng = np.random.default_rng(5)
    k = np.asarray(g.edge_src)[rng.choice(np.flatnonzero(masks["auto"]), 30)]
    pts += list(zip(g.node_lon[k] + 0.0003, g.node_lat[k], strict=True))
    lon, lat = np.array(pts).T
    cs = snapper.snap_many(lon, lat, masks["auto"], component_mask=big)
    for i in range(len(lon)):
        one = snapper.snap(lon[i], lat[i], masks["auto"], component_mask=big)
        assert set(cs.of(i).edge) == set(one.edge) and np.isclose(cs.of(i).distance[0], one.distance[0])
