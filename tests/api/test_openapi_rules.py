"""The OpenAPI document states the server's cross-field rules (geoengine/server/openapi.py): for each
hand-picked body, the document's schema (validated with jsonschema, draft 2020-12) and the server agree
on valid (not 400) versus invalid (400). The schemathesis run (test_schemathesis.py) explores the same
rules at random; these are the cases the issue named, fixed so they always run."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator
from starlette.testclient import TestClient

from geoengine.server.app import create_app

A = {"lon": 1.5218, "lat": 42.5063}
B = {"lon": 1.5333, "lat": 42.5107}
TRACE = [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5225, "lat": 42.5066}]

CASES = [
    # (path, body, valid)
    ("/route", {"locations": [A, B]}, True),
    ("/route", {"locations": [{**A, "search_radius": 57.0}, B]}, True),  # JSON: 57.0 is an integer
    ("/route", {"locations": [{**A, "search_radius": 57.5}, B]}, False),
    ("/route", {"locations": [{**A, "search_radius": "57"}, B]}, False),
    ("/route", {"locations": [A, B], "date_time": {"type": 1, "value": "2026-01-05T08:00"}}, True),
    ("/route", {"locations": [A, B], "date_time": {"value": "2026-01-05T08:00"}}, False),  # type needed
    ("/route", {"locations": [A, B], "date_time": {"type": 1}}, False),  # value needed for 1..3
    ("/route", {"locations": [A, B], "date_time": {"type": 0}}, True),
    ("/route", {"locations": [A, B], "date_time": {"type": 1, "value": "2300-01-05T08:00"}}, False),
    ("/route", {"locations": [A, B], "costing_options": {"use_highways": 0.2}}, True),
    ("/route", {"locations": [A, B], "costing_options": {"no_such_option": 1}}, False),
    ("/route", {"locations": [A, B], "costing": "truck", "costing_options": {"axle_count": 3}}, True),
    ("/route", {"locations": [A, B], "costing_options": {"axle_count": 3}}, False),  # a truck option, auto
    ("/route", {"locations": [A, B], "costing_options": {"truck": {"bogus": 1}}}, True),  # others ignored
    ("/route", {"locations": [A, B], "costing_options": {"auto": {"bogus": 1}}}, False),
    ("/route", {"locations": [A, B], "directions_options": {"language": "fr-FR"}}, True),
    ("/route", {"locations": [A, B], "directions_options": {"language": "xx"}}, False),
    ("/route", {"locations": [A, B], "directions_options": {"language": " en"}}, False),
    ("/route", {"locations": [A, B], "avoid_polygons": [[[1.52, 42.50], [1.53, 42.50]]]}, False),  # < 3
    ("/matrix", {"sources": [A], "targets": [B], "costing_options": {"auto": {
        "date_time": {"type": 1, "value": "2026-01-05T08:00"}}}}, True),
    ("/matrix", {"sources": [A], "targets": [B], "date_time": {"type": 2, "value": "2026-01-05T08:00"}}, False),
    ("/isochrone", {"locations": [A], "contours": [{"time": 5}]}, True),
    ("/isochrone", {"locations": [A], "contours": [{}]}, False),
    ("/isochrone", {"locations": [A], "contours": [{"time": 5, "distance": 1}]}, False),
    ("/isochrone", {"locations": [A], "contours": []}, False),
    ("/map_match", {"shape": TRACE}, True),
    ("/map_match", {}, False),
    ("/map_match", {"shape": TRACE, "encoded_polyline": "_p~iF~ps|U_ulLnnqC"}, False),
    ("/map_match", {"shape": []}, False),
    ("/map_match", {"shape": TRACE[:1]}, False),
    ("/map_match", {"shape": None, "encoded_polyline": None}, False),
    ("/elevation", {"shape": TRACE}, True),
    ("/elevation", {"shape": TRACE, "encoded_polyline": "_p~iF~ps|U"}, False),
    ("/elevation", {}, False),
    ("/trace_attributes", {"shape": TRACE, "trace_options": {"turn_penalty_factor": 500}}, True),
    ("/trace_attributes", {"shape": TRACE, "trace_options": {"bogus": 1}}, False),
    ("/expansion", {"action": "route", "locations": [A]}, False),
    ("/expansion", {"action": "isochrone", "locations": [A]}, False),
    ("/expansion", {"action": "isochrone", "locations": [A], "contours": [{"time": 2}, {"distance": 1}]}, False),
    ("/expansion", {"action": "isochrone", "locations": [A], "contours": [{"time": 2}]}, True),
    ("/v1/routing/directions", {"waypoints": [A, B], "profile": "driving", "language": "de"}, True),
    ("/v1/routing/directions", {"waypoints": [A, B], "profile": "driving", "language": "-"}, False),
]


@pytest.fixture(scope="module")
def served(andorra, settings, keystore, api_key):
    andorra.warm()
    app = create_app(andorra, settings, keystore)
    client = TestClient(app, headers={"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host})
    return client, app.openapi()


def _validator(doc, path):
    ref = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    schema = {**copy.deepcopy(ref), "components": doc["components"]}
    return Draft202012Validator(schema)  # its #/components/... refs resolve against the embedded copy


@pytest.mark.parametrize(("path", "body", "valid"), CASES, ids=[f"{p}-{i}" for i, (p, _b, _v) in enumerate(CASES)])
def test_document_and_server_agree(served, path, body, valid):
    client, doc = served
    errors = list(_validator(doc, path).iter_errors(body))
    assert (not errors) == valid, f"the document says {'valid' if not errors else errors[0].message}"
    resp = client.post(path, json=body)
    assert (resp.status_code != 400) == valid, resp.text
    assert resp.status_code < 500, resp.text


def test_the_get_form_of_valhalla_actions_documents_its_json_parameter(served):
    _client, doc = served
    (param,) = doc["paths"]["/height"]["get"]["parameters"]
    assert param["name"] == "json" and param["required"] is True
    assert param["content"]["application/json"]["schema"]["$ref"].endswith("/HeightRequest")


@pytest.mark.parametrize(("coords", "ok"), [("1.5218,42.5063;1.5333,42.5107", True),
                                            ("1e0,42.5063;1.5333,42.5107", False),
                                            ("1.5218,inf;1.5333,42.5107", False)])
def test_osrm_coordinates_are_decimal_degrees(served, coords, ok):
    import re

    client, doc = served
    param = next(p for p in doc["paths"]["/route/{version}/{profile}/{coordinates}"]["get"]["parameters"]
                 if p["name"] == "coordinates")
    assert bool(re.fullmatch(param["schema"]["pattern"], coords)) == ok
    resp = client.get(f"/route/v1/driving/{coords}")
    assert (resp.status_code == 200) == ok, resp.text


@pytest.mark.parametrize(("types", "ok"), [("", True), ("place", True), ("place, poi", True), ("poi,", True),
                                           (",,", False), ("street", False), ("place,street", False)])
def test_search_types_document_and_server_agree(served, types, ok):
    """`types` as search.requests.parse_types reads it (empty is every type, items trimmed, empty items
    skipped): the document's pattern says the same (schemathesis found an empty `types` the server
    accepted and the pattern refused)."""
    import re

    client, doc = served
    for path in ("/search", "/search/reverse"):
        param = next(p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == "types")
        assert bool(re.fullmatch(param["schema"]["pattern"], types)) == ok, path
    resp = client.get("/search", params={"q": "Andorra", "types": types})
    assert (resp.status_code == 200) == ok, resp.text
    assert resp.status_code < 500
