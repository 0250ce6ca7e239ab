"""Fixtures of the server tests."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.gateway import KeyStore, load_plans
from geoengine.server.app import create_app
from tests.server.test_frontdoor import HOST


@pytest.fixture()
def served(tmp_path, andorra):
    settings = Settings(home=tmp_path, gateway_host=HOST, gateway_key_ttl_s=60, cors_origins="https://app.example")
    store = KeyStore(settings.state, load_plans(None))
    app = create_app(andorra, settings)
    return app, store, TestClient(app, raise_server_exceptions=False)
