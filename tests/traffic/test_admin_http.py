"""POST /admin/speeds and `geoengine speeds` on the real Liechtenstein bundle: the admin scope is needed,
a bad file is a 400 problem naming its line with nothing applied, a good one changes /route at once and
shows in /health; --reset and ?reset=true return to the profile speeds; the CLI has --help."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from starlette.testclient import TestClient

import geoengine
from geoengine.gateway import KeyStore
from geoengine.server.app import create_app

HOST = "speeds.test"
LOCS = [{"lon": 9.5209, "lat": 47.1410}, {"lon": 9.5100, "lat": 47.2200}]


@pytest.fixture(scope="module")
def setup(build_region, settings, tmp_path_factory):
    home = tmp_path_factory.mktemp("admin-home")
    s = dataclasses.replace(settings, home=home, state=home / "state.sqlite3", speeds_dir=home / "speeds",
                            gateway_host=HOST)
    engine = geoengine.open(build_region("liechtenstein"), settings=s)
    store = KeyStore(s.state)
    client = TestClient(create_app(engine, s, store), raise_server_exceptions=False)
    admin, _ = store.create("unlimited", "ops", scopes=["admin"])
    plain, _ = store.create("unlimited", "app")
    return engine, client, {"X-Gateway-Key": admin, "X-Gateway-Host": HOST}, \
        {"X-Gateway-Key": plain, "X-Gateway-Host": HOST}


def way_csv(engine, kmh) -> bytes:
    ways = np.unique(np.asarray(engine.graph.seg_way))
    return ("way_id,speed_kmh\n" + "".join(f"{w},{kmh}\n" for w in ways.tolist())).encode()


def test_admin_speeds_over_http(setup):
    engine, client, admin, plain = setup
    client.post("/admin/speeds?reset=true", headers=admin)
    t0 = client.post("/route", json={"locations": LOCS}, headers=plain).json()["trip"]["summary"]["time"]
    r = client.post("/admin/speeds", content=way_csv(engine, 15), headers=plain)
    assert r.status_code == 403 and r.headers["content-type"].startswith("application/problem+json")
    assert "admin" in r.json()["detail"]
    gen = client.get("/health", headers=plain).json()["speeds"]["generation"]
    # a bad file: 400 naming the line, nothing applied
    bad = way_csv(engine, 15) + b"12,-3\n"
    r = client.post("/admin/speeds", content=bad, headers=admin)
    assert r.status_code == 400, r.text
    body = r.json()
    n_lines = bad.count(b"\n")
    assert body["errors"][0]["field"] == f"line {n_lines}" and f"line {n_lines}" in body["detail"]
    assert client.get("/health", headers=plain).json()["speeds"]["generation"] == gen
    assert client.post("/route", json={"locations": LOCS}, headers=plain).json()["trip"]["summary"]["time"] == t0
    r = client.post("/admin/speeds?form=segment", content=way_csv(engine, 15), headers=admin)
    assert r.status_code == 400 and "line 1" in r.json()["detail"]
    # a good one: every road at 15 km/h at once
    r = client.post("/admin/speeds", content=way_csv(engine, 15), headers=admin)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["generation"] == gen + 1 and info["source"] == "<request>" and info["form"] == "way"
    doc = client.post("/route", json={"locations": LOCS}, headers=plain).json()["trip"]["summary"]
    assert doc["time"] > t0 and doc["time"] >= doc["length"] * 1000 / (15 / 3.6)
    osrm = client.get("/route/v1/driving/9.5209,47.1410;9.5100,47.2200", headers=plain).json()
    assert osrm["routes"][0]["duration"] >= osrm["routes"][0]["distance"] / (15 / 3.6)
    assert client.get("/health", headers=plain).json()["speeds"] == info
    r = client.post("/admin/speeds?reset=true", headers=admin)
    assert r.status_code == 200 and r.json()["file"] is None
    assert client.post("/route", json={"locations": LOCS}, headers=plain).json()["trip"]["summary"]["time"] == t0


def test_cli_speeds(setup, tmp_path):
    engine, *_ = setup
    env_dir = engine.settings.speeds_dir
    env = {"GEOENGINE_SPEEDS_DIR": str(env_dir), "PATH": "/usr/bin:/bin"}
    import os

    env = {**os.environ, **env}
    run = lambda *a: subprocess.run([sys.executable, "-m", "geoengine", "speeds", *a], env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    for args in (("--help",), ("apply", "--help"), ("show", "--help")):
        r = run(*args)
        assert r.returncode == 0 and "usage: geoengine speeds" in r.stdout
    f = tmp_path / "w.csv"
    f.write_bytes(way_csv(engine, 20))
    r = run("apply", str(engine.path), str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert '"form": "way"' in r.stdout
    assert engine.info()["speeds"]["source"] == str(f.resolve())
    f.write_bytes(b"way_id,speed_kmh\n1,20\n")
    r = run("apply", str(engine.path), str(f))
    assert r.returncode == 1 and "line 2" in r.stderr and "OSM way 1" in r.stderr
    assert engine.info()["speeds"]["rows"] > 1  # unchanged
    r = run("apply", str(engine.path))
    assert r.returncode == 2 and "--reset" in r.stderr
    r = run("apply", str(engine.path), "--reset")
    assert r.returncode == 0 and "profile speeds" in r.stdout
    assert engine.info()["speeds"]["file"] is None
    r = run("show", str(engine.path))
    assert r.returncode == 0 and "profile speeds" in r.stdout
