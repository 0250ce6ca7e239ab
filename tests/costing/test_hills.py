"""use_hills: bicycle and pedestrian costs from the DEM grades of the real Andorra graph, and the
issue's case: a bicycle with use_hills 0 avoids a steep climb that use_hills 1 accepts."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.costing import edge_costs, hills, inactive_options, parse_costing_options
from geoengine.geo import decode_polyline, haversine_m
from geoengine.graph import tags as T


def _costs(graph, costing, **options):
    return edge_costs(graph, costing, parse_costing_options(costing, options))


@pytest.fixture(scope="module")
def graph(andorra):
    return andorra.graph


@pytest.fixture(scope="module")
def climbs(graph):
    """Directed edges of paved roads that climb at least 30 m at 6 % or more (and descend less than a
    third of that), both ways usable by bike."""
    bike = graph.mode_mask("bicycle")
    paved = np.isin(graph.edge_attr(graph.seg_surface), [0, 1, 2])
    steps = graph.edge_class == T.CLASS["steps"]
    e = np.flatnonzero((graph.edge_climb > 30) & (graph.edge_descent < graph.edge_climb / 3)
                       & (graph.edge_up_grade > 0.06) & bike & bike[np.arange(graph.n_edges) ^ 1]
                       & paved & ~steps)
    assert len(e) > 20
    return e


@pytest.fixture(scope="module")
def downhill(graph):
    """Directed bicycle edges that only descend (monotone tunnels and bridges, smooth slopes)."""
    e = np.flatnonzero((graph.edge_climb == 0) & (graph.edge_descent > 1) & graph.mode_mask("bicycle"))
    assert len(e) > 10
    return e


def test_bicycle_is_slower_up_than_down(graph, climbs):
    _, t, length = _costs(graph, "bicycle", use_hills=0.5)
    up, down = t[climbs], t[climbs ^ 1]
    assert (up > down).all()
    # against the flat time at the type's speed (Hybrid 18 km/h; signals add to both)
    flat_time = length[climbs] / (18 / 3.6)
    assert (up > flat_time).all()
    # the climb's extra time is C (10 + 20 g) / v (a 10 % climb is ridden at 0.45 of the flat speed),
    # less the time won on the (small) descent stretch, ridden up to 1.5x faster
    v = 18 / 3.6
    g, c = graph.edge_up_grade[climbs].astype(float), graph.edge_climb[climbs].astype(float)
    gd, dd = graph.edge_down_grade[climbs].astype(float), graph.edge_descent[climbs].astype(float)
    v_down = np.minimum(v * np.minimum(1 + 4 * gd, 1.5), 40 / 3.6)
    won = np.divide(dd, gd, out=np.zeros_like(dd), where=gd > 0) * (1 / v_down - 1 / v)
    expected = c * (10 + 20 * g) / v + won
    np.testing.assert_allclose(up - flat_time - 5.0 * graph.edge_signals[climbs], expected, rtol=1e-4)


def test_bicycle_use_hills_orders_costs_on_climbs(graph, climbs, downhill):
    c0, t0, _ = _costs(graph, "bicycle", use_hills=0)
    c5, t5, _ = _costs(graph, "bicycle", use_hills=0.5)
    c1, t1, _ = _costs(graph, "bicycle", use_hills=1)
    assert (c0[climbs] > c5[climbs]).all() and (c5[climbs] > c1[climbs]).all()
    # use_hills changes cost, never time
    np.testing.assert_array_equal(t0, t1)
    np.testing.assert_array_equal(t0, t5)
    # edges without climb cost the same whatever use_hills says (the bicycle penalty is on climbs)
    np.testing.assert_array_equal(c0[downhill], c1[downhill])
    # at 1 the climb costs its time only (here: with the road factors of the other options)
    ratio = c1[climbs] / t1[climbs]
    nohill = _costs(graph, "bicycle", use_hills=1)[0][climbs ^ 1] / t1[climbs ^ 1]
    np.testing.assert_allclose(ratio, nohill, rtol=1e-9)
    # steeper climbs are penalised more per metre climbed
    extra = (c0[climbs] - c1[climbs]) / graph.edge_climb[climbs]
    g = graph.edge_up_grade[climbs]
    assert np.corrcoef(g, extra)[0, 1] > 0.5


def test_pedestrian_tobler_and_use_hills(graph, climbs):
    c0, t, length = _costs(graph, "pedestrian", use_hills=0)
    c1, t1, _ = _costs(graph, "pedestrian", use_hills=1)
    np.testing.assert_array_equal(t, t1)
    flat_time = length / (5.1 / 3.6)
    assert (t[climbs] > flat_time[climbs]).all()
    # a gentle descent (3-8 %) is walked faster than the flat, as Tobler's function says
    gentle = np.flatnonzero((graph.edge_descent > 20) & (graph.edge_climb < 0.05 * graph.edge_descent)
                            & (graph.edge_down_grade > 0.03) & (graph.edge_down_grade < 0.08)
                            & (graph.edge_class != T.CLASS["steps"]) & graph.mode_mask("pedestrian"))
    assert len(gentle) > 5 and (t[gentle] < flat_time[gentle]).all()
    walk = climbs[np.isfinite(c1[climbs])]
    assert len(walk) > 10 and (c0[walk] > c1[walk]).all()
    assert hills.tobler(np.array([-0.05]))[0] == pytest.approx(np.exp(3.5 * 0.05))
    assert hills.tobler(np.array([0.0]))[0] == 1.0


def test_shortest_ignores_hills(graph, climbs):
    c0, _, length = _costs(graph, "bicycle", use_hills=0, shortest=True)
    np.testing.assert_array_equal(c0[climbs], length[climbs])


def test_use_hills_is_active_with_grades_and_inactive_without(graph, liechtenstein):
    opts = parse_costing_options("bicycle", {"use_hills": 0.1})
    assert inactive_options(graph, opts) == []
    assert any("use_hills" in n for n in inactive_options(liechtenstein.graph, opts))
    # without grades use_hills changes nothing
    g = liechtenstein.graph
    np.testing.assert_array_equal(_costs(g, "bicycle", use_hills=0)[0], _costs(g, "bicycle", use_hills=1)[0])
    np.testing.assert_array_equal(_costs(g, "pedestrian", use_hills=0)[0], _costs(g, "pedestrian", use_hills=1)[0])


# Encamp (on the Beixalis road above the town) to Ordino: over the Coll d'Ordino (1,980 m) is the
# quicker ride, through the Coll de Beixalis (1,796 m) and La Massana the gentler one.
ENCAMP = {"lon": 1.57405, "lat": 42.53627}
ORDINO = {"lon": 1.53425, "lat": 42.55578}


def _profile(andorra, shape):
    """Heights of the route shape resampled every 20 m (read from the DEM, not from the grades),
    smoothed over 100 m: (climb m, highest m, steepest 500 m stretch as a fraction)."""
    lat, lon = decode_polyline(shape, 6)
    d = np.concatenate([[0.0], np.cumsum(haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]))])
    x = np.arange(0.0, d[-1], 20.0)
    h = andorra.elevation(lat=np.interp(x, d, lat), lon=np.interp(x, d, lon))
    hs = np.convolve(np.pad(h, 2, mode="edge"), np.ones(5) / 5, mode="valid")
    dh = np.diff(hs)
    steepest = float(np.max((hs[25:] - hs[:-25]) / 500.0))
    return float(dh[dh > 0].sum()), float(h.max()), steepest


def test_bicycle_use_hills_0_avoids_the_steep_climb_that_1_accepts(andorra):
    trips = {}
    for u in (0, 1):
        doc = andorra.route(locations=[ENCAMP, ORDINO], costing="bicycle", costing_options={"use_hills": u})
        trips[u] = doc["trip"]
        assert "warnings" not in trips[u]  # use_hills is in effect on this bundle
    climb0, top0, steep0 = _profile(andorra, trips[0]["legs"][0]["shape"])
    climb1, top1, steep1 = _profile(andorra, trips[1]["legs"][0]["shape"])
    # use_hills 1 takes the quicker way over the higher, steeper pass ...
    assert trips[1]["summary"]["time"] < trips[0]["summary"]["time"]
    assert top1 > 1900 and steep1 > 0.15
    # ... use_hills 0 rides further to climb less and stay lower and gentler
    assert trips[0]["summary"]["length"] > trips[1]["summary"]["length"]
    assert climb0 < climb1 - 50
    assert top0 < top1 - 100
    assert steep0 < steep1


def test_use_hills_route_climb_agrees_with_the_grades(andorra):
    """The climb of a route from the edge grades (what route summaries report) matches the climb read
    along its shape from the DEM."""
    from geoengine.elevation.grades import climb_descent
    from geoengine.services.route import RouteRequest
    from geoengine.validation import validate

    router = andorra.router
    opts = parse_costing_options("bicycle", {"use_hills": 0})
    prof = router.profile("bicycle", opts)
    req = validate(RouteRequest, None, locations=[ENCAMP, ORDINO], costing="bicycle")
    _, pieces = router.route_legs(prof, req.locations)
    leg = pieces[0]
    cov = np.ones(len(leg.edges))
    cov[0] = 1.0 - leg.f_first
    cov[-1] = leg.f_last if len(leg.edges) > 1 else leg.f_last - leg.f_first
    climb, descent = climb_descent(andorra.graph, leg.edges, cov)
    doc = andorra.route(locations=[ENCAMP, ORDINO], costing="bicycle", costing_options={"use_hills": 0})
    shape_climb, _, _ = _profile(andorra, doc["trip"]["legs"][0]["shape"])
    assert climb == pytest.approx(shape_climb, rel=0.15)
    h = andorra.elevation(lat=[ENCAMP["lat"], ORDINO["lat"]], lon=[ENCAMP["lon"], ORDINO["lon"]])
    assert climb - descent == pytest.approx(h[1] - h[0], abs=25)  # snapped ends are near the points
