"""Accessibility against pandana, in one run, on the same graph, POIs and limit.

    PYTHONPATH=. python benchmarks/accessibility_bench.py [--bundle .geoengine/bundles/liechtenstein]
                                                         [--minutes 15] [--pois 2000] [--repeat 3]

Graph: the bundle's car network (`engine.network("auto")`: directed junction graph, edge weight =
`time_s`). POIs: real points from the bundle's own search stage (its documents' locations), each attached
to its nearest in-component junction by geoengine; pandana gets the SAME junction ids, the same edges and
weights (`twoway=False`) and the same limit, and runs `precompute(limit)` + `aggregate(limit, type="sum")`
over a variable of ones = the count of POIs reachable within the limit from every junction. geoengine runs
`engine.accessibility(pois, "auto", max_time_s=limit)` (at="nodes": every junction).

pandana runs in the peer venv benchmarks/.peers/venv (`python -m venv benchmarks/.peers/venv &&
benchmarks/.peers/venv/bin/pip install osrm-bindings pandana`) through _peers_analysis_run.py. Times are
the best of --repeat runs after one warm-up call (compile cache). Ratios > 1 mean geoengine is faster.
The machine may be shared: run both in the same run and compare the ratio, not absolute seconds.
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
PEER_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"


def real_pois(engine, n, seed=0):
    folder = engine.bundle.path / "search"
    lon, lat = np.load(folder / "lon.npy"), np.load(folder / "lat.npy")
    w, s, e, nn = engine.bbox
    keep = np.flatnonzero(np.isfinite(lon) & (lon >= w) & (lon <= e) & (lat >= s) & (lat <= nn))
    pick = np.random.default_rng(seed).choice(keep, size=min(n, len(keep)), replace=False)
    return np.column_stack([lon[pick], lat[pick]])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(ROOT / ".geoengine" / "bundles" / "liechtenstein"))
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--pois", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import numba

    import geoengine

    engine = geoengine.open(args.bundle)
    limit = args.minutes * 60.0
    net = engine.network("auto")
    pois = real_pois(engine, args.pois)
    poi_node, _ = net.nearest_nodes(pois[:, 0], pois[:, 1])
    t0 = time.perf_counter()
    engine.accessibility(pois[:10], "auto", max_time_s=60)  # load the compiled kernels, build the hierarchy
    first = time.perf_counter() - t0
    best = best_cpu = 1e9
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        ours = engine.accessibility(pois, "auto", max_time_s=limit)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    res = {"bundle": args.bundle, "nodes": net.n_nodes, "edges": net.n_edges, "pois": len(pois),
           "poi_junctions": int(len(np.unique(poi_node))), "limit_s": limit, "threads": numba.get_num_threads(),
           "geoengine_s": best, "geoengine_cpu_s": best_cpu, "geoengine_first_call_s": first,
           "geoengine_max_count": int(ours.count.max()), "load_average_start": os.getloadavg()[0]}

    if not PEER_PY.exists():
        res["pandana"] = f"not run: {PEER_PY} missing (see the module docstring)"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "in.npz"
            np.savez(npz, lon=net.lon, lat=net.lat, src=net.src, dst=net.dst, w=net.time_s, poi_node=poi_node,
                     limit=limit, repeat=args.repeat)
            out = Path(tmp) / "out.json"
            p = subprocess.run([str(PEER_PY), str(ROOT / "benchmarks" / "_peers_analysis_run.py"), "pandana",
                                str(npz), str(out)], capture_output=True, text=True)
            peer = json.loads(out.read_text()) if out.exists() else {"error": p.stderr[-2000:]}
        if "error" in peer:
            res["pandana"] = f"failed: {peer['error']}"
        else:
            counts = np.rint(np.asarray(peer.pop("pandana_counts"))).astype(np.int64)
            res.update(peer)
            res["counts_equal"] = bool(np.array_equal(counts, ours.count))
            res["counts_differ_at"] = int((counts != ours.count).sum())
            if not res["counts_equal"]:
                np.save(Path(tempfile.gettempdir()) / "accessibility_bench_pandana_counts.npy", counts)
            res["ratio_vs_aggregate"] = peer["pandana_aggregate_s"] / best
            res["ratio_vs_precompute_plus_aggregate"] = (peer["pandana_precompute_s"] + peer["pandana_aggregate_s"]) / best
            res["cpu_ratio_vs_aggregate"] = peer["pandana_aggregate_cpu_s"] / best_cpu
            res["cpu_ratio_vs_precompute_plus_aggregate"] = (peer["pandana_precompute_cpu_s"]
                                                             + peer["pandana_aggregate_cpu_s"]) / best_cpu
            # pandana truncates every edge weight to integer milliseconds (floor(w * 1000)) inside its
            # contraction hierarchy, so paths near the limit come out shorter there. Run geoengine's same
            # kernels on those truncated weights (integer ms, exact sums) to compare the counts exactly.
            from copy import copy

            from geoengine.routing.access import accessibility

            net_ms = copy(net)
            net_ms.__dict__.pop("_access_csr", None)
            net_ms.__dict__.pop("_access_ch", None)
            net_ms.time_s = np.floor(net.time_s * 1000.0)
            same = accessibility(net_ms, pois, max_time_s=limit * 1000.0)
            res["counts_equal_on_pandana_ms_weights"] = bool(np.array_equal(counts, same.count))
            res["counts_differ_on_pandana_ms_weights"] = int((counts != same.count).sum())

    res["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(res, indent=2))
    print(f"\naccessibility: count of {res['pois']} POIs within {args.minutes:g} min by car at all {res['nodes']} "
          f"junctions ({res['threads']} threads; machine possibly shared)")
    print(f"  load average {res['load_average_start']:.2f} at the start, {res['load_average_end']:.2f} at the end; "
          "times are the best of --repeat, wall and CPU (all threads of the process)")
    print(f"  geoengine                      {best:8.3f} s  CPU {best_cpu:7.3f} s   (first call, with the junction-graph hierarchy "
          f"build: {first:.2f} s; pandana's Network build {res.get('pandana_build_s', float('nan')):.2f} s is "
          "not counted either)")
    if "pandana_aggregate_s" in res:
        print(f"  pandana aggregate              {res['pandana_aggregate_s']:8.3f} s  CPU "
              f"{res['pandana_aggregate_cpu_s']:7.3f} s   ratio {res['ratio_vs_aggregate']:.1f}x "
              f"(CPU {res['cpu_ratio_vs_aggregate']:.1f}x)")
        print(f"  pandana precompute+aggregate   {res['pandana_precompute_s'] + res['pandana_aggregate_s']:8.3f} s  CPU "
              f"{res['pandana_precompute_cpu_s'] + res['pandana_aggregate_cpu_s']:7.3f} s   ratio "
              f"{res['ratio_vs_precompute_plus_aggregate']:.1f}x (CPU {res['cpu_ratio_vs_precompute_plus_aggregate']:.1f}x)")
        print(f"  counts equal: {res['counts_equal']} (differ at {res['counts_differ_at']} junctions; "
              f"pandana truncates weights to ms); on pandana's ms weights: "
              f"{res['counts_equal_on_pandana_ms_weights']} (differ at {res['counts_differ_on_pandana_ms_weights']})")
    else:
        print(f"  pandana: {res.get('pandana')}")


if __name__ == "__main__":
    main()
