"""The FastAPI routes, and so /openapi.json, are generated from the endpoint table (server/endpoints.py):
every route of the app is one of the table's, every entry's paths are routes and documented operations
(the OSRM dialect's one per service), a path two APIs share is told apart by the entry's `when`, and the
quota class an entry states (documented as `x-quota`) is the one the gateway counts its paths in."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute
from starlette.testclient import TestClient

from geoengine.gateway import path_scopes
from geoengine.server import endpoints
from geoengine.server.app import create_app


@pytest.fixture(scope="module")
def app(andorra, settings, keystore):
    return create_app(andorra, settings, keystore)


def _paths(ep):
    return [p for p, _route, _doc in ep.paths] or [ep.path]


def test_every_route_is_generated_from_the_table(app):
    declared = {(p, m) for ep in endpoints.TABLE for p in _paths(ep) for m in ep.methods}
    routes = [r for r in app.router.routes if isinstance(r, APIRoute)]
    assert all(isinstance(r, endpoints.TableRoute) for r in routes), [r.path for r in routes
                                                                       if not isinstance(r, endpoints.TableRoute)]
    generated = {(r.path, m) for r in routes for m in r.methods}
    assert generated == declared
    # the app's other routes are FastAPI's own documents (/openapi.json, /docs, /redoc)
    assert {r.path for r in app.router.routes if not isinstance(r, APIRoute)} <= {
        "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}


def test_every_documented_entry_is_in_openapi_with_its_model(app):
    doc = app.openapi()["paths"]
    for ep in endpoints.TABLE:
        for path, _route, extra in ep.paths or ((ep.path, ep.route, ep.doc),):
            if extra.get("include_in_schema", True) is False:
                assert path not in doc or all(m.lower() not in doc[path] for m in ep.methods if m != "GET"), path
                continue
            ops = doc[path]
            assert "get" in ops or "post" in ops, path
            for method in ep.methods:
                if method == "HEAD":
                    continue
                op = ops[method.lower()]
                assert op["tags"] == [ep.tag], (path, op["tags"])
                if ep.model is not None:
                    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
                        "$ref": f"#/components/schemas/{ep.model.__name__}"}, path
    for service in ("route", "table", "match", "nearest", "trip"):  # the OSRM dialect, one path per service
        assert f"/{service}/{{version}}/{{profile}}/{{coordinates}}" in doc


def test_quota_classes_of_the_table_are_the_gateways(app):
    for ep in endpoints.TABLE:
        for path in _paths(ep):
            concrete = re.sub(r"\{version\}", "v1", re.sub(r"\{(\w+)\}", r"x\1", path))
            scopes = path_scopes(concrete)
            stated = {"tile": set(), "non_tile": {"non_tile"}, "routing": {"non_tile", "routing"}}[ep.quota_of(path)]
            assert scopes - {"all"} == stated, (ep.name, path, scopes)
    doc = app.openapi()["paths"]
    assert doc["/route"]["post"]["x-quota"] == "routing" and doc["/health"]["get"]["x-quota"] == "non_tile"
    assert doc["/tiles/{source}/{z}/{x}/{y}"]["get"]["x-quota"] == "tile"
    assert doc["/nearest/{version}/{profile}/{coordinates}"]["get"]["x-quota"] == "non_tile"


def test_shared_paths_go_to_the_api_the_request_names(app, api_key, settings):
    client = TestClient(app, raise_server_exceptions=False)
    client.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host})
    nominatim = client.get("/status?format=json")
    assert nominatim.status_code == 200 and nominatim.json()["status"] == 0  # Nominatim's status object
    valhalla = client.get("/status")
    assert valhalla.status_code == 200 and "available_actions" in valhalla.json()
    spec = client.get("/search?q=Andorra&size=1&lat=42.5&lon=1.5&lon=1.5")  # a repeat: the FastAPI route
    assert spec.status_code == 200 and "results" in spec.json()
    dialect = client.get("/search?q=Andorra&format=jsonv2&limit=1")
    assert dialect.status_code == 200 and isinstance(dialect.json(), list)


def test_shared_paths_under_a_root_path(app, api_key, settings):
    """Behind a proxy that mounts the service under a prefix (root_path), the shared paths are told apart
    by the path as the router matches it."""
    client = TestClient(app, raise_server_exceptions=False, root_path="/maps")
    client.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host})
    spec = client.get("/maps/search?q=Andorra&size=1&size=1")
    assert spec.status_code == 200 and "results" in spec.json()
    dialect = client.get("/maps/search?q=Andorra&format=jsonv2&limit=1&limit=1")
    assert dialect.status_code == 200 and isinstance(dialect.json(), list)
    assert client.get("/maps/status").json()["available_actions"]
