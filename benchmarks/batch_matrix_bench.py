"""A large matrix three ways in one run: in-process `engine.matrix`, `geoengine.batch.matrix` on a Dask
LocalCluster of 2 workers (the blocks returned through the scheduler, and written by the workers into
memory-mapped files with `out=`), and OSRM's table (peer), on the same points.

    PYTHONPATH=. python benchmarks/batch_matrix_bench.py [--bundle .geoengine/bundles/liechtenstein]
                                                        [--n 10000] [--block 1000] [--no-osrm]

Points: n junctions of the bundle's car network (in its largest component), drawn with a fixed seed, used
as both sources and targets (n x n). The Dask result must equal the in-process one bit for bit (printed
and checked). OSRM (osrm-bindings, CH, its own car.lua graph and snapping from the same coordinates) runs
in the peer venv benchmarks/.peers/venv through _peers_analysis_run.py; its times are comparable, its
durations only roughly. Dask timing includes shipping the targets and the result blocks, not starting the
cluster (reported apart). The machine may be shared: compare ratios from the same run.
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
PBF = {"liechtenstein": ROOT.parent / "shared" / "data" / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf",
       "andorra": ROOT.parent / "shared" / "data" / "andorra" / "andorra.osm.pbf"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(ROOT / ".geoengine" / "bundles" / "liechtenstein"))
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--block", type=int, default=None, help="source rows per block (default: one block per worker)")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--out-dir", default=None, help="where the memory-mapped result files go (default: the temp dir)")
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    import geoengine
    from geoengine import batch

    engine = geoengine.open(args.bundle)
    net = engine.network("auto")
    ids = np.flatnonzero(net.in_component)
    pick = np.random.default_rng(0).choice(ids, size=args.n, replace=args.n > len(ids))
    pts = np.column_stack([net.lon[pick], net.lat[pick]])
    engine.matrix(pts[:5], pts[:5])  # compiled kernels loaded
    res = {"bundle": args.bundle, "n": args.n, "block": args.block, "load_average_start": os.getloadavg()[0]}

    t0 = time.perf_counter()
    ref = engine.matrix(pts, pts)
    res["in_process_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as client:
        client.run(lambda: None)
        res["cluster_start_s"] = time.perf_counter() - t0
        batch.matrix(engine, pts[:4], pts[:4], client=client, block=2)  # each worker opens the bundle once
        t0 = time.perf_counter()
        got = batch.matrix(engine, pts, pts, client=client, block=args.block)
        res["dask_2_workers_s"] = time.perf_counter() - t0
        res["dask_bit_identical"] = bool(got.time_s.tobytes() == ref.time_s.tobytes()
                                         and got.distance_m.tobytes() == ref.distance_m.tobytes())
        del got
        with tempfile.TemporaryDirectory(dir=args.out_dir) as tmp:
            t0 = time.perf_counter()
            got = batch.matrix(engine, pts, pts, client=client, block=args.block, out=tmp)
            res["dask_2_workers_out_s"] = time.perf_counter() - t0
            res["dask_out_bit_identical"] = bool(np.asarray(got.time_s).tobytes() == ref.time_s.tobytes()
                                                 and np.asarray(got.distance_m).tobytes() == ref.distance_m.tobytes())
            del got
    res["unreachable_cells"] = int((~np.isfinite(ref.time_s)).sum())
    res["load_average_end"] = os.getloadavg()[0]

    region = next((k for k in PBF if k in Path(args.bundle).name), None)
    if args.no_osrm:
        res["osrm"] = "skipped (--no-osrm)"
    elif not PEER_PY.exists() or region is None:
        res["osrm"] = f"not run: {PEER_PY} missing or no source extract known for {args.bundle}"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            npz = Path(tmp) / "in.npz"
            np.savez(npz, sources=pts, targets=pts)
            out = Path(tmp) / "out.json"
            p = subprocess.run([str(PEER_PY), str(ROOT / "benchmarks" / "_peers_analysis_run.py"), "osrm-table",
                                str(npz), str(PBF[region]), str(Path(tmp) / "osrm"), str(out)],
                               capture_output=True, text=True)
            peer = json.loads(out.read_text()) if out.exists() else {"error": p.stderr[-2000:]}
        res.update({k: v for k, v in peer.items()})

    print(json.dumps(res, indent=2))
    print(f"\n{args.n} x {args.n} matrix (car) on {Path(args.bundle).name}; machine possibly shared")
    print(f"  geoengine in-process          {res['in_process_s']:8.2f} s")
    print(f"  geoengine batch, Dask 2 workers {res['dask_2_workers_s']:6.2f} s   "
          f"(x{res['in_process_s'] / res['dask_2_workers_s']:.2f} of in-process; cluster start "
          f"{res['cluster_start_s']:.1f}s; bit-identical: {res['dask_bit_identical']})")
    print(f"  geoengine batch, Dask, out=   {res['dask_2_workers_out_s']:8.2f} s   "
          f"(x{res['in_process_s'] / res['dask_2_workers_out_s']:.2f} of in-process; rows written by the workers into "
          f"memory-mapped files; bit-identical: {res['dask_out_bit_identical']})")
    print(f"  load average {res['load_average_start']:.2f} at the start, {res['load_average_end']:.2f} after Dask")
    if "osrm_table_s" in res:
        print(f"  OSRM table                    {res['osrm_table_s']:8.2f} s   "
              f"(in-process / OSRM = {res['in_process_s'] / res['osrm_table_s']:.2f})")
    else:
        print(f"  OSRM: {res.get('osrm') or res.get('error')}")


if __name__ == "__main__":
    main()
