"""End to end: the real CLI in subprocesses. `geoengine serve` with no arguments fetches and builds
the default region, then serves it on loopback; a key from `geoengine keys create` opens /health."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.serving import free_port, stop

from .conftest import SHARED_DATA

pytestmark = pytest.mark.e2e


def get(url, headers=None, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, headers={**(headers or {}), **({"Content-Type": "application/json"} if data else {})},
                                 data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def cli(*args, env):
    return subprocess.run([sys.executable, "-m", "geoengine", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def test_serve_without_arguments_builds_and_serves_the_default_region(tmp_path):
    env = {**os.environ, "GEOENGINE_HOME": str(tmp_path), "GEOENGINE_DATA_MIRROR": str(SHARED_DATA),
           "GEOENGINE_GATEWAY_HOST": "e2e.test"}
    env.pop("GEOENGINE_BUNDLE", None)
    assert "--plan" in cli("keys", "create", "--help", env=env).stdout
    made = cli("keys", "create", "--plan", "free", "--label", "e2e", env=env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    assert key.startswith("gk_")
    port = free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "geoengine", "serve", "--port", str(port), "--exit-after", "900"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 600
        status = None
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail("serve exited early:\n" + (tmp_path / "serve.log").read_text())
            try:
                status, _, body = get(f"http://127.0.0.1:{port}/health", {"X-Gateway-Key": key, "X-Gateway-Host": "e2e.test"})
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        assert status == 200, body
        doc = json.loads(body)
        assert doc["status"] == "ok" and doc["region"] == "andorra"
        status, headers, body = get(f"http://127.0.0.1:{port}/health")
        assert status == 403 and json.loads(body)["status"] == 403
        status, _, _ = get(f"http://127.0.0.1:{port}/health", {"X-Gateway-Key": key, "X-Gateway-Host": "other"})
        assert status == 403
        # the other groups answer over the socket too, from the bundle the server built itself
        auth = {"X-Gateway-Key": key, "X-Gateway-Host": "e2e.test"}
        a, b = {"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}
        status, _, body = get(f"http://127.0.0.1:{port}/route", auth, {"locations": [a, b]})
        assert status == 200, body
        assert json.loads(body)["trip"]["summary"]["length"] > 0.5
        spec_time = json.loads(body)["trip"]["summary"]["time"]
        # the dialects answer over the socket too (docs/osrm.md, docs/valhalla.md)
        c = f"{a['lon']},{a['lat']};{b['lon']},{b['lat']}"
        status, _, body = get(f"http://127.0.0.1:{port}/route/v1/driving/{c}?overview=false", auth)
        assert status == 200 and abs(json.loads(body)["routes"][0]["duration"] - spec_time) <= 0.01 * spec_time
        status, _, body = get(f"http://127.0.0.1:{port}/sources_to_targets", auth, {"sources": [a], "targets": [b]})
        assert status == 200 and abs(json.loads(body)["sources_to_targets"][0][0]["time"] - spec_time) <= 1
        status, _, body = get(f"http://127.0.0.1:{port}/search?q=andorra%20la%20vella&size=1", auth)
        assert status == 200 and json.loads(body)["results"][0]["name"] == "Andorra la Vella"
        status, _, body = get(f"http://127.0.0.1:{port}/elevation?lat=42.5063&lon=1.5218", auth)
        assert status == 200 and 900 < json.loads(body)["elevation_m"] < 1200
        status, headers, _ = get(f"http://127.0.0.1:{port}/tiles/andorra/0/0/0", auth)
        assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
        output = (tmp_path / "serve.log").read_text()
        assert "[source] started" in output, "the build must show progress"
        assert key not in output, "the key must never appear in the server's log"
        listed = cli("keys", "list", env=env)
        assert key not in listed.stdout and "e2e" in listed.stdout
        assert (tmp_path / "bundles" / "andorra" / "manifest.json").exists()
    finally:
        stop(proc)
        log.close()


def test_every_command_has_help():
    for args in (["--help"], ["fetch", "--help"], ["build", "--help"], ["serve", "--help"], ["keys", "--help"],
                 ["keys", "create", "--help"], ["keys", "list", "--help"], ["keys", "revoke", "--help"],
                 ["info", "--help"]):
        out = subprocess.run([sys.executable, "-m", "geoengine", *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "usage: geoengine" in out.stdout, args


def test_import_geoengine_does_not_import_the_server():
    code = "import sys, geoengine; print(any(m.startswith(('fastapi', 'uvicorn', 'starlette', 'geoengine.server')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
