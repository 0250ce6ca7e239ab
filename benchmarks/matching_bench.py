"""Map matching: geoengine vs Valhalla (trace_route / trace_attributes) on the same traces, same run.

    /work/main/.venv/bin/python benchmarks/matching_bench.py [--traces 30] [--points 200] [--regions andorra,liechtenstein]

Traces: real routes between random road positions of each extract (fixed seed), resampled every 15 m,
first `--points` points, 10 m Gaussian noise (tests/routing/match_traces.py). Both engines get the same
JSON body (`shape`, costing auto, shape_match map_snap, default trace options) and are timed in-process
(geoengine: `Engine.map_match` / `Engine.trace_attributes`, JSON-like dict in, document out, narrative
included; Valhalla: pyvalhalla's `Actor.trace_route` / `Actor.trace_attributes`, JSON text in and out).
Prints p50 latency per engine and region and the ratio, plus quality: the share of points whose matched
OSM way is the way of the true edge (both engines), and the agreement of the matched way sequences.

Valhalla (pyvalhalla from PyPI, in its own venv, default `benchmarks/.peers/valhalla-venv`, else the
elevation helper's) builds its tiles from the same .osm.pbf into `benchmarks/.peers/valhalla/<region>`
(seconds for these extracts). geoengine bundles are built into `benchmarks/.peers/geoengine-home`.
"""

from __future__ import annotations

import argparse
import json
import os
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
sys.path.insert(0, str(ROOT / "tests" / "routing"))

PBF = {"andorra": SHARED / "andorra" / "andorra.osm.pbf",
       "liechtenstein": SHARED / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf"}

VALHALLA_WORKER = r"""
import json, sys, time
from valhalla import Actor
cfg, traces_path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
actor = Actor(cfg)
bodies = [json.dumps(b) for b in json.load(open(traces_path))]
for b in bodies[:3]:
    try:
        actor.trace_route(b)
    except Exception:
        pass
print("ready", flush=True)
for line in sys.stdin:
    b = bodies[int(line)]
    best_r = best_a = float("inf")
    attr = None
    try:
        for _ in range(repeat):
            t0 = time.perf_counter(); actor.trace_route(b); best_r = min(best_r, (time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter(); attr = actor.trace_attributes(b); best_a = min(best_a, (time.perf_counter() - t0) * 1000)
    except Exception as exc:
        print(json.dumps({"error": repr(exc)[:200]}), flush=True)
        continue
    doc = json.loads(attr)
    edges = doc.get("edges", [])
    pw = []
    for p in doc.get("matched_points", []):
        i = p.get("edge_index")
        ok = i is not None and 0 <= i < len(edges) and p.get("type") != "unmatched"
        pw.append(edges[i]["way_id"] if ok else -1)
    print(json.dumps({"route_ms": best_r, "attr_ms": best_a, "ways": [e.get("way_id", 0) for e in edges],
                      "point_ways": pw}), flush=True)
"""


def valhalla_python(arg: str | None) -> Path | None:
    for cand in ([Path(arg)] if arg else []) + [PEERS / "valhalla-venv" / "bin" / "python",
                                                 ROOT.parent / "wt-elevation" / "benchmarks" / ".peers" / "valhalla-venv"
                                                 / "bin" / "python"]:
        if cand.exists():
            return cand
    return None


def valhalla_tiles(py: Path, region: str) -> tuple[Path, float]:
    """Build Valhalla's tiles for a region (once); returns (config path, build seconds or 0 if reused)."""
    work = PEERS / "valhalla" / region
    cfg = work / "valhalla.json"
    if (work / "tiles").exists() and any((work / "tiles").rglob("*.gph")) and cfg.exists():
        return cfg, 0.0
    (work / "tiles").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    conf = subprocess.run([str(py.parent / "valhalla_build_config"), "--mjolnir-tile-dir", str(work / "tiles"),
                           "--mjolnir-tile-extract", str(work / "tiles.tar"), "--mjolnir-timezone",
                           str(work / "tz.sqlite"), "--mjolnir-admin", str(work / "admins.sqlite")],
                          capture_output=True, text=True, check=True, env=env)
    cfg.write_text(conf.stdout)
    t0 = time.perf_counter()
    subprocess.run([str(py.parent / "valhalla_build_tiles"), "-c", str(cfg), str(PBF[region])], capture_output=True,
                   check=True, env=env)
    return cfg, time.perf_counter() - t0


def geoengine_bundle(region: str):
    import geoengine
    from geoengine.bundler.pipeline import build, resolve_inputs
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    settings = Settings(home=PEERS / "geoengine-home", data_mirror=str(SHARED))
    out = PEERS / "geoengine-bundles" / region
    if not (out / "manifest.json").exists():
        inputs = resolve_inputs(region, settings, progress=NullProgress())
        build(inputs, out, settings, progress=NullProgress())
    return geoengine.open(out, settings=settings)


def make_traces(engine, n: int, points: int, seed: int):
    from match_traces import route_trace

    g = engine.graph
    rng = np.random.default_rng(seed)
    usable = np.flatnonzero(engine.router.profile("auto").usable)
    traces = []
    tries = 0
    while len(traces) < n and tries < 50 * n:
        tries += 1
        a, b = rng.choice(usable, 2, replace=False)
        pa = (float(g.node_lon[g.edge_src[a]]), float(g.node_lat[g.edge_src[a]]))
        pb = (float(g.node_lon[g.edge_src[b]]), float(g.node_lat[g.edge_src[b]]))
        try:
            tr = route_trace(engine, pa, pb, step_m=15.0, noise_m=10.0, seed=int(rng.integers(1 << 30)))
        except Exception:
            continue
        if len(tr.lon) >= points:
            traces.append(tr)
    return traces


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=30, help="traces per region (default 30)")
    ap.add_argument("--points", type=int, default=200, help="points per trace (default 200)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per trace, best kept (default 3)")
    ap.add_argument("--regions", default="andorra,liechtenstein")
    ap.add_argument("--valhalla-python", help="a Python that imports pyvalhalla")
    args = ap.parse_args()

    py = valhalla_python(args.valhalla_python)
    print(f"valhalla python: {py or 'not found (geoengine figures only)'}")
    for region in args.regions.split(","):
        engine = geoengine_bundle(region)
        traces = make_traces(engine, args.traces, args.points, seed=11)
        bodies = [{"shape": [{"lon": round(float(x), 6), "lat": round(float(y), 6)}
                             for x, y in zip(t.lon[:args.points], t.lat[:args.points], strict=True)],
                   "costing": "auto", "shape_match": "map_snap"} for t in traces]
        true_ways = [np.asarray(engine.graph.seg_way)[t.true_edge[:args.points] >> 1] for t in traces]
        # geoengine: warm (compile/load kernels, profile, snapper); Valhalla: a worker process with its
        # actor loaded. Then per trace, alternately, best of `repeat` runs of each (the machine's load
        # hits both alike).
        engine.map_match(bodies[0])
        engine.trace_attributes(bodies[0])
        worker = None
        if py is not None:
            cfg, secs = valhalla_tiles(py, region)
            if secs:
                print(f"valhalla tiles built in {secs:.1f} s")
            tf = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
            json.dump(bodies, tf)
            tf.close()
            worker = subprocess.Popen([str(py), "-c", VALHALLA_WORKER, str(cfg), tf.name, str(args.repeat)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True)
            while worker.stdout.readline().strip() != "ready":
                if worker.poll() is not None:
                    print("valhalla worker failed to start")
                    worker = None
                    break
        ours_route, ours_attr, ours_acc, ours_ways = [], [], [], []
        v = {"route_ms": [], "attr_ms": [], "ways": [], "point_ways": [], "errors": 0}
        for i, (body, tw) in enumerate(zip(bodies, true_ways, strict=True)):
            br = ba = np.inf
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                engine.map_match(body)
                br = min(br, (time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                doc = engine.trace_attributes(body)
                ba = min(ba, (time.perf_counter() - t0) * 1000)
            ours_route.append(br)
            ours_attr.append(ba)
            ways = [e["way_id"] for e in doc["edges"]]
            pw = np.array([ways[p["edge_index"]] if p["type"] != "unmatched" else -1 for p in doc["matched_points"]])
            ours_acc.append(float((pw == tw).mean()))
            ours_ways.append(ways)
            if worker is not None:
                worker.stdin.write(f"{i}\n")
                worker.stdin.flush()
                r = json.loads(worker.stdout.readline())
                if "error" in r:
                    v["errors"] += 1
                    v["ways"].append([])
                    v["point_ways"].append([])
                    continue
                for k in ("route_ms", "attr_ms", "ways", "point_ways"):
                    v[k].append(r[k])
        print(f"\n== {region}: {len(traces)} traces x {args.points} points (15 m spacing, 10 m noise)")
        print(f"geoengine map_match         p50 {np.median(ours_route):7.2f} ms")
        print(f"geoengine trace_attributes  p50 {np.median(ours_attr):7.2f} ms")
        print(f"geoengine points on the true way: {100 * np.mean(ours_acc):.1f} %")
        if worker is None:
            continue
        worker.stdin.close()
        worker.wait()
        os.unlink(tf.name)
        vr, va = np.median(v["route_ms"]), np.median(v["attr_ms"])
        v_acc = [float((np.array(pw) == tw).mean()) if len(pw) == len(tw) else 0.0
                 for pw, tw in zip(v["point_ways"], true_ways, strict=True)]
        agree = []
        for a, b in zip(ours_ways, v["ways"], strict=True):
            sa, sb = set(a), set(b)
            if sa or sb:
                agree.append(len(sa & sb) / len(sa | sb))
        print(f"valhalla trace_route        p50 {vr:7.2f} ms   (errors: {v['errors']})")
        print(f"valhalla trace_attributes   p50 {va:7.2f} ms")
        print(f"valhalla points on the true way: {100 * np.mean(v_acc):.1f} %")
        print(f"ratio map_match / trace_route:              {np.median(ours_route) / vr:.2f}")
        print(f"ratio trace_attributes / trace_attributes:  {np.median(ours_attr) / va:.2f}")
        print(f"matched way sets, geoengine vs valhalla (mean Jaccard): {np.mean(agree):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
