"""Optimised route (POST /optimised_route) vs Valhalla's optimized_route, 10 and 20 stops, Andorra or Liechtenstein.

    NUMBA_CACHE_DIR=/tmp/nc /work/main/.venv/bin/python benchmarks/optimise_bench.py [--region andorra|liechtenstein] [--bundle PATH] [--sets 5]

Stops are random car-reachable graph nodes (fixed seeds). For each set both engines order the stops
(first and last fixed in both) and return the trip. Printed per size: p50 latency of the whole request
(matrix + ordering + trip) and the ratio; tour time and length as each engine reports them (their speed
models differ); and, to compare the ORDERS on one yardstick, both orders evaluated on geoengine's own
travel-time matrix. Valhalla (pyvalhalla from PyPI) runs in its own venv `benchmarks/.peers/valhalla-venv`
(created on first run), never a package dependency; its tiles are built from the same .osm.pbf.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers"
PYVALHALLA = "pyvalhalla==3.9.1"
PBF = {"andorra": "andorra/andorra.osm.pbf", "liechtenstein": "liechtenstein/valhalla-liechtenstein-latest.osm.pbf"}


def ensure_valhalla(py: Path) -> str | None:
    if not py.exists():
        venv = py.parents[1]
        print(f"installing {PYVALHALLA} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run([str(py), "-m", "pip", "install", "-q", PYVALHALLA], capture_output=True, text=True)
        if pip.returncode != 0:
            return f"pip install {PYVALHALLA} failed: {pip.stderr.strip()[-300:]}"
    probe = subprocess.run([str(py), "-c", "import valhalla"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"pyvalhalla does not import: {probe.stderr.strip()[-300:]}"


def open_engine(bundle: str | None, region: str):
    import geoengine
    from geoengine.config import Settings

    settings = Settings.from_env()
    if bundle:
        return geoengine.open(bundle, settings=settings)
    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.progress import NullProgress

    inputs = resolve_inputs(region, settings, progress=NullProgress())
    out = default_out(inputs, settings)
    if not (out / "manifest.json").exists():
        build(inputs, out, settings, progress=NullProgress())
    return geoengine.open(out, settings=settings)


def stop_sets(engine, size: int, count: int, seed: int):
    g = engine.graph
    usable = engine.router.profile("auto").usable
    nodes = np.unique(np.asarray(g.edge_src)[usable])
    lon, lat = np.asarray(g.node_lon)[nodes], np.asarray(g.node_lat)[nodes]
    rng = np.random.default_rng(seed)
    sets = []
    while len(sets) < count:
        idx = rng.choice(len(nodes), size, replace=False)
        pts = np.column_stack([lon[idx], lat[idx]])
        if np.isfinite(engine.matrix(pts, pts, "auto").time_s).all():
            sets.append(pts)
    return sets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--region", default="andorra", choices=sorted(PBF))
    ap.add_argument("--bundle", help="a bundle of that region (default: build one under GEOENGINE_HOME)")
    ap.add_argument("--sets", type=int, default=5, help="stop sets per size")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--valhalla-python", default=str(PEERS / "valhalla-venv" / "bin" / "python"))
    args = ap.parse_args()

    from geoengine.routing.stop_order import path_cost

    engine = open_engine(args.bundle, args.region)
    data = Path(engine.settings.data_mirror or HERE.parents[1] / "shared" / "data")
    pbf = data / PBF[args.region]
    engine.optimised_route(locations=[{"lon": float(x), "lat": float(y)} for x, y in stop_sets(engine, 16, 1, 0)[0]])
    problems = {n: stop_sets(engine, n, args.sets, seed=n) for n in (10, 20)}

    why_not = ensure_valhalla(Path(args.valhalla_python))
    theirs = {}
    if why_not is None:
        work = Path(tempfile.mkdtemp(prefix="optimise-bench-"))
        flat = [p.tolist() for n in (10, 20) for p in problems[n]]
        spec = work / "spec.json"
        spec.write_text(json.dumps({"problems": flat, "repeat": args.repeat}))
        r = subprocess.run([args.valhalla_python, str(HERE / "_valhalla_optimise_run.py"), str(pbf), str(work / args.region),
                            str(spec)], capture_output=True, text=True)
        try:
            out = json.loads(r.stdout.strip().splitlines()[-1])
        except Exception:
            out = {"error": (r.stderr or r.stdout)[-400:]}
        if "error" in out:
            why_not = out["error"]
        else:
            print(f"valhalla {out['valhalla_version']}: tiles built in {out['build_tiles_s']:.1f} s")
            res = iter(out["results"])
            theirs = {n: [next(res) for _ in problems[n]] for n in (10, 20)}
    if why_not:
        print(f"Valhalla not run: {why_not}")

    print(f"\n{'stops':>5} {'engine':<10} {'p50 ms':>8} {'tour min (own)':>15} {'km (own)':>9} "
          f"{'tour min (our matrix)':>22}")
    for n in (10, 20):
        ours_t, ours_tour, ours_km, ours_mx, th_t, th_tour, th_km, th_mx = ([] for _ in range(8))
        for k, pts in enumerate(problems[n]):
            locs = [{"lon": float(x), "lat": float(y)} for x, y in pts]
            ts = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                doc = engine.optimised_route(locations=locs)
                ts.append(time.perf_counter() - t)
            ours_t.append(np.median(ts))
            ours_tour.append(doc["trip"]["summary"]["time"])
            ours_km.append(doc["trip"]["summary"]["length"])
            T = np.array(engine.matrix(pts, pts, "auto").time_s)
            np.fill_diagonal(T, 0)
            ours_mx.append(path_cost(T, np.array(doc["optimized_order"])))
            if theirs and "error" not in theirs[n][k]:
                v = theirs[n][k]
                th_t.append(np.median(v["times"]))
                th_tour.append(v["time_s"])
                th_km.append(v["length_km"])
                order = np.array(v["order"])
                th_mx.append(path_cost(T, order) if sorted(order.tolist()) == list(range(n)) else np.nan)
        print(f"{n:>5} {'geoengine':<10} {1000 * np.median(ours_t):>8.1f} {np.mean(ours_tour) / 60:>15.1f} "
              f"{np.mean(ours_km):>9.2f} {np.mean(ours_mx) / 60:>22.2f}")
        if th_t:
            print(f"{n:>5} {'valhalla':<10} {1000 * np.median(th_t):>8.1f} {np.mean(th_tour) / 60:>15.1f} "
                  f"{np.mean(th_km):>9.2f} {np.nanmean(th_mx) / 60:>22.2f}")
            print(f"{'':>5} ratio valhalla/geoengine latency {np.median(th_t) / np.median(ours_t):.2f}x; on our matrix "
                  f"geoengine's order is {'no longer' if np.nanmean(ours_mx) <= np.nanmean(th_mx) + 1e-6 else 'LONGER'} "
                  f"({np.nanmean(ours_mx) / np.nanmean(th_mx):.4f}); sets where ours is shorter/equal: "
                  f"{int(np.sum(np.array(ours_mx) <= np.array(th_mx) + 1e-6))}/{len(th_mx)}")


if __name__ == "__main__":
    main()
