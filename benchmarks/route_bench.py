"""End-to-end routing benchmark through the Engine (snapping included), against OSRM, Valhalla and
networkx on the same random snapped points, in one run. Prints figures and ratios.

    NUMBA_CACHE_DIR=... PYTHONPATH=$PWD /work/main/.venv/bin/python benchmarks/route_bench.py \
        [--regions liechtenstein andorra] [--pairs 500] [--no-peers] [--no-valhalla]

Peers run in their own venvs, never as geoengine dependencies:
- OSRM (osrm-bindings, CH, one thread): benchmarks/.peers/venv, driven by benchmarks/_peers_run.py
  (`python -m venv benchmarks/.peers/venv && benchmarks/.peers/venv/bin/pip install osrm-bindings`).
- Valhalla (pyvalhalla Actor, tiles built by its valhalla_build_tiles): benchmarks/.peers/valhalla-venv,
  driven by benchmarks/_valhalla_run.py (`pip install pyvalhalla` there).
- networkx: in this venv, bidirectional Dijkstra (nx.shortest_path) on the node graph with the car's
  edge times, between the graph nodes nearest to the points (its snapping is not timed: in its favour).

geoengine figures:
- route: `engine.route(locations=[a, b], directions_options={"directions_type": "none"})`, i.e. the
  whole /route library call (validation, snapping, CH query with path unpacking, shape, summary) without
  narrative, the closest match to OSRM's Route with overview=false, steps=false (their call does snap,
  search and unpack too). The same with narrative ("instructions") is reported as well.
- matrix: `engine.matrix(sources, targets)` (snapping + CH bucket table); OSRM Table and Valhalla
  sources_to_targets on the same points.
- build: graph + routing stages of the pipeline with Numba's cache warm (the routing stage contracts
  NINE costings; the car-only figure is graph + the auto hierarchy), vs osrm-extract + osrm-contract
  (car, one thread).
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
sys.path.insert(0, str(ROOT))
PEERS = ROOT / "benchmarks" / ".peers"
OSRM_PY = PEERS / "venv" / "bin" / "python"
VALHALLA_PY = PEERS / "valhalla-venv" / "bin" / "python"


def p50(xs) -> float:
    return float(np.median(xs))


def build_bundle(name: str, home: Path):
    """Build source + graph + routing for a region; returns (bundle path, manifest stages)."""
    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.bundler.stages import all_stages
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    settings = Settings(home=home, data_mirror=str(ROOT.parent / "shared" / "data"))
    stages = [s for s in all_stages() if s.name in ("source", "graph", "routing")]
    inputs = resolve_inputs(name, settings, progress=NullProgress())
    out = build(inputs, default_out(inputs, settings), settings, progress=NullProgress(), stages=stages)
    manifest = json.loads((out / "manifest.json").read_text())
    return out, manifest["stages"], Path(inputs.osm)


def random_points(engine, n, seed):
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


def bench_geoengine(engine, pts, pairs, tables, res):
    from geoengine.services.models import Location

    locs = [{"lon": float(x), "lat": float(y)} for x, y in pts]
    engine.route(locations=[locs[0], locs[1]])  # warm kernels and profile
    for label, dtype in (("route", "none"), ("route_narrative", "instructions")):
        lat, times = [], []
        for a, b in pairs:
            t = time.perf_counter()
            try:
                doc = engine.route(locations=[locs[a], locs[b]], directions_options={"directions_type": dtype})
                times.append(doc["trip"]["summary"]["time"])
            except Exception:
                times.append(np.nan)
            lat.append(time.perf_counter() - t)
        res[f"ge_{label}_p50_ms"] = p50(lat) * 1e3
        res[f"ge_{label}_p90_ms"] = float(np.percentile(lat, 90)) * 1e3
        if label == "route":
            res["ge_route_durations"] = times
    # the router alone (snapping + search + unpacking, no document)
    router = engine.router
    prof = router.profile("auto")
    lat = []
    for a, b in pairs:
        la = [Location(**locs[a]), Location(**locs[b])]
        t = time.perf_counter()
        try:
            router.route_legs(prof, la)
        except Exception:
            pass
        lat.append(time.perf_counter() - t)
    res["ge_router_only_p50_ms"] = p50(lat) * 1e3
    for k, idx in tables.items():
        src = pts[idx]
        engine.matrix(src[:2], src[:2])
        best = 1e9
        for _ in range(3 if k < 1000 else 2):
            t = time.perf_counter()
            m = engine.matrix(src, src)
            best = min(best, time.perf_counter() - t)
        res[f"ge_matrix_{k}_s"] = best
        res[f"ge_matrix_{k}_null_share"] = float((~np.isfinite(m.time_s)).mean())
        if k == 100:
            res["_ge_matrix_100"] = m.time_s


def bench_networkx(engine, pts, pairs, res):
    import networkx as nx

    g = engine.graph
    prof = engine.router.profile("auto")
    use = np.flatnonzero(prof.usable)
    G = nx.DiGraph()
    G.add_weighted_edges_from(zip(np.asarray(g.edge_src)[use].tolist(), np.asarray(g.edge_dst)[use].tolist(),
                                  prof.time[use].tolist(), strict=True))
    from scipy.spatial import cKDTree

    nodes = np.array(sorted(G.nodes))
    tree = cKDTree(np.column_stack([np.asarray(g.node_lon)[nodes] * np.cos(np.radians(pts[0, 1])),
                                    np.asarray(g.node_lat)[nodes]]))
    _, near = tree.query(np.column_stack([pts[:, 0] * np.cos(np.radians(pts[0, 1])), pts[:, 1]]))
    near = nodes[near]
    lat = []
    for a, b in pairs[:100]:
        t = time.perf_counter()
        try:
            nx.shortest_path(G, int(near[a]), int(near[b]), weight="weight")
        except nx.NetworkXNoPath:
            pass
        lat.append(time.perf_counter() - t)
    res["networkx_route_p50_ms"] = p50(lat) * 1e3


def run_peer(py: Path, script: str, args: list[str], timeout: int) -> dict:
    p = subprocess.run([str(py), str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        return {"errors": [p.stderr[-1500:]]}
    return json.loads(Path(args[-1]).read_text())


def bench_region(name, args, home: Path):
    import geoengine

    res = {"region": name}
    # build twice: the first run warms Numba's compile cache (if it was cold), the second is measured
    build_bundle(name, home / "warm")
    t0 = time.perf_counter()
    out, stages, pbf = build_bundle(name, home / "measured")
    res["ge_build_wall_s"] = time.perf_counter() - t0
    res["ge_graph_stage_s"] = stages["graph"]["seconds"]
    res["ge_routing_stage_s"] = stages["routing"]["seconds"]
    res["ge_ch_auto_s"] = stages["routing"]["info"]["auto"]["seconds"]
    res["ge_build_car_s"] = res["ge_graph_stage_s"] + res["ge_ch_auto_s"]
    res["ge_build_all_costings_s"] = res["ge_graph_stage_s"] + res["ge_routing_stage_s"]
    res["edges"] = stages["graph"]["counts"]["edges"]
    engine = geoengine.open(out)
    t = time.perf_counter()
    engine.router.warm()
    res["ge_open_warm_s"] = time.perf_counter() - t
    rng = np.random.default_rng(42)
    n_pts = max(2 * args.pairs, 1000)
    pts = random_points(engine, n_pts, seed=42)
    pairs = rng.integers(0, n_pts, size=(args.pairs, 2))
    tables = {k: rng.choice(n_pts, k, replace=False) for k in (10, 100, 1000)}
    bench_geoengine(engine, pts, pairs, tables, res)
    try:
        bench_networkx(engine, pts, pairs, res)
    except Exception as exc:  # pragma: no cover - reported
        res["networkx_error"] = repr(exc)
    if args.no_peers:
        res.pop("ge_route_durations", None)
        res.pop("_ge_matrix_100", None)  # arrays: not for --json
        return res
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "points.npz"
        np.savez(npz, lon=pts[:, 0], lat=pts[:, 1], pair_a=pairs[:, 0], pair_b=pairs[:, 1],
                 table_10=tables[10], table_100=tables[100], table_1000=tables[1000])
        if OSRM_PY.exists():
            peer = run_peer(OSRM_PY, "_peers_run.py", [str(npz), str(pbf), str(Path(tmp) / "osrm"),
                                                      str(Path(tmp) / "osrm.json")], 1200)
            res.update({k: v for k, v in peer.items() if k.startswith("osrm") or k == "errors"})
        else:
            res["osrm_error"] = f"{OSRM_PY} missing (see the module docstring)"
        if args.no_valhalla:
            res["valhalla_error"] = "skipped (--no-valhalla)"
        elif VALHALLA_PY.exists():
            peer = run_peer(VALHALLA_PY, "_valhalla_run.py", [str(npz), str(pbf), str(Path(tmp) / "valhalla"),
                                                              str(Path(tmp) / "valhalla.json")], 1800)
            res.update({k: v for k, v in peer.items() if k.startswith("valhalla") or k == "errors"})
        else:
            res["valhalla_error"] = f"{VALHALLA_PY} missing (see the module docstring)"
    # agreement with OSRM's durations (different speed models: only orientation)
    ge_t = np.asarray(res.pop("ge_route_durations"), dtype=float)
    os_t = np.asarray(res.pop("osrm_route_durations", []), dtype=float)
    if os_t.size == ge_t.size:
        ok = np.isfinite(ge_t) & np.isfinite(os_t) & (os_t > 60)
        res["route_time_ge_over_osrm_median"] = float(np.median(ge_t[ok] / os_t[ok])) if ok.any() else None
    res.pop("_ge_matrix_100", None)
    return res


def ratio(a, b):
    if a is None or b is None or not b:
        return "n/a"
    return f"{a / b:.2f}"


def report(res):
    g = res.get
    print(f"\n== {res['region']} ({g('edges')} directed edges) ==")
    rows = [
        ("route p50 ms (no narrative)", g("ge_route_p50_ms"), g("osrm_route_p50_ms"), g("valhalla_route_p50_ms"),
         g("networkx_route_p50_ms")),
        ("route p50 ms (with narrative)", g("ge_route_narrative_p50_ms"), None, None, None),
        ("router only p50 ms", g("ge_router_only_p50_ms"), None, None, None),
        ("matrix 10x10 s", g("ge_matrix_10_s"), g("osrm_table_10_s"), g("valhalla_matrix_10_s"), None),
        ("matrix 100x100 s", g("ge_matrix_100_s"), g("osrm_table_100_s"), g("valhalla_matrix_100_s"), None),
        ("matrix 1000x1000 s", g("ge_matrix_1000_s"), g("osrm_table_1000_s"), g("valhalla_matrix_1000_s"), None),
        ("build car s (graph + auto CH)", g("ge_build_car_s"), g("osrm_extract_s") and g("osrm_extract_s") + g("osrm_contract_s"),
         g("valhalla_build_s"), None),
        ("build 9 costings s", g("ge_build_all_costings_s"), None, None, None),
    ]
    print(f"{'':34s}{'geoengine':>11s}{'OSRM':>11s}{'Valhalla':>11s}{'networkx':>11s}   ge/OSRM  ge/Valh  nx/ge")

    def f(x):
        return f"{x:11.4f}" if isinstance(x, (int, float)) else f"{'-':>11s}"

    for label, ge, osrm, val, nxv in rows:
        print(f"{label:34s}{f(ge)}{f(osrm)}{f(val)}{f(nxv)}   {ratio(ge, osrm):>7s}  {ratio(ge, val):>7s}  "
              f"{ratio(nxv, ge):>5s}")
    if g("route_time_ge_over_osrm_median") is not None:
        print(f"median route time geoengine/OSRM on the same pairs: {g('route_time_ge_over_osrm_median'):.3f}")
    print(f"open + warm the router: {g('ge_open_warm_s'):.3f} s; routing stage wall (9 costings): "
          f"{g('ge_routing_stage_s'):.2f} s, graph stage {g('ge_graph_stage_s'):.2f} s")
    for k in ("osrm_error", "valhalla_error", "networkx_error", "errors"):
        if g(k):
            print(f"{k}: {g(k)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--regions", nargs="+", default=["liechtenstein", "andorra"])
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-valhalla", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the raw figures here")
    args = ap.parse_args()
    print(f"cpu threads visible: {os.cpu_count()}; NUMBA_CACHE_DIR={os.environ.get('NUMBA_CACHE_DIR')}")
    out = []
    with tempfile.TemporaryDirectory() as home:
        for name in args.regions:
            res = bench_region(name, args, Path(home) / name)
            report(res)
            out.append(res)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
