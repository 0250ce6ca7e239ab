"""Issue 13's criterion: "in a fresh process after setup, `geoengine.open(andorra).route(...)` returns in under
1 s". Each run is a new interpreter that times `import geoengine`, `geoengine.open(bundle)` and the first
`engine.route(...)` (then a first matrix, for reference), with the compile cache filled by `geoengine warm`
and the package's bytecode compiled, as `./dev setup` leaves them (docs/analysis.md).

    PYTHONPATH=. python benchmarks/first_call_bench.py [--bundle .geoengine/bundles/andorra] [--runs 5]

Prints, per run and as min / median: wall and CPU seconds (CPU of every thread of the process) of each
step, the criterion's total (import + open + route, wall from before `import geoengine` to the route's
return), the load average before the run, and the child's whole run as seen by the parent (interpreter
start and exit included). On a shared machine wall time follows the load; CPU time does not. There is no
peer: the criterion is absolute (for reference, OSRM's and Valhalla's servers load their data before the
first request and are not started per call).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import time
t0, c0 = time.perf_counter(), time.process_time()
import json, sys
import geoengine
t1, c1 = time.perf_counter(), time.process_time()
engine = geoengine.open(sys.argv[1])
t2, c2 = time.perf_counter(), time.process_time()
a, b = {"lon": float(sys.argv[2]), "lat": float(sys.argv[3])}, {"lon": float(sys.argv[4]), "lat": float(sys.argv[5])}
trip = engine.route(locations=[a, b])
t3, c3 = time.perf_counter(), time.process_time()
engine.matrix([[a["lon"], a["lat"]]], [[b["lon"], b["lat"]]])
t4, c4 = time.perf_counter(), time.process_time()
print(json.dumps({
    "import_s": t1 - t0, "import_cpu_s": c1 - c0, "open_s": t2 - t1, "open_cpu_s": c2 - c1,
    "route_s": t3 - t2, "route_cpu_s": c3 - c2, "total_s": t3 - t0, "total_cpu_s": c3 - c0,
    "matrix_s": t4 - t3, "matrix_cpu_s": c4 - c3,
    "route_length_km": trip["trip"]["summary"]["length"],
    "modules": len(sys.modules), "scipy_linalg_imported": "scipy.linalg" in sys.modules,
}))
"""

KEYS = ("import_s", "import_cpu_s", "open_s", "open_cpu_s", "route_s", "route_cpu_s", "total_s", "total_cpu_s",
        "process_s", "matrix_s", "matrix_cpu_s")


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", default=str(ROOT / ".geoengine" / "bundles" / "andorra"))
    ap.add_argument("--points", default="1.5218,42.5063,1.5333,42.5107", help="lon,lat,lon,lat of the route")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-warm", action="store_true", help="do not run `geoengine warm` and compileall first")
    args = ap.parse_args()
    if not args.no_warm:
        # what ./dev setup does: the compile cache for the bundle and the package's bytecode
        subprocess.run([sys.executable, "-m", "geoengine", "warm", "--quiet", args.bundle], check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "geoengine")], check=True,
                       stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    rows = []
    for _ in range(args.runs):
        load = loadavg()
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", CHILD, args.bundle, *args.points.split(",")], capture_output=True,
                           text=True, env=env)
        if p.returncode:
            sys.exit(f"child failed:\n{p.stderr}")
        row = json.loads(p.stdout.strip().splitlines()[-1])
        row["process_s"] = time.perf_counter() - t
        row["load"] = load
        rows.append(row)
        time.sleep(0.5)
    for r in rows:
        print(f"  load {r['load']:5.2f}  import {r['import_s']:.3f}  open {r['open_s']:.3f}  route {r['route_s']:.3f}"
              f"  = {r['total_s']:.3f} s wall ({r['total_cpu_s']:.3f} s CPU); process {r['process_s']:.3f} s")
    print(f"\nfirst route in a fresh process, {Path(args.bundle).resolve().name} (compile cache warm; {len(rows)} runs; "
          f"load average {min(r['load'] for r in rows):.2f}-{max(r['load'] for r in rows):.2f}; "
          f"{rows[0]['modules']} modules imported; scipy.linalg imported: {rows[0]['scipy_linalg_imported']})")
    for k in KEYS:
        vals = sorted(r[k] for r in rows)
        print(f"  {k:14s} min {vals[0]:6.3f}  median {vals[len(vals) // 2]:6.3f}  max {vals[-1]:6.3f}")
    med = sorted(r["total_s"] for r in rows)[len(rows) // 2]
    print(f"\ncriterion (import + open + first route < 1 s, median wall): {med:.3f} s -> "
          f"{'met' if med < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
