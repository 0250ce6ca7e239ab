"""Customisable contraction hierarchies at scale: routing stage time and size (nine costings), routes
with default and non-default options (first request with its customisation, then cached), matrices,
the CCH against the classic CH on the same vertex pairs, and OSRM on the same points, in one run.

    NUMBA_CACHE_DIR=... PYTHONPATH=$PWD .venv/bin/python benchmarks/cch_bench.py \\
        --extract /work/scale-cache/cch/li4.osm.pbf --label 16 [--cache DIR] [--pairs 300] \\
        [--classic auto|all|none] [--no-peers] [--json out.json]

`--extract`: an .osm.pbf (e.g. a scale extract from replicate_extract.py) or a region name. The bundle
(source + graph + routing stages) is built once into --cache/<label> and reused. OSRM (osrm-bindings,
CH, one thread) runs in benchmarks/.peers/venv through benchmarks/_peers_run.py, as route_bench.py.
geoengine's route figures are `engine.route(...)` without narrative (snapping, search, unpacking,
shape, summary); OSRM's are its Route with overview=false. Absolute figures move a lot on a shared
machine: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
OSRM_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"


def p50(xs) -> float:
    return float(np.median(xs)) if len(xs) else float("nan")


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def build_bundle(extract: str, out: Path):
    from geoengine.bundler.pipeline import build, resolve_inputs
    from geoengine.bundler.stages import all_stages
    from geoengine.config import Settings
    from geoengine.progress import NullProgress

    if not (out / "manifest.json").exists():
        settings = Settings(home=out.parent / "home", data_mirror=str(ROOT.parent / "shared" / "data"))
        stages = [s for s in all_stages() if s.name in ("source", "graph", "routing")]
        inputs = resolve_inputs(extract, settings, progress=NullProgress())
        build(inputs, out, settings, progress=NullProgress(), stages=stages)
    manifest = json.loads((out / "manifest.json").read_text())
    return manifest["stages"]


def route_times(engine, locs, pairs, options=None, costing="auto"):
    lat, durs = [], []
    for a, b in pairs:
        t = time.perf_counter()
        try:
            doc = engine.route(locations=[locs[a], locs[b]], costing=costing, costing_options=options,
                               directions_options={"directions_type": "none"})
            durs.append(doc["trip"]["summary"]["time"])
        except Exception:
            durs.append(np.nan)
        lat.append(time.perf_counter() - t)
    return lat, durs


def classic_ch(graph, costings, res):
    from geoengine.costing import default_options
    from geoengine.routing.ch import ARRAYS, ContractionHierarchy
    from geoengine.routing.profile import Profile

    total_s, total_b, out = 0.0, 0, {}
    for c in costings:
        t = time.perf_counter()
        prof = Profile(graph, c, default_options(c))
        off, tgt, w, packed = prof.turn_csr()
        ch = ContractionHierarchy.build(graph.n_edges, off, tgt, w, packed)
        total_s += time.perf_counter() - t
        total_b += sum(getattr(ch, a).nbytes for a in ARRAYS)
        out[c] = ch
    res["classic_costings"] = list(costings)
    res["classic_stage_s"] = total_s
    res["classic_bytes"] = total_b
    return out


def bench(args, res, tmp: Path):
    import geoengine
    from geoengine.routing.profile import Profile

    out = Path(args.cache) / args.label
    out.parent.mkdir(parents=True, exist_ok=True)
    stages = build_bundle(args.extract, out)
    r = stages["routing"]
    res["edges"] = stages["graph"]["counts"]["edges"]
    res["routing_stage_s"] = r["seconds"]
    res["routing_bytes"] = dir_bytes(out / "routing")
    res["cch_edges"] = r["counts"]["cch_edges"]
    res["topology_s"] = r["info"]["topology"]["seconds"]
    res["order_s"] = r["info"]["topology"]["order_seconds"]
    # bundles from before the stage stopped customising report each costing's customisation
    res["customise_s_per_costing"] = {c: v.get("customise_seconds") for c, v in r["info"].items() if c != "topology"}
    res["customised_bytes_per_costing"] = {c: v.get("bytes") for c, v in r["info"].items() if c != "topology"}
    engine = geoengine.open(out)
    t = time.perf_counter()
    engine.router.warm()
    res["open_warm_s"] = time.perf_counter() - t
    router = engine.router
    prof = router.profile("auto")
    # random points near car roads of the main network, as route_bench.py
    rng = np.random.default_rng(42)
    g = engine.graph
    segs = np.flatnonzero(prof.component[0::2] | prof.component[1::2])
    so = np.asarray(g.shape_offsets)
    n_pts = max(2 * args.pairs, 1000)
    pick = rng.choice(segs, n_pts)
    idx = np.minimum(so[pick] + (rng.random(n_pts) * (so[pick + 1] - so[pick])).astype(np.int64), so[pick + 1] - 1)
    pts = np.column_stack([np.asarray(g.shape_lon)[idx] + rng.normal(0, 5 / 75_000, n_pts),
                           np.asarray(g.shape_lat)[idx] + rng.normal(0, 5 / 111_000, n_pts)])
    pairs = rng.integers(0, n_pts, size=(args.pairs, 2))
    table = rng.choice(n_pts, 1000, replace=False)
    locs = [{"lon": float(x), "lat": float(y)} for x, y in pts]

    route_times(engine, locs, pairs[:5])
    lat, durs = route_times(engine, locs, pairs)
    res["route_default_p50_ms"] = p50(lat) * 1e3
    res["_durations"] = durs
    opt = {"use_highways": 0.0}
    t = time.perf_counter()
    route_times(engine, locs, pairs[:1], opt)
    res["route_option_first_s"] = time.perf_counter() - t
    # "once its customisation is cached": the perfect customisation that follows in the background
    t = time.perf_counter()
    router.customiser.wait()
    res["route_option_perfect_after_s"] = time.perf_counter() - t
    lat, _ = route_times(engine, locs, pairs, opt)
    res["route_option_cached_p50_ms"] = p50(lat) * 1e3
    # first requests of new option sets, and where their time goes
    firsts, parts = [], []
    from geoengine.costing import parse_costing_options

    for k in range(5):
        o = {"use_highways": round(0.13 + 0.17 * k, 2)}
        t = time.perf_counter()
        route_times(engine, locs, pairs[k:k + 1], o)
        firsts.append(time.perf_counter() - t)
        router.customiser.wait()  # not timed: the next first request gets the machine to itself
        t0 = time.perf_counter()
        p = Profile(g, "auto", parse_costing_options("auto", {"use_tracks": round(0.1 + 0.1 * k, 2)}))
        t1 = time.perf_counter()
        p.turn_csr()
        t2 = time.perf_counter()
        _ = p.component
        t3 = time.perf_counter()
        ch = router.customiser.customise(p, perfect=False)  # what the first request waits for
        t4 = time.perf_counter()
        parts.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, ch.info["map_seconds"], ch.info["customise_seconds"],
                      ch.info["compact_seconds"]))
    res["route_new_option_first_s"] = firsts
    res["new_option_parts_s"] = dict(zip(("edge_costs", "turn_graph", "component", "customise_basic_total",
                                          "arc_map", "customise_kernel", "compact"),
                                         np.median(parts, axis=0).tolist(), strict=True))
    # matrices
    src = pts[table]
    for label, o in (("default", None), ("option", opt)):
        engine.matrix(src[:2], src[:2], "auto", o)
        t = time.perf_counter()
        m = engine.matrix(src, src, "auto", o)
        res[f"matrix_1000_{label}_s"] = time.perf_counter() - t
        res[f"matrix_1000_{label}_found"] = float(np.isfinite(m.time_s).mean())
    # the CCH against the classic CH on the same vertex pairs (auto defaults, with path unpacking)
    if args.classic != "none":
        from geoengine.costing import COSTINGS

        chs = classic_ch(g, COSTINGS if args.classic == "all" else ("auto",), res)
        cch = prof.ch
        usable = np.flatnonzero(prof.component)
        vp = rng.choice(usable, size=(2000, 2))
        for name, h in (("cch", cch), ("classic", chs["auto"])):
            h.query(int(vp[0, 0]), int(vp[0, 1]))
            lat = []
            for a, b in vp:
                t = time.perf_counter()
                h.query(int(a), int(b))
                lat.append(time.perf_counter() - t)
            res[f"{name}_query_p50_us"] = p50(lat) * 1e6
            t = time.perf_counter()
            h.table(vp[:1000, 0], vp[:1000, 1])
            res[f"{name}_table_1000_s"] = time.perf_counter() - t
    if not args.no_peers and OSRM_PY.exists():
        import subprocess

        npz = tmp / "points.npz"
        sel = {k: rng.choice(n_pts, k, replace=False) for k in (10, 100)}
        np.savez(npz, lon=pts[:, 0], lat=pts[:, 1], pair_a=pairs[:, 0], pair_b=pairs[:, 1], table_10=sel[10],
                 table_100=sel[100], table_1000=table)
        pbf = Path(args.extract)
        if not pbf.exists():
            pbf = ROOT.parent / "shared" / "data" / args.extract / f"{args.extract}.osm.pbf"
        p = subprocess.run([str(OSRM_PY), str(ROOT / "benchmarks" / "_peers_run.py"), str(npz), str(pbf),
                            str(tmp / "osrm"), str(tmp / "osrm.json")], capture_output=True, text=True, timeout=3600)
        if p.returncode == 0:
            peer = json.loads((tmp / "osrm.json").read_text())
            res.update({k: v for k, v in peer.items() if k.startswith("osrm")})
        else:
            res["osrm_error"] = p.stderr[-800:]
    elif not args.no_peers:
        res["osrm_error"] = f"{OSRM_PY} missing (python -m venv benchmarks/.peers/venv && pip install osrm-bindings)"
    ge_t = np.asarray(res.pop("_durations"), float)
    os_t = np.asarray(res.pop("osrm_route_durations", []), float)
    if os_t.size == ge_t.size:
        ok = np.isfinite(ge_t) & np.isfinite(os_t) & (os_t > 60)
        res["route_time_ge_over_osrm_median"] = float(np.median(ge_t[ok] / os_t[ok])) if ok.any() else None


def report(res):
    g = res.get

    def r(a, b):
        return f"{g(a) / g(b):.2f}" if isinstance(g(a), float) and isinstance(g(b), float) and g(b) else "n/a"

    print(f"\n== {res['label']} ({g('edges')} directed edges, {g('cch_edges')} CCH edges) ==")
    print(f"routing stage (order + topology + 9 customisations): {g('routing_stage_s'):.1f} s, "
          f"{g('routing_bytes') / 1e6:.1f} MB on disk; order {g('order_s'):.1f} s, topology {g('topology_s'):.1f} s")
    if g("classic_stage_s") is not None:
        print(f"classic CH for {', '.join(g('classic_costings'))}: {g('classic_stage_s'):.1f} s, "
              f"{g('classic_bytes') / 1e6:.1f} MB")
    print(f"customisation per costing (kernel s): {json.dumps(g('customise_s_per_costing'))}")
    print(f"open + warm: {g('open_warm_s'):.2f} s")
    print(f"route p50 ms, default options: {g('route_default_p50_ms'):.3f}; OSRM: {g('osrm_route_p50_ms') or float('nan'):.3f}"
          f"  (ge/OSRM {r('route_default_p50_ms', 'osrm_route_p50_ms')})")
    print(f"route p50 ms, use_highways=0 cached: {g('route_option_cached_p50_ms'):.3f}"
          f"  (option/default {r('route_option_cached_p50_ms', 'route_default_p50_ms')})")
    print(f"first request of a new option set s: {g('route_option_first_s'):.3f}, then "
          f"{', '.join(f'{x:.3f}' for x in g('route_new_option_first_s'))}; parts {json.dumps(g('new_option_parts_s'))}")
    print(f"matrix 1000x1000 s: default {g('matrix_1000_default_s'):.3f}, option {g('matrix_1000_option_s'):.3f}, "
          f"OSRM default {g('osrm_table_1000_s') or float('nan'):.3f}  (option/OSRM {r('matrix_1000_option_s', 'osrm_table_1000_s')})")
    if g("cch_query_p50_us") is not None:
        print(f"vertex-pair query p50 us (with unpacking): CCH {g('cch_query_p50_us'):.1f}, classic CH "
              f"{g('classic_query_p50_us'):.1f}; table 1000x1000 s: CCH {g('cch_table_1000_s'):.3f}, classic "
              f"{g('classic_table_1000_s'):.3f}")
    if g("route_time_ge_over_osrm_median") is not None:
        print(f"median route time geoengine/OSRM on the same pairs: {g('route_time_ge_over_osrm_median'):.3f}")
    if g("osrm_error"):
        print("osrm_error:", g("osrm_error"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--extract", required=True, help="an .osm.pbf or a region name")
    ap.add_argument("--label", required=True, help="name of this run and of its cached bundle")
    ap.add_argument("--cache", default="/work/scale-cache/cch/bundles", help="where bundles are built and kept")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--classic", choices=("none", "auto", "all"), default="auto",
                    help="also contract the classic CH (per-costing order) for comparison")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    print(f"cpu threads visible: {os.cpu_count()}; load average {os.getloadavg()}")
    res = {"label": args.label, "extract": args.extract}
    with tempfile.TemporaryDirectory() as tmp:
        bench(args, res, Path(tmp))
    report(res)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
