"""Stop-order optimisation: Held-Karp against brute force, the heuristic against the given order and
random orders, on travel-time matrices between real road nodes; POST /optimised_route end to end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoengine.routing.stop_order import (
    EXACT_MAX,
    held_karp,
    iterated_local_search,
    local_search,
    path_cost,
    solve,
)

from .conftest import ANDORRA, reachable_points


def _brute(D):
    n = len(D)
    best = np.inf
    for p in itertools.permutations(range(1, n - 1)):
        best = min(best, path_cost(D, np.array([0, *p, n - 1])))
    return best


def _is_order(o, n):
    return sorted(o.tolist()) == list(range(n)) and o[0] == 0 and o[-1] == n - 1


@pytest.fixture(scope="module", params=["andorra", "liechtenstein"])
def real_matrix(request, engine_for):
    engine = engine_for(request.param)
    pts = reachable_points(engine, 24, seed=11)
    res = engine.matrix(pts, pts, "auto")
    return np.ascontiguousarray(res.time_s)


@pytest.mark.parametrize("n", [3, 5, 7, 9])
def test_held_karp_equals_brute_force_on_real_sets(real_matrix, n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        idx = rng.choice(len(real_matrix), n, replace=False)
        D = np.ascontiguousarray(real_matrix[np.ix_(idx, idx)])
        o = held_karp(D)
        assert _is_order(o, n)
        assert path_cost(D, o) == pytest.approx(_brute(D), rel=1e-12)


def test_matrix_is_asymmetric(real_matrix):
    # one-way streets and turn costs: the optimiser must not assume symmetry
    assert not np.allclose(real_matrix, real_matrix.T)


def test_heuristic_never_worse_than_given_and_improves_random_orders(real_matrix):
    D = real_matrix
    n = len(D)
    rng = np.random.default_rng(3)
    improved = 0
    for _ in range(10):
        inner = rng.permutation(np.arange(1, n - 1))
        order = np.concatenate([[0], inner, [n - 1]]).astype(np.int64)
        ls = local_search(D, order)
        assert _is_order(ls, n)
        assert path_cost(D, ls) <= path_cost(D, order) + 1e-9
        improved += path_cost(D, ls) < 0.8 * path_cost(D, order)
        sol, method = solve(D, order)
        assert method == "heuristic" and _is_order(sol, n)
        assert path_cost(D, sol) <= path_cost(D, ls) + 1e-9
    assert improved >= 8


def test_heuristic_matches_exact_on_exact_sizes(real_matrix):
    # on sizes the DP solves exactly, iterated local search finds the optimum or comes close
    rng = np.random.default_rng(5)
    gaps = []
    for _ in range(5):
        idx = rng.choice(len(real_matrix), EXACT_MAX, replace=False)
        D = np.ascontiguousarray(real_matrix[np.ix_(idx, idx)])
        exact = path_cost(D, held_karp(D))
        ils = path_cost(D, iterated_local_search(D, np.arange(EXACT_MAX), 200, 1))
        assert ils >= exact - 1e-9
        gaps.append(ils / exact - 1)
    assert max(gaps) < 0.05


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 9), st.integers(0, 2**31 - 1))
def test_held_karp_property_random_asymmetric(n, seed):
    D = np.random.default_rng(seed).random((n, n)) * 100
    o = held_karp(D)
    assert _is_order(o, n)
    assert path_cost(D, o) == pytest.approx(_brute(D), rel=1e-12)


def _locs(pts):
    return [{"lon": float(x), "lat": float(y)} for x, y in pts]


def test_optimised_route_endpoint(andorra_client, andorra):
    places = ["andorra_la_vella", "pas_de_la_casa", "sant_julia", "canillo", "ordino", "encamp", "andorra_la_vella"]
    locs = [{"lon": ANDORRA[p][0], "lat": ANDORRA[p][1], "name": p} for p in places]
    r = andorra_client.post("/optimised_route", json={"locations": locs, "costing": "auto",
                                                      "directions_options": {"language": "es"}})
    assert r.status_code == 200, r.text
    doc = r.json()
    order = doc["optimized_order"]
    assert order[0] == 0 and order[-1] == len(locs) - 1 and sorted(order) == list(range(len(locs)))
    assert doc["optimisation"]["method"] == "exact"
    assert doc["optimisation"]["time_s"] <= doc["optimisation"]["given_order_time_s"]
    # the brute force over the same matrix agrees
    pts = np.array([[p["lon"], p["lat"]] for p in locs])
    T = np.array(andorra.matrix(pts, pts, "auto").time_s)
    np.fill_diagonal(T, 0)
    assert doc["optimisation"]["time_s"] == pytest.approx(_brute(T), abs=0.1)
    trip = doc["trip"]
    assert [loc["original_index"] for loc in trip["locations"]] == order
    assert [loc["name"] for loc in trip["locations"]] == [places[i] for i in order]
    assert len(trip["legs"]) == len(locs) - 1
    # the trip follows the chosen order; its time is the matrix time of that order (same router)
    assert trip["summary"]["time"] == pytest.approx(doc["optimisation"]["time_s"], rel=0.02)
    # the given order (a zig-zag) is slower
    given_trip = andorra.route(locations=locs)["trip"]
    assert given_trip["summary"]["time"] > trip["summary"]["time"]


def test_optimised_route_many_stops_heuristic(liechtenstein, api_client):
    pts = reachable_points(liechtenstein, 20, seed=4)
    r = api_client(liechtenstein).post("/optimised_route", json={"locations": _locs(pts), "costing": "auto"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["optimisation"]["method"] == "heuristic"
    assert doc["optimisation"]["time_s"] < doc["optimisation"]["given_order_time_s"]
    assert len(doc["trip"]["legs"]) == 19


def test_two_locations(andorra):
    doc = andorra.optimised_route(locations=[{"lon": ANDORRA["encamp"][0], "lat": ANDORRA["encamp"][1]},
                                             {"lon": ANDORRA["ordino"][0], "lat": ANDORRA["ordino"][1]}])
    assert doc["optimized_order"] == [0, 1] and doc["optimisation"]["method"] == "trivial"


@pytest.mark.parametrize("body, field", [
    ({"locations": [{"lon": 1.52, "lat": 42.5}]}, "locations"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "costing": "motorcycle"}, "costing"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}, {"lon": 1.53, "lat": 42.5}], "costing": "taxi"}, "costing"),
    ({"locations": [{"lon": 1.52, "lat": 42.5}, {"lon": 200, "lat": 42.5}]}, "locations[1].lon"),
    ({"locations": "here"}, "locations"),
    ({}, "locations"),
])
def test_bad_requests_are_400(andorra_client, body, field):
    r = andorra_client.post("/optimised_route", json=body)
    assert r.status_code == 400, r.text
    assert any(e["field"] == field for e in r.json()["errors"]), r.json()


def test_bad_costing_option_is_400(andorra_client):
    locs = [{"lon": ANDORRA[p][0], "lat": ANDORRA[p][1]} for p in ("encamp", "ordino", "canillo")]
    r = andorra_client.post("/optimised_route", json={"locations": locs, "costing_options": {"use_highways": 7}})
    assert r.status_code == 400, r.text


def test_unreachable_stop_is_422(andorra_client):
    locs = [{"lon": ANDORRA[p][0], "lat": ANDORRA[p][1]} for p in ("encamp", "ordino")]
    locs.insert(1, {"lon": 1.44, "lat": 42.65})
    r = andorra_client.post("/optimised_route", json={"locations": locs})
    assert r.status_code == 422, r.text


def test_openapi_documents_optimised_route(andorra_client):
    spec = andorra_client.get("/openapi.json").json()
    op = spec["paths"]["/optimised_route"]["post"]
    assert "requestBody" in op and "200" in op["responses"]
    assert "OptimisedRouteResponse" in spec["components"]["schemas"]


@pytest.mark.parametrize("costing", ["bicycle", "pedestrian", "truck"])
def test_other_costings(andorra, costing):
    # (Sant Julià is not reachable on foot in this 2013 extract: the CG-1 is closed to pedestrians)
    places = ["andorra_la_vella", "encamp", "canillo", "ordino", "andorra_la_vella"]
    locs = [{"lon": ANDORRA[p][0], "lat": ANDORRA[p][1]} for p in places]
    doc = andorra.optimised_route(locations=locs, costing=costing)
    assert doc["trip"]["costing"] == costing
    pts = np.array([[p["lon"], p["lat"]] for p in locs])
    T = np.array(andorra.matrix(pts, pts, costing).time_s)
    np.fill_diagonal(T, 0)
    assert doc["optimisation"]["time_s"] == pytest.approx(_brute(T), abs=0.1)


def test_stop_unreachable_for_the_costing_is_422(andorra_client):
    # Sant Julià de Lòria can be driven to but not walked to in this extract
    locs = [{"lon": ANDORRA[p][0], "lat": ANDORRA[p][1]} for p in ("andorra_la_vella", "sant_julia", "encamp")]
    assert andorra_client.post("/optimised_route", json={"locations": locs}).status_code == 200
    r = andorra_client.post("/optimised_route", json={"locations": locs, "costing": "pedestrian"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == "locations[1]"
