"""Isochrone latency: geoengine vs Valhalla, car, 5/10/15 minutes, on Andorra and Liechtenstein.

    PYTHONPATH=. .venv/bin/python benchmarks/isochrone_bench.py [--regions andorra liechtenstein]
        [--requests 40] [--valhalla-python PY] [--bundles DIR] [--work DIR]

Both sides get the same request bodies (one location drawn from the car network's junctions, seeded,
`{"costing": "auto", "contours": [{"time": T}], "polygons": true}`, defaults otherwise) and answer with a GeoJSON
FeatureCollection as JSON text: geoengine's library call `engine.isochrone(body)` + `json.dumps` (what the
POST handler does, without HTTP) against pyvalhalla's `Actor.isochrone(json)` (in a peer process that
times each call itself); both are warmed first, then timed request by request, interleaved (so load
from other jobs hits both alike); p50 and p90 per contour, ratio = Valhalla p50 / geoengine p50
(> 1: geoengine faster); also the p50 of the CPU time of the calling thread on each side (steadier
than wall time when other jobs load the machine). Also the median ratio of the polygon areas (geoengine / Valhalla) as a
sanity check that both draw comparable reach.

Valhalla (pyvalhalla from PyPI, in its own venv `benchmarks/.peers/valhalla-venv`, never a package
dependency) is installed on first use; its tiles are built from the same .osm.pbf with the wheel's
`valhalla_build_tiles` (no admin or timezone data) into `--work` (default benchmarks/.peers/isochrone).
geoengine bundles are built into `--bundles` (default the same work dir) unless already there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / ".peers"
SHARED = Path(os.environ.get("GEOENGINE_DATA_MIRROR") or ROOT.parent / "shared" / "data")
sys.path.insert(0, str(ROOT))

PYVALHALLA = "pyvalhalla==3.9.1"
REGIONS = {
    "andorra": SHARED / "andorra" / "andorra.osm.pbf",
    "liechtenstein": SHARED / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf",
}
MINUTES = (5, 10, 15)

VALHALLA_SERVE = r"""
import json, sys, time
from valhalla import Actor
actor = Actor(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    body = line.strip()
    t0 = time.perf_counter()
    c0 = time.thread_time()
    out = actor.isochrone(body)
    cpu = (time.thread_time() - c0) * 1000
    ms = (time.perf_counter() - t0) * 1000
    sys.stdout.write(json.dumps({"ms": ms, "cpu_ms": cpu, "response": out}) + "\n")
    sys.stdout.flush()
"""


class ValhallaPeer:
    """pyvalhalla's Actor in its own process, one request per line; it times each call itself."""

    def __init__(self, py: Path, cfg: Path):
        self.proc = subprocess.Popen([str(py), "-c", VALHALLA_SERVE, str(cfg)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("the Valhalla peer did not start")

    def isochrone(self, body: str) -> tuple[float, float, dict]:
        self.proc.stdin.write(body + "\n")
        self.proc.stdin.flush()
        got = json.loads(self.proc.stdout.readline())
        return got["ms"], got["cpu_ms"], json.loads(got["response"])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


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


def valhalla_tiles(py: Path, region: str, pbf: Path, work: Path) -> Path:
    """Build Valhalla tiles for the extract once; returns the config path."""
    d = work / "valhalla" / region
    cfg = d / "valhalla.json"
    tiles = d / "tiles"
    if cfg.exists() and any(tiles.glob("*/*")):
        return cfg
    tiles.mkdir(parents=True, exist_ok=True)
    code = (
        "import json, sys\n"
        "from valhalla import get_config\n"
        f"c = get_config(tile_extract='', tile_dir={str(tiles)!r})\n"
        "json.dump(c, sys.stdout)\n"
    )
    cfg.write_text(subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True).stdout)
    pkg = subprocess.run([str(py), "-c", "import valhalla, os; print(os.path.dirname(valhalla.__file__))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    binary = Path(pkg) / "bin" / "valhalla_build_tiles"
    t0 = time.perf_counter()
    subprocess.run([str(binary), "-c", str(cfg), str(pbf)], check=True, capture_output=True)
    print(f"  valhalla tiles for {region} built in {time.perf_counter() - t0:.1f} s", flush=True)
    return cfg


def geoengine_bundle(region: str, bundles: Path) -> Path:
    out = bundles / region
    if (out / "manifest.json").exists():
        return out
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.config import Settings

    settings = Settings(home=bundles / "home", data_mirror=str(SHARED))
    inputs = BuildInputs(osm=REGIONS[region], dem=[], region=None)
    t0 = time.perf_counter()
    path = build(inputs, out, settings)
    print(f"  geoengine bundle for {region} built in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def origins(engine, n: int, seed: int = 7) -> np.ndarray:
    """n junctions of the car network's largest component (lon, lat), seeded."""
    from geoengine.graph.turns import largest_component

    g = engine.graph
    prof = engine.router.profile("auto")
    s = prof.search
    comp = largest_component(s.offsets, s.targets, prof.usable)
    nodes = np.unique(np.asarray(g.edge_src)[np.flatnonzero(comp)])
    rng = np.random.default_rng(seed)
    pick = rng.choice(nodes, size=min(n, nodes.size), replace=False)
    return np.column_stack([np.asarray(g.node_lon)[pick], np.asarray(g.node_lat)[pick]])


def area_of(fc: dict) -> float:
    from shapely.geometry import shape

    polys = [shape(f["geometry"]) for f in fc["features"] if f["geometry"]["type"] in ("Polygon", "MultiPolygon")
             and f["geometry"]["coordinates"]]
    return float(sum(p.area for p in polys))


def q(ms) -> tuple[float, float]:
    a = np.percentile(ms, [50, 90])
    return float(a[0]), float(a[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--regions", nargs="+", default=list(REGIONS), choices=list(REGIONS))
    ap.add_argument("--requests", type=int, default=40, help="timed requests per contour and side (default 40)")
    ap.add_argument("--valhalla-python", default=str(PEERS / "valhalla-venv" / "bin" / "python"))
    ap.add_argument("--work", default=str(PEERS / "isochrone"), help="Valhalla tiles and bundles go here")
    ap.add_argument("--bundles", default=None, help="folder with <region>/ geoengine bundles (built if missing)")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    import geoengine

    work = Path(args.work)
    bundles = Path(args.bundles) if args.bundles else work / "bundles"
    py = Path(args.valhalla_python)
    why = ensure_valhalla(py)
    if why:
        print(f"Valhalla unavailable: {why}")
    results = []
    for region in args.regions:
        print(f"== {region}", flush=True)
        engine = geoengine.open(geoengine_bundle(region, bundles))
        pts = origins(engine, args.requests)
        cfg = None if why else valhalla_tiles(py, region, REGIONS[region], work)
        peer = None if cfg is None else ValhallaPeer(py, cfg)
        for minutes in MINUTES:
            bodies = [{"locations": [{"lon": float(lo), "lat": float(la)}], "costing": "auto",
                       "contours": [{"time": minutes}], "polygons": True} for lo, la in pts]
            texts = [json.dumps(b) for b in bodies]
            for t in texts[:5]:
                json.dumps(engine.isochrone(json.loads(t)))
                if peer is not None:
                    peer.isochrone(t)
            # interleaved, request by request, so that load from other jobs hits both sides alike
            ge_ms, ge_cpu, vh_ms, vh_cpu, areas = [], [], [], [], []
            for t in texts:
                t0 = time.perf_counter()
                c0 = time.thread_time()
                out = json.dumps(engine.isochrone(json.loads(t)))
                ge_cpu.append((time.thread_time() - c0) * 1000)
                ge_ms.append((time.perf_counter() - t0) * 1000)
                if peer is not None:
                    ms, cpu, vh = peer.isochrone(t)
                    vh_ms.append(ms)
                    vh_cpu.append(cpu)
                    a_vh = area_of(vh)
                    if a_vh > 0:
                        areas.append(area_of(json.loads(out)) / a_vh)
            row = {"region": region, "minutes": minutes, "n": len(texts), "geoengine_p50_ms": q(ge_ms)[0],
                   "geoengine_p90_ms": q(ge_ms)[1], "geoengine_cpu_p50_ms": q(ge_cpu)[0]}
            if vh_ms:
                row["valhalla_p50_ms"], row["valhalla_p90_ms"] = q(vh_ms)
                row["valhalla_cpu_p50_ms"] = q(vh_cpu)[0]
                row["ratio"] = row["valhalla_p50_ms"] / row["geoengine_p50_ms"]
                row["cpu_ratio"] = row["valhalla_cpu_p50_ms"] / row["geoengine_cpu_p50_ms"]
                row["area_ratio_median"] = float(np.median(areas)) if areas else float("nan")
            results.append(row)
            line = (f"  {minutes:>2} min  geoengine p50 {row['geoengine_p50_ms']:7.2f} ms  p90 "
                    f"{row['geoengine_p90_ms']:7.2f} ms")
            if "ratio" in row:
                line += (f" | valhalla p50 {row['valhalla_p50_ms']:7.2f} ms  p90 {row['valhalla_p90_ms']:7.2f} ms"
                         f" | ratio {row['ratio']:5.2f}x  (CPU p50 {row['geoengine_cpu_p50_ms']:.2f} vs "
                         f"{row['valhalla_cpu_p50_ms']:.2f} ms: {row['cpu_ratio']:.2f}x)"
                         f"  area geoengine/valhalla {row['area_ratio_median']:.2f}")
            print(line, flush=True)
        if peer is not None:
            peer.close()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
