"""Shared fixtures: real sample data from ../shared/data (or GEOENGINE_DATA_MIRROR), bundles built
once per test session, engines, and in-process HTTP clients with valid gateway credentials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from geoengine.config import Settings

# CI runs property tests derandomised (the same examples every run), so a red CI always reproduces.
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]


def shared_data() -> Path:
    mirror = os.environ.get("GEOENGINE_DATA_MIRROR")
    if mirror and not mirror.startswith(("http://", "https://")) and Path(mirror).is_dir():
        return Path(mirror)
    return (ROOT.parent / "shared" / "data").resolve()


SHARED_DATA = shared_data()


def data_file(rel: str) -> Path:
    path = SHARED_DATA / rel
    if not path.exists():
        pytest.fail(f"sample data {path} is missing: tests need ../shared/data or GEOENGINE_DATA_MIRROR")
    return path


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    return SHARED_DATA


@pytest.fixture(scope="session")
def session_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("geoengine-home")


@pytest.fixture(scope="session")
def settings(session_home) -> Settings:
    return Settings(home=session_home, data_mirror=str(SHARED_DATA), gateway_host="test.geoengine.local")


_BUNDLES: dict[str, Path] = {}


@pytest.fixture(scope="session")
def build_region(settings):
    """build_region(name) -> path of a bundle of that sample region with every stage, built once per session."""
    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.progress import NullProgress

    def _build(name: str) -> Path:
        if name not in _BUNDLES:
            inputs = resolve_inputs(name, settings, progress=NullProgress())
            _BUNDLES[name] = build(inputs, default_out(inputs, settings), settings, progress=NullProgress())
        return _BUNDLES[name]

    return _build


_ENGINES: dict[str, object] = {}


@pytest.fixture(scope="session")
def engine_for(build_region, settings):
    """engine_for(name) -> a shared Engine for that region's session bundle."""
    import geoengine

    def _engine(name: str):
        if name not in _ENGINES:
            _ENGINES[name] = geoengine.open(build_region(name), settings=settings)
        return _ENGINES[name]

    return _engine


@pytest.fixture(scope="session")
def andorra(engine_for):
    return engine_for("andorra")


@pytest.fixture(scope="session")
def liechtenstein(engine_for):
    return engine_for("liechtenstein")


@pytest.fixture(scope="session")
def keystore(settings):
    from geoengine.gateway import KeyStore

    return KeyStore(settings.state)


@pytest.fixture(scope="session")
def api_key(keystore) -> str:
    """A key on the unlimited plan, so tests never run into quotas unless they mean to."""
    key, _ = keystore.create("unlimited", "tests")
    return key


@pytest.fixture(scope="session")
def api_client(settings, keystore, api_key):
    """api_client(engine) -> a starlette TestClient for that engine with valid gateway headers preset."""
    from starlette.testclient import TestClient

    from geoengine.server.app import create_app

    clients = {}

    def _client(engine):
        if id(engine) not in clients:
            app = create_app(engine, settings, keystore)
            client = TestClient(app, raise_server_exceptions=False)
            client.headers.update({"X-Gateway-Key": api_key, "X-Gateway-Host": settings.gateway_host})
            clients[id(engine)] = client
        return clients[id(engine)]

    return _client
