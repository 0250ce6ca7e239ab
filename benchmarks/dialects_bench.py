"""The OSRM dialect against osrm-routed, over HTTP on loopback, in one run; and the cost of the dialects
over their spec twins. Prints figures and ratios.

    NUMBA_CACHE_DIR=... .venv/bin/python benchmarks/dialects_bench.py [--region andorra] [--pairs 200]
        [--table 25] [--bundle PATH] [--no-peer]

- geoengine: `geoengine.server.app.create_app` under uvicorn (one worker, loopback), the gateway on, an
  unlimited key. Requests: `GET /route/v1/driving/a;b?overview=false` (and `steps=true&overview=full`),
  `GET /table/v1/driving/...` (N x N), the spec's `POST /route` and `POST /matrix` on the same points, and
  the Valhalla dialect's `GET /route?json=` and `POST /sources_to_targets`.
- peer: osrm-routed (osrm-bindings from PyPI, car profile, CH, `-t 1`) on the same extract and the same
  OSRM URLs. Create its venv with
  `python -m venv benchmarks/.peers/venv && benchmarks/.peers/venv/bin/pip install osrm-bindings`.
- Both are timed from the same client (requests, keep-alive session), sequentially, p50 over the pairs.
  Durations differ between the engines (different speed models): their median ratio is reported as a
  sanity figure, not as a goal.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEER_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"


def p50(xs) -> float:
    return float(np.median(xs)) if len(xs) else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def start_geoengine(bundle: Path, home: Path):
    import uvicorn

    import geoengine
    from geoengine.config import Settings
    from geoengine.gateway import KeyStore, load_plans
    from geoengine.server.app import create_app

    settings = Settings(home=home, gateway_host="bench.local")
    engine = geoengine.open(bundle, settings=settings)
    engine.warm()
    store = KeyStore(settings.state, load_plans(None))
    key, _ = store.create("unlimited", "bench")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(engine, settings, store), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    wait_port(port)
    return engine, f"http://127.0.0.1:{port}", {"X-Gateway-Key": key, "X-Gateway-Host": "bench.local"}, server


def start_osrm(pbf: Path, work: Path):
    """osrm-extract + osrm-contract (car) and osrm-routed on a free port, from the peer venv."""
    base = subprocess.run([str(PEER_PY), "-c", "import osrm, pathlib; print(pathlib.Path(osrm.__file__).parent)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    bin_ = Path(base) / "bin"
    work.mkdir(parents=True, exist_ok=True)
    dst = work / "region.osm.pbf"
    dst.write_bytes(pbf.read_bytes())
    subprocess.run([str(bin_ / "osrm-extract"), "-p", str(Path(base) / "share/profiles/car.lua"), str(dst), "-t", "1"],
                   check=True, capture_output=True)
    subprocess.run([str(bin_ / "osrm-contract"), str(work / "region.osrm"), "-t", "1"], check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen([str(bin_ / "osrm-routed"), "-a", "CH", "-t", "1", "-p", str(port), "-i", "127.0.0.1",
                             "--max-table-size", "1000", str(work / "region.osrm")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, f"http://127.0.0.1:{port}"


def random_points(engine, n: int, seed: int) -> np.ndarray:
    """Points a few metres off random shape points of car roads of the main network."""
    prof = engine.router.profile("auto")
    comp = prof.component
    g = engine.graph
    rng = np.random.default_rng(seed)
    segs = np.flatnonzero(comp[0::2] | comp[1::2])
    so = np.asarray(g.shape_offsets)
    pick = rng.choice(segs, n)
    a, b = so[pick], so[pick + 1]
    idx = np.minimum(a + (rng.random(n) * (b - a)).astype(np.int64), b - 1)
    lon = np.asarray(g.shape_lon)[idx] + rng.normal(0, 5 / 75_000, n)
    lat = np.asarray(g.shape_lat)[idx] + rng.normal(0, 5 / 111_000, n)
    return np.column_stack([lon, lat])


def timed(session, method: str, url: str, **kw):
    t = time.perf_counter()
    r = session.request(method, url, **kw)
    return time.perf_counter() - t, r


def coords(pts) -> str:
    return ";".join(f"{lo:.6f},{la:.6f}" for lo, la in pts)


def main() -> int:
    import json

    import requests

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", default="andorra")
    ap.add_argument("--bundle", help="an existing bundle (default: build the region into a temporary home)")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--table", type=int, default=25)
    ap.add_argument("--no-peer", action="store_true")
    args = ap.parse_args()

    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    home = Path(tempfile.mkdtemp(prefix="dialects-bench-"))
    settings = Settings(home=home, data_mirror=str(ROOT.parent / "shared" / "data"))
    inputs = resolve_inputs(args.region, settings, progress=NullProgress())
    bundle = Path(args.bundle) if args.bundle else build(inputs, default_out(inputs, settings), settings,
                                                         progress=NullProgress())
    engine, url, headers, server = start_geoengine(bundle, home)
    osrm_proc = osrm_url = None
    if not args.no_peer:
        if PEER_PY.exists():
            osrm_proc, osrm_url = start_osrm(Path(inputs.osm), home / "osrm")
        else:
            print(f"peer venv {PEER_PY} missing: osrm-routed not run (see the module doc)")
    pts = random_points(engine, 2 * args.pairs, 7)
    pairs = [(pts[2 * i], pts[2 * i + 1]) for i in range(args.pairs)]
    ours = requests.Session()
    ours.headers.update(headers)
    peer = requests.Session()
    res: dict[str, list] = {k: [] for k in ("osrm_dialect", "osrm_dialect_steps", "spec_route", "valhalla_get",
                                            "osrm_routed", "osrm_routed_steps")}
    dur_ratio = []
    dialect_vs_spec = []
    for a, b in pairs:
        c = coords([a, b])
        t, r = timed(ours, "GET", f"{url}/route/v1/driving/{c}", params={"overview": "false"})
        if r.status_code != 200:
            continue
        ours_dur = r.json()["routes"][0]["duration"]
        res["osrm_dialect"].append(t)
        t, _ = timed(ours, "GET", f"{url}/route/v1/driving/{c}", params={"overview": "full", "steps": "true"})
        res["osrm_dialect_steps"].append(t)
        body = {"locations": [{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}],
                "directions_options": {"directions_type": "none"}}
        t, r = timed(ours, "POST", f"{url}/route", json=body)
        res["spec_route"].append(t)
        spec_dur = r.json()["trip"]["summary"]["time"]
        dialect_vs_spec.append(ours_dur / spec_dur if spec_dur > 0 else 1.0)
        t, _ = timed(ours, "GET", f"{url}/route", params={"json": json.dumps(body)})
        res["valhalla_get"].append(t)
        if osrm_url:
            t, r = timed(peer, "GET", f"{osrm_url}/route/v1/driving/{c}", params={"overview": "false"})
            res["osrm_routed"].append(t)
            if r.status_code == 200 and r.json()["routes"][0]["duration"] > 0:
                dur_ratio.append(ours_dur / r.json()["routes"][0]["duration"])
            t, _ = timed(peer, "GET", f"{osrm_url}/route/v1/driving/{c}", params={"overview": "full", "steps": "true"})
            res["osrm_routed_steps"].append(t)
    tpts = pts[: args.table]
    tc = coords(tpts)
    loc = [{"lon": lo, "lat": la} for lo, la in tpts]
    table = {"osrm_dialect": [], "spec_matrix": [], "sources_to_targets": [], "osrm_routed": []}
    for _ in range(10):
        table["osrm_dialect"].append(timed(ours, "GET", f"{url}/table/v1/driving/{tc}")[0])
        table["spec_matrix"].append(timed(ours, "POST", f"{url}/matrix", json={"sources": loc, "targets": loc})[0])
        table["sources_to_targets"].append(timed(ours, "POST", f"{url}/sources_to_targets",
                                                 json={"sources": loc, "targets": loc})[0])
        if osrm_url:
            table["osrm_routed"].append(timed(peer, "GET", f"{osrm_url}/table/v1/driving/{tc}")[0])

    print(f"region {args.region}, {len(res['osrm_dialect'])} routed pairs, table {args.table}x{args.table}, "
          "HTTP on loopback, one client, sequential (p50, ms)")
    for k, v in res.items():
        if v:
            print(f"  route  {k:22s} {1000 * p50(v):8.2f}")
    for k, v in table.items():
        if v:
            print(f"  table  {k:22s} {1000 * p50(v):8.2f}")
    print(f"  OSRM dialect / spec POST /route (p50 time):        {p50(res['osrm_dialect']) / p50(res['spec_route']):.2f}")
    print(f"  Valhalla GET /route?json / spec POST /route:        {p50(res['valhalla_get']) / p50(res['spec_route']):.2f}")
    print(f"  OSRM /table dialect / spec /matrix:                 {p50(table['osrm_dialect']) / p50(table['spec_matrix']):.2f}")
    print(f"  dialect duration / spec duration: min {min(dialect_vs_spec):.4f} max {max(dialect_vs_spec):.4f}")
    if res["osrm_routed"]:
        print(f"  OSRM dialect / osrm-routed (route, overview=false): {p50(res['osrm_dialect']) / p50(res['osrm_routed']):.2f}")
        print(f"  OSRM dialect / osrm-routed (route, steps, full):    "
              f"{p50(res['osrm_dialect_steps']) / p50(res['osrm_routed_steps']):.2f}")
        print(f"  OSRM dialect / osrm-routed (table):                 {p50(table['osrm_dialect']) / p50(table['osrm_routed']):.2f}")
        print(f"  route duration geoengine / OSRM (different speed models): median {p50(dur_ratio):.3f}")
    server.should_exit = True
    if osrm_proc is not None:
        osrm_proc.terminate()
        osrm_proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
