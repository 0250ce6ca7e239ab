"""The first route and the first matrix in a fresh process, with the compile cache filled by
`geoengine warm` (docs/analysis.md). Runs each measurement in its own new interpreter.

    PYTHONPATH=. python benchmarks/first_call_bench.py [--bundle .geoengine/bundles/andorra] [--runs 3]

Prints wall and CPU seconds of `geoengine.open(bundle)` and of the first `engine.route(...)` and
`engine.matrix(...)` after it. On a shared machine wall time follows the load; CPU time does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import geoengine
engine = geoengine.open(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
engine.route(locations=[{"lon": float(sys.argv[2]), "lat": float(sys.argv[3])},
                       {"lon": float(sys.argv[4]), "lat": float(sys.argv[5])}])
t2, c2 = time.perf_counter(), time.process_time()
engine.matrix([[float(sys.argv[2]), float(sys.argv[3])]], [[float(sys.argv[4]), float(sys.argv[5])]])
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"open_s": t1 - t0, "route_s": t2 - t1, "route_cpu_s": c2 - c1, "matrix_s": t3 - t2,
                  "matrix_cpu_s": c3 - c2}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(ROOT / ".geoengine" / "bundles" / "andorra"))
    ap.add_argument("--points", default="1.5218,42.5063,1.5333,42.5107", help="lon,lat,lon,lat of the route")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "geoengine", "warm", "--quiet", args.bundle], check=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    rows = []
    for _ in range(args.runs):
        p = subprocess.run([sys.executable, "-c", CHILD, args.bundle, *args.points.split(",")], capture_output=True,
                           text=True, check=True)
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    print(json.dumps(rows, indent=2))
    print(f"\nfirst calls in a fresh process (cache warm; load average {load} at start)")
    for k in ("open_s", "route_s", "route_cpu_s", "matrix_s", "matrix_cpu_s"):
        vals = sorted(r[k] for r in rows)
        print(f"  {k:14s} min {vals[0]:6.2f}  median {vals[len(vals) // 2]:6.2f}")


if __name__ == "__main__":
    main()
