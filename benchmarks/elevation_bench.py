"""Elevation benchmark: a 2,000-point POST /elevation end to end, geoengine vs Valhalla /height.

    /work/main/.venv/bin/python benchmarks/elevation_bench.py [--requests 300] [--valhalla-python PY]

Both servers run on loopback in this run and get the same 2,000 points (a seeded walk across
Andorra) over keep-alive HTTP, one request at a time, the servers taking turns; the script prints p50/p90 per server and the
ratio Valhalla p50 / geoengine p50 (above 1 means geoengine is faster), then the same for in-process
calls (Engine.elevation_profile vs pyvalhalla's Actor.height).

Valhalla (pyvalhalla from PyPI, in its own venv `benchmarks/.peers/valhalla-venv`, never a package
dependency) reads only 1-arc-second skadi tiles (3601 x 3601, `HGT_DIM` in skadi/sample.cc) and
returns no data for the 1201 x 1201 SRTM3 tiles of the Andorra sample. So the script writes the same
SRTM3 heights as 1-arc-second tiles (`<peers>/elevation-1s/N42/N42E001.hgt`), every new sample the
bilinear value of the SRTM3 grid there: a bilinear surface cut into thirds is the same surface, so
both engines answer the same heights (the script checks it). geoengine is measured on its bundle
built from the original SRTM3 tiles, and also on a bundle built from the 1-arc-second files.

The script installs the peer itself when its venv is missing (`python -m venv` + `pip install
pyvalhalla`); `--no-install` skips that.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / ".peers"
SHARED = Path(os.environ.get("GEOENGINE_DATA_MIRROR") or ROOT.parent / "shared" / "data")
sys.path.insert(0, str(ROOT))

N_POINTS = 2000
PYVALHALLA = "pyvalhalla==3.9.1"


def ensure_valhalla(py: Path) -> str | None:
    """Create the peer venv with pyvalhalla if it is missing; return why Valhalla cannot run, or None."""
    if not py.exists():
        venv = py.parents[1]
        print(f"installing {PYVALHALLA} into {venv} ...", flush=True)
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            return f"cannot create {venv}: {made.stderr.strip()[-300:]}"
        pip = subprocess.run([str(py), "-m", "pip", "install", "-q", PYVALHALLA], capture_output=True, text=True)
        if pip.returncode != 0:
            return f"pip install {PYVALHALLA} failed: {pip.stderr.strip()[-300:]}"
    probe = subprocess.run([str(py), "-c", "import valhalla"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"pyvalhalla does not import in {py}: {probe.stderr.strip()[-300:]}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, headers: dict | None = None, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            httpx.get(url, headers=headers, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def walk_points(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random walk across Andorra, steps of ~30 m, like a long route shape."""
    rng = np.random.default_rng(seed)
    heading = np.cumsum(rng.normal(0, 0.25, n)) + 0.6
    step = 0.0003
    lats = 42.46 + np.cumsum(step * np.cos(heading))
    lons = 1.45 + np.cumsum(step * np.sin(heading) / np.cos(np.radians(42.5)))
    return np.clip(lats, 42.44, 42.65), np.clip(lons, 1.43, 1.77)


def timed(fn, n: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def summary(ms: list[float]) -> str:
    q = np.percentile(ms, [50, 90])
    return f"p50 {q[0]:7.3f} ms   p90 {q[1]:7.3f} ms   (n={len(ms)})"


def build_bundle(home: Path, name: str, dem: list[Path]):
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.config import Settings

    settings = Settings(home=home, data_mirror=str(SHARED))
    inputs = BuildInputs(osm=SHARED / "andorra" / "andorra.osm.pbf", dem=dem, region=None)
    return build(inputs, home / "bundles" / name, settings), settings


def write_one_arc_second_tiles(out_dir: Path) -> list[Path]:
    """The Andorra SRTM3 tiles resampled to 3601 x 3601 by bilinear interpolation (voids stay voids)."""
    from geoengine.elevation.dem import read_dem
    from geoengine.elevation.model import ElevationModel

    paths = []
    tiles = [read_dem(SHARED / "andorra" / f"{n}.hgt.zip") for n in ("N42E001", "N41E001")]
    model = ElevationModel.from_tiles(tiles)
    for tile in tiles:
        band = out_dir / tile.name[:3]
        band.mkdir(parents=True, exist_ok=True)
        path = band / f"{tile.name}.hgt"
        paths.append(path)
        if path.exists() and path.stat().st_size == 3601 * 3601 * 2:
            continue
        k = np.arange(3601) / 3600.0
        lat = (tile.north - k)[:, None] * np.ones((1, 3601))
        lon = np.ones((3601, 1)) * (tile.west + k)[None, :]
        h, _ = model.sample(lat.ravel(), lon.ravel())
        grid = np.where(np.isnan(h), -32768, np.round(h)).astype(">i2").reshape(3601, 3601)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(grid.tobytes())
        tmp.replace(path)
    return paths


def start_geoengine(bundle: Path, settings, port: int):
    from geoengine.gateway import KeyStore

    key, _ = KeyStore(settings.state).create("unlimited", "bench")
    code = (
        "import uvicorn, geoengine\n"
        "from geoengine.config import Settings\n"
        "from geoengine.server.app import create_app\n"
        f"s = Settings(home={str(settings.home)!r}, gateway_host='localhost')\n"
        f"e = geoengine.open({str(bundle)!r}, settings=s); e.warm()\n"
        f"uvicorn.run(create_app(e, s), host='127.0.0.1', port={port}, log_level='warning', access_log=False)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    headers = {"X-Gateway-Key": key, "X-Gateway-Host": "localhost"}
    wait_http(f"http://127.0.0.1:{port}/health", headers)
    return proc, headers


def valhalla_config(py: str, elevation_dir: Path, work: Path, port: int) -> Path:
    code = (
        "import json, sys\n"
        "from valhalla import get_config\n"
        f"c = get_config(tile_extract='', tile_dir={str(work / 'tiles')!r})\n"
        f"c['additional_data']['elevation'] = {str(elevation_dir) + '/'!r}\n"
        f"c['httpd']['service']['listen'] = 'tcp://127.0.0.1:{port}'\n"
        f"c['httpd']['service']['loopback'] = 'ipc://{work}/loopback'\n"
        f"c['httpd']['service']['interrupt'] = 'ipc://{work}/interrupt'\n"
        "c['httpd']['service']['drain_seconds'] = 0\n"
        "c['httpd']['service']['shutdown_seconds'] = 0\n"
        "json.dump(c, sys.stdout)\n"
    )
    (work / "tiles").mkdir(parents=True, exist_ok=True)
    cfg = subprocess.run([py, "-c", code], check=True, capture_output=True, text=True).stdout
    path = work / "valhalla.json"
    path.write_text(cfg)
    return path


def start_valhalla(py: str, config: Path, port: int):
    pkg = subprocess.run([py, "-c", "import valhalla, os; print(os.path.dirname(valhalla.__file__))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    binary = Path(pkg) / "bin" / "valhalla_service"
    proc = subprocess.Popen([str(binary), str(config), "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/status")
    return proc


def json_round_trip(engine, body: str) -> bytes:
    """What the POST handler does, without HTTP: JSON text in, validation, sampling, JSON bytes out
    (the same work as pyvalhalla's Actor.height, which takes and returns JSON text)."""
    import pydantic_core

    from geoengine.services.elevation import ElevationRequest

    req = ElevationRequest.model_validate(pydantic_core.from_json(body))
    shape = req.shape
    prof = engine.elevation_profile(lats=shape.lats, lons=shape.lons)  # type: ignore[union-attr]
    return pydantic_core.to_json({"height": np.round(prof.heights, 1).tolist()}, inf_nan_mode="null")


VALHALLA_INPROC = r"""
import json, sys, time
import numpy as np
from valhalla import Actor
cfg, body, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
actor = Actor(cfg)
req = open(body).read()
for _ in range(20):
    actor.height(req)
ms = []
for _ in range(n):
    t0 = time.perf_counter(); actor.height(req); ms.append((time.perf_counter() - t0) * 1000)
print(json.dumps(ms))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=300, help="timed requests per server (default 300)")
    ap.add_argument("--valhalla-python", default=str(PEERS / "valhalla-venv" / "bin" / "python"),
                    help="a Python that imports pyvalhalla (default benchmarks/.peers/valhalla-venv)")
    ap.add_argument("--no-install", action="store_true", help="do not install pyvalhalla when its venv is missing")
    args = ap.parse_args()

    import httpx

    lats, lons = walk_points(N_POINTS)
    shape = [{"lat": round(float(a), 6), "lon": round(float(b), 6)} for a, b in zip(lats, lons, strict=True)]
    body = json.dumps({"shape": shape})
    body_range = json.dumps({"shape": shape, "range": True})
    print(f"{N_POINTS} points, {len(body):,} bytes per request body, {args.requests} timed requests each\n")

    work = Path(tempfile.mkdtemp(prefix="elev-bench-"))
    procs = []
    results: dict[str, list[float]] = {}
    try:
        bundle3, settings = build_bundle(work / "home", "andorra3", [SHARED / "andorra" / "N42E001.hgt.zip",
                                                                     SHARED / "andorra" / "N41E001.hgt.zip"])
        one_sec = write_one_arc_second_tiles(PEERS / "elevation-1s")
        bundle1, _ = build_bundle(work / "home", "andorra1", one_sec)

        # -- start every server, then time them round-robin (shared-machine noise hits all alike) ----
        clients: dict[str, tuple] = {}  # label -> (httpx client, path, body)
        for label, bundle in (("geoengine (SRTM3 bundle)", bundle3), ("geoengine (1\" bundle)", bundle1)):
            port = free_port()
            proc, headers = start_geoengine(bundle, settings, port)
            procs.append(proc)
            c = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={**headers, "Content-Type": "application/json"})
            clients[label] = (c, "/elevation", body)
            clients[label + " range"] = (c, "/elevation", body_range)

        py = args.valhalla_python
        if args.no_install and not Path(py).exists():
            why_not = f"{py} not found and --no-install given"
        else:
            why_not = ensure_valhalla(Path(py))
        if why_not:
            print(f"Valhalla not measured: {why_not}\n")
        else:
            vwork = work / "valhalla"
            vwork.mkdir()
            port = free_port()
            cfg = valhalla_config(py, PEERS / "elevation-1s", vwork, port)
            procs.append(start_valhalla(py, cfg, port))
            c = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Content-Type": "application/json"})
            clients["valhalla /height"] = (c, "/height", json.dumps({"shape": shape, "height_precision": 1}))
            clients["valhalla /height range"] = (c, "/height", json.dumps({"shape": shape, "range": True,
                                                                           "height_precision": 1}))
            ours = clients["geoengine (SRTM3 bundle)"][0].post("/elevation", content=body).json()["height"]
            theirs = c.post("/height", content=clients["valhalla /height"][2]).json()["height"]
            a = np.array([np.nan if v is None else v for v in ours], dtype=float)
            b = np.array([np.nan if v is None else v for v in theirs], dtype=float)
            both = np.isfinite(a) & np.isfinite(b)
            diff = np.abs(a[both] - b[both])
            print(f"agreement: {both.sum()} of {N_POINTS} points have heights from both; |geoengine - valhalla| "
                  f"median {np.median(diff):.2f} m, p99 {np.percentile(diff, 99):.2f} m, max {diff.max():.2f} m "
                  f"(valhalla null: {int(np.isnan(b).sum())}, geoengine null: {int(np.isnan(a).sum())})\n")

        for label, (c, path, content) in clients.items():
            r = c.post(path, content=content)
            r.raise_for_status()
            results[label] = []
            for _ in range(20):
                c.post(path, content=content)
        labels = list(clients)
        for i in range(args.requests):
            for label in labels[i % len(labels):] + labels[: i % len(labels)]:
                c, path, content = clients[label]
                t0 = time.perf_counter()
                c.post(path, content=content)
                results[label].append((time.perf_counter() - t0) * 1000.0)
        for c, _, _ in clients.values():
            c.close()
        for p in procs:
            stop(p)
        procs.clear()

        # -- in process ------------------------------------------------------------------------------
        import geoengine

        engine = geoengine.open(bundle3, settings=settings)
        results["geoengine library (Engine.elevation_profile)"] = timed(
            lambda: engine.elevation_profile(lats=lats, lons=lons), args.requests)
        results["geoengine in process, JSON in and out"] = timed(lambda: json_round_trip(engine, body), args.requests)
        if not why_not:
            (vwork / "body.json").write_text(clients["valhalla /height"][2])
            out = subprocess.run([py, "-c", VALHALLA_INPROC, str(cfg), str(vwork / "body.json"), str(args.requests)],
                                 capture_output=True, text=True, check=True).stdout
            results["valhalla library (Actor.height)"] = json.loads(out.strip().splitlines()[-1])

        width = max(len(k) for k in results)
        for k, ms in results.items():
            print(f"{k:<{width}}  {summary(ms)}")
        pairs = [("geoengine (SRTM3 bundle)", "valhalla /height"),
                 ("geoengine (1\" bundle)", "valhalla /height"),
                 ("geoengine (SRTM3 bundle) range", "valhalla /height range"),
                 ("geoengine library (Engine.elevation_profile)", "valhalla library (Actor.height)"),
                 ("geoengine in process, JSON in and out", "valhalla library (Actor.height)")]
        print()
        for ours_k, theirs_k in pairs:
            if ours_k in results and theirs_k in results:
                ratio = statistics.median(results[theirs_k]) / statistics.median(results[ours_k])
                print(f"ratio valhalla/geoengine p50: {ratio:5.2f}x   ({ours_k} vs {theirs_k})")
        target = statistics.median(results["geoengine (SRTM3 bundle)"])
        print(f"\ntarget <= 5 ms end to end: geoengine p50 {target:.3f} ms -> {'met' if target <= 5 else 'NOT met'}")
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
