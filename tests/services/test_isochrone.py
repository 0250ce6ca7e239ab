"""Isochrones on the real Andorra and Liechtenstein bundles: the search against independent oracles
(scipy Dijkstra, the router's one_to_all), and the contour polygons against the graph's nodes.

Stated tolerances (docs/isochrone.md): of the junction nodes reachable within a contour, >= 95% lie
inside its polygon; of the costing's nodes inside the polygon, >= 90% are reachable within the contour
value plus a slack of 10% (+ 60 s or 300 m), the allowance for the off-road buffer around reached roads.
"""

from __future__ import annotations

import numpy as np
import pytest
import shapely
from shapely.geometry import shape

from geoengine.errors import InvalidRequest, Unprocessable
from geoengine.services.models import Location

ANDORRA = (1.5218, 42.5063)  # Andorra la Vella
ESCALDES = (1.5343, 42.5097)
VADUZ = (9.5209, 47.1410)
SCHAAN = (9.5096, 47.1650)


def _iso(engine, where, costing="auto", **kw):
    body = {"locations": [{"lon": where[0], "lat": where[1]}], "costing": costing, **kw}
    return engine.isochrone(body)


def _contour_geoms(fc):
    return [(f["properties"]["contour"], shape(f["geometry"])) for f in fc["features"] if "contour" in f["properties"]]


def _oracle_node_metric(engine, where, costing, metric, options=None):
    """Metric at which each junction node is reached, by code independent of the isochrone module:
    time along the cost-optimal tree from the router's one_to_all, or the shortest length by scipy."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra as sp_dijkstra

    from geoengine.routing.dijkstra import one_to_all
    from geoengine.routing.profile import unpack

    router = engine.router
    prof = router.profile(costing, router.parse_options(costing, options))
    c = router.candidates(prof, Location(lon=where[0], lat=where[1]), 0)
    g = prof.search
    rem = 1.0 - c["fraction"]
    if metric == "time":
        so, so2 = prof.source_offsets(c["edge"], c["fraction"])
        _d, sec = one_to_all(g, c["edge"], so, so2)
        end = unpack(sec)[0]
    else:
        n = g.n
        length = np.asarray(prof.length, dtype=np.float64)
        # a super-source n with arcs to the candidate edges (their remaining length)
        rows = np.concatenate([np.repeat(np.arange(n), np.diff(g.offsets)), np.full(len(c["edge"]), n)])
        cols = np.concatenate([np.asarray(g.targets), c["edge"]])
        w = np.concatenate([length[np.asarray(g.targets)], rem * length[c["edge"]]]) + 1e-9
        m = sp.csr_matrix((w, (rows, cols)), shape=(n + 1, n + 1))
        end = sp_dijkstra(m, indices=n)[:n]
    graph = engine.graph
    node = np.full(graph.n_nodes, np.inf)
    fin = np.isfinite(end)
    np.minimum.at(node, np.asarray(graph.edge_dst)[fin], end[fin])
    at_tail = c["fraction"] == 0.0  # a location exactly at the start of a candidate edge is at its tail node
    node[np.asarray(graph.edge_src)[c["edge"][at_tail]]] = 0.0
    return node, prof


def _costing_nodes(engine, prof):
    g = engine.graph
    use = np.flatnonzero(prof.usable)
    mask = np.zeros(g.n_nodes, bool)
    mask[np.asarray(g.edge_src)[use]] = True
    mask[np.asarray(g.edge_dst)[use]] = True
    return mask


CASES = [
    ("andorra", ANDORRA, "auto", "time", 10),
    ("andorra", ESCALDES, "pedestrian", "time", 15),
    ("andorra", ANDORRA, "bicycle", "distance", 4),
    ("liechtenstein", VADUZ, "auto", "time", 5),
    ("liechtenstein", SCHAAN, "auto", "distance", 8),
    ("liechtenstein", VADUZ, "pedestrian", "time", 20),
]


@pytest.mark.parametrize("region,where,costing,metric,value", CASES)
def test_polygon_matches_node_reach(engine_for, region, where, costing, metric, value):
    engine = engine_for(region)
    fc = _iso(engine, where, costing, contours=[{metric: value}])
    (_, poly), = _contour_geoms(fc)
    assert poly.geom_type in ("Polygon", "MultiPolygon") and poly.is_valid and not poly.is_empty
    node_metric, prof = _oracle_node_metric(engine, where, costing, metric)
    limit = value * 60.0 if metric == "time" else value * 1000.0
    slack = 0.1 * limit + (60.0 if metric == "time" else 300.0)
    g = engine.graph
    lon, lat = np.asarray(g.node_lon), np.asarray(g.node_lat)
    inside = shapely.contains_xy(poly, lon, lat)
    reachable = node_metric <= limit
    assert reachable.sum() >= 20
    share_in = (inside & reachable).sum() / reachable.sum()
    assert share_in >= 0.95, f"only {share_in:.1%} of {reachable.sum()} reachable nodes inside"
    cand = inside & _costing_nodes(engine, prof)
    share_reach = (cand & (node_metric <= limit + slack)).sum() / cand.sum()
    assert share_reach >= 0.90, f"only {share_reach:.1%} of {cand.sum()} nodes inside are reachable"
    print(f"{region} {costing} {value} {metric}: {share_in:.1%} of {reachable.sum()} reachable inside, "
          f"{share_reach:.1%} of {cand.sum()} inside reachable")


def test_reach_time_agrees_with_one_to_all(andorra):
    """Every edge the cost-ordered search finishes within the limit has the oracle's time label."""
    from geoengine.routing.dijkstra import one_to_all
    from geoengine.routing.profile import unpack

    r = andorra.isochrone_reach(*ANDORRA, "auto", metric="time", limit=600.0)
    prof = andorra.router.profile("auto")
    so, so2 = prof.source_offsets(r.candidates["edge"], r.candidates["fraction"])
    _d, sec = one_to_all(prof.search, r.candidates["edge"], so, so2)
    t = unpack(sec)[0]
    fin = np.isfinite(r.end)
    assert fin.sum() > 100
    # same labels wherever the oracle's cost-optimal time stays within the limit (0.1 s packing rounding)
    both = fin & (t <= 600.0)
    assert both.sum() >= 0.97 * (t <= 600.0).sum()
    assert np.allclose(r.end[both], t[both], atol=0.5 + 1e-3 * t[both])
    frac = r.reached_fraction
    assert np.all(frac[fin] == 1.0) and np.all((frac >= 0) & (frac <= 1))
    partial = (~fin) & (frac > 0)
    assert partial.any(), "edges cut at the remaining budget are reported"


def test_reach_distance_is_exact_shortest_length(andorra):
    r = andorra.isochrone_reach(*ANDORRA, "auto", metric="distance", limit=3000.0)
    node, _ = _oracle_node_metric(andorra, ANDORRA, "auto", "distance")
    mine = r.node_metric(andorra.graph)
    # nodes reached at the end of a finished edge: the labels agree (the oracle has no limit)
    within = node <= 3000.0
    assert within.sum() > 50
    assert np.allclose(mine[within], node[within], atol=0.05)


@pytest.mark.parametrize("region,where", [("andorra", ANDORRA), ("liechtenstein", VADUZ)])
def test_larger_contours_contain_smaller(engine_for, region, where):
    fc = _iso(engine_for(region), where, contours=[{"time": 5}, {"time": 15}, {"time": 10}])
    geoms = dict(_contour_geoms(fc))
    assert sorted(geoms) == [5.0, 10.0, 15.0]
    # contours largest first (Valhalla's order), after the location points
    assert [f["properties"]["contour"] for f in fc["features"] if "contour" in f["properties"]] == [15.0, 10.0, 5.0]
    assert [f["geometry"]["type"] for f in fc["features"]][-3:] != ["Point"] * 3
    for small, big in ((5.0, 10.0), (10.0, 15.0)):
        a, b = geoms[small], geoms[big]
        assert b.area > a.area
        # containment up to the simplification tolerance (shared parts of the boundary)
        assert a.difference(b).area <= 0.01 * a.area


def test_pedestrian_reach_smaller_than_car(andorra):
    car = _contour_geoms(_iso(andorra, ANDORRA, "auto", contours=[{"time": 10}]))[0][1]
    walk = _contour_geoms(_iso(andorra, ANDORRA, "pedestrian", contours=[{"time": 10}]))[0][1]
    assert walk.area < 0.25 * car.area


def test_follows_network_not_convex_hull(andorra):
    poly = _contour_geoms(_iso(andorra, ANDORRA, contours=[{"time": 10}]))[0][1]
    assert poly.area < 0.6 * poly.convex_hull.area


def test_costing_options_change_reach(andorra):
    base = _contour_geoms(_iso(andorra, ESCALDES, "pedestrian", contours=[{"time": 10}]))[0][1]
    slow = _contour_geoms(_iso(andorra, ESCALDES, "pedestrian", contours=[{"time": 10}],
                               costing_options={"walking_speed": 2.0}))[0][1]
    assert slow.area < 0.8 * base.area
    car = _contour_geoms(_iso(andorra, ANDORRA, "auto", contours=[{"time": 10}]))[0][1]
    capped = _contour_geoms(_iso(andorra, ANDORRA, "auto", contours=[{"time": 10}],
                                 costing_options={"auto": {"top_speed": 30}}))[0][1]
    assert capped.area < 0.8 * car.area


def test_lines_and_locations(andorra):
    fc = _iso(andorra, ANDORRA, contours=[{"time": 5, "color": "#00ff00"}], polygons=False)
    line = fc["features"][-1]  # the one contour comes after the location points
    assert line["geometry"]["type"] in ("LineString", "MultiLineString")
    rings = [line["geometry"]["coordinates"]] if line["geometry"]["type"] == "LineString" \
        else line["geometry"]["coordinates"]
    assert all(r[0] == r[-1] and len(r) >= 4 for r in rings)
    assert line["properties"]["color"] == "#00ff00" and line["properties"]["metric"] == "time"
    points = [f for f in fc["features"] if f["geometry"]["type"] == "Point"]
    kinds = [p["properties"]["type"] for p in points]
    assert kinds[0] == "input" and "snapped" in kinds
    assert points[0]["geometry"]["coordinates"] == [ANDORRA[0], ANDORRA[1]]
    snapped = np.array([p["geometry"]["coordinates"] for p in points[1:]])
    # snapped points lie on the road network within the snapping radius (metres)
    d = np.hypot((snapped[:, 0] - ANDORRA[0]) * 111320 * np.cos(np.radians(ANDORRA[1])),
                 (snapped[:, 1] - ANDORRA[1]) * 110540)
    assert np.all(d < 500)
    quiet = _iso(andorra, ANDORRA, contours=[{"time": 5}], show_locations=False)
    assert [f["geometry"]["type"] for f in quiet["features"]] == ["Polygon"] or \
        [f["geometry"]["type"] for f in quiet["features"]] == ["MultiPolygon"]


def test_denoise_and_generalize(liechtenstein):
    def parts(g):
        return len(g.geoms) if g.geom_type == "MultiPolygon" else 1

    def vertices(g):
        return shapely.get_num_coordinates(g)

    noisy = _contour_geoms(_iso(liechtenstein, VADUZ, "pedestrian", contours=[{"time": 30}], denoise=0.0))[0][1]
    clean = _contour_geoms(_iso(liechtenstein, VADUZ, "pedestrian", contours=[{"time": 30}], denoise=1.0))[0][1]
    assert parts(clean) == 1 and parts(noisy) >= parts(clean)
    assert noisy.area >= clean.area - 1e-12
    fine = _contour_geoms(_iso(liechtenstein, VADUZ, contours=[{"time": 10}], generalize=0))[0][1]
    coarse = _contour_geoms(_iso(liechtenstein, VADUZ, contours=[{"time": 10}], generalize=300))[0][1]
    assert vertices(coarse) < 0.6 * vertices(fine)
    assert abs(coarse.area - fine.area) < 0.1 * fine.area


def test_mixed_metrics_in_one_request(andorra):
    fc = _iso(andorra, ANDORRA, contours=[{"time": 5}, {"distance": 2}])
    props = [f["properties"] for f in fc["features"] if "contour" in f["properties"]]
    assert {(p["metric"], p["contour"]) for p in props} == {("time", 5.0), ("distance", 2.0)}


@pytest.mark.parametrize("body,field", [
    ({"locations": [], "contours": [{"time": 5}]}, "locations"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "contours": [{"time": 5}]}, "locations"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "contours": []}, "contours"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "contours": [{"time": 5}] * 5}, "contours"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "contours": [{"time": 121}]}, "contours[0].time"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "contours": [{"time": 5, "distance": 2}]}, "contours[0]"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "costing": "taxi", "contours": [{"time": 5}]}, "costing"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}], "contours": [{"time": 5}], "costing_options": {"bogus": 1}},
     "costing_options.bogus"),
])
def test_library_rejects_bad_requests(andorra, body, field):
    with pytest.raises(InvalidRequest) as ei:
        andorra.isochrone(body)
    assert any(e.field == field for e in ei.value.errors), [e.field for e in ei.value.errors]


def test_unsnappable_location(andorra):
    with pytest.raises(Unprocessable):
        andorra.isochrone({"locations": [{"lon": 10.0, "lat": 10.0}], "contours": [{"time": 5}]})


def test_reach_rejects_bad_arguments(andorra):
    with pytest.raises(InvalidRequest):
        andorra.isochrone_reach(*ANDORRA, metric="speed")
    with pytest.raises(InvalidRequest):
        andorra.isochrone_reach(*ANDORRA, limit=-1)
    with pytest.raises(InvalidRequest) as ei:
        andorra.isochrone_reach(*ANDORRA, "bus")
    assert ei.value.errors[0].field == "costing"
    with pytest.raises(InvalidRequest):
        andorra.isochrone_reach(1.5, 95.0)


def test_partial_edges_are_cut_at_the_budget(andorra):
    """Long edges the search enters but cannot finish: the reached part is inside the polygon, their far
    end (not reachable otherwise) is outside."""
    limit = 600.0
    r = andorra.isochrone_reach(*ANDORRA, "auto", metric="time", limit=limit)
    poly = _contour_geoms(_iso(andorra, ANDORRA, contours=[{"time": limit / 60}]))[0][1]
    g = andorra.graph
    frac = r.reached_fraction
    length = np.asarray(g.edge_length)
    node = r.node_metric(g)
    dst = np.asarray(g.edge_dst)
    cut = np.flatnonzero((frac > 0.1) & (frac < 0.6) & (length > 1500) & ~np.isfinite(node[dst]))
    assert cut.size >= 3
    inside_part = outside_end = 0
    for e in cut.tolist():
        lo, la = g.edge_shape(e, 0.0, float(frac[e]) / 2)
        inside_part += bool(shapely.contains_xy(poly, lo[-1], la[-1]))
        outside_end += not bool(shapely.contains_xy(poly, float(g.node_lon[dst[e]]), float(g.node_lat[dst[e]])))
    print("partial edges", cut.size, inside_part, outside_end)
    assert inside_part >= 0.9 * cut.size and outside_end >= 0.8 * cut.size, (inside_part, outside_end, cut.size)
