"""A/B of the library's /route and /matrix path between two revisions of geoengine, same bundle.

Issue 12 cut routing into kernels and services; its acceptance is "no route or matrix slowdown over
5 %". Both revisions answer the same requests on the same bundle, built by the older revision (routing
format 3: classic hierarchies, which the newer router still reads for a costing's defaults, so the
comparison isolates the code around the search), in fresh processes that alternate (old, new, old, new, ...) so that a
change in the machine's load hits both. Each process reports the median over the pairs of the calling
thread's CPU time (steady under load) and of wall time; the script prints the best of the rounds per
revision and the ratios new / old.

    PYTHONPATH=. .venv/bin/python benchmarks/route_ab_bench.py --bundle BUNDLE_DIR \
        [--old e61a127] [--new WORKTREE|REF] [--rounds 3] [--pairs 150] [--json FILE]

`--old`/`--new` take a git revision (exported with `git archive` into a temporary folder) or the
word `worktree` for the working tree. Each revision gets its own Numba cache folder; one untimed
warm-up process per revision fills it first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, sys, time
import numpy as np
import geoengine
import geoengine.bundle
import geoengine.errors

# Both revisions read the same routing files: a format-3 folder of classic hierarchies, which the
# router after the CCH (format 4) still uses for a costing's defaults when a bundle holds them.
with open(sys.argv[1] + "/manifest.json") as f:
    geoengine.bundle.STAGE_VERSIONS["routing"] = json.load(f)["stages"]["routing"]["version"]
eng = geoengine.open(sys.argv[1])
n_pairs = int(sys.argv[2])
g = eng.graph
rng = np.random.default_rng(7)
prof = eng.router.profile("auto")
nodes = np.unique(np.asarray(g.edge_src)[prof.usable])
pts = np.column_stack([np.asarray(g.node_lon)[nodes], np.asarray(g.node_lat)[nodes]])
pts = pts[rng.choice(len(pts), 2 * n_pairs + 100, replace=False)]
pairs = [[{"lon": float(a[0]), "lat": float(a[1])}, {"lon": float(b[0]), "lat": float(b[1])}]
         for a, b in zip(pts[0:2 * n_pairs:2], pts[1:2 * n_pairs:2])]


def timed(fn):
    c0, w0 = time.thread_time(), time.perf_counter()
    fn()
    return time.thread_time() - c0, time.perf_counter() - w0


def routes(dtype):
    cpu, wall = [], []
    for locs in pairs:
        try:
            c, w = timed(lambda: eng.route(locations=locs, directions_options={"directions_type": dtype}))
        except geoengine.errors.NoRoute:  # the same pairs fail in both revisions
            continue
        cpu.append(c)
        wall.append(w)
    return float(np.median(cpu)) * 1e3, float(np.median(wall)) * 1e3, len(cpu)


out = {}
for dtype in ("none", "instructions"):
    routes(dtype)  # warm: kernels loaded, caches filled
    best = min(routes(dtype) for _ in range(3))
    out[f"route_{dtype}"] = {"cpu_ms": best[0], "wall_ms": best[1], "answered": best[2]}
m = pts[-100:]
srcs = [{"lon": float(a), "lat": float(b)} for a, b in m]
eng.matrix_request(sources=srcs, targets=srcs)
best = min(timed(lambda: eng.matrix_request(sources=srcs, targets=srcs)) for _ in range(5))
out["matrix_100x100"] = {"cpu_ms": best[0] * 1e3, "wall_ms": best[1] * 1e3, "answered": 1}
print(json.dumps(out))
'''


def export(rev: str, into: Path) -> Path:
    """The revision's `geoengine` package in a folder of its own (the working tree as it is)."""
    if rev == "worktree":
        return ROOT
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "geoengine", "data"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def probe(code_dir: Path, cache: Path, bundle: str, pairs: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code_dir), NUMBA_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", PROBE, bundle, str(pairs)], env=env, cwd=cache.parent,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"probe failed with {code_dir}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True, help="a bundle both revisions can open")
    ap.add_argument("--old", default="e61a127", help="revision before the change (default: e61a127, "
                    "the last commit before issue 12's cut)")
    ap.add_argument("--new", default="worktree", help="revision after it (default: the working tree)")
    ap.add_argument("--new-bundle", help="the newer revision reads this bundle instead (e.g. the same "
                    "extract built by it: what users of each release get, search structures included)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating processes per revision")
    ap.add_argument("--pairs", type=int, default=150, help="random auto pairs per round")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="route-ab-") as tmp:
        tmp = Path(tmp)
        code = {name: export(rev, tmp / name) for name, rev in (("old", args.old), ("new", args.new))}
        caches = {name: tmp / f"numba-{name}" for name in code}
        bundles = {"old": args.bundle, "new": args.new_bundle or args.bundle}
        for name in code:  # warm-up, untimed: compile into each revision's own cache
            print(f"warming {name} ({getattr(args, name)})", file=sys.stderr, flush=True)
            probe(code[name], caches[name], bundles[name], 10)
        runs: dict[str, list[dict]] = {"old": [], "new": []}
        for r in range(args.rounds):
            for name in ("old", "new"):
                runs[name].append(probe(code[name], caches[name], bundles[name], args.pairs))
                print(f"round {r + 1} {name}: " + ", ".join(
                    f"{k} {v['cpu_ms']:.3f} ms cpu" for k, v in runs[name][-1].items()), file=sys.stderr,
                    flush=True)
    table = {}
    for key in runs["old"][0]:
        row = {}
        for name in ("old", "new"):
            row[name] = {m: min(run[key][m] for run in runs[name]) for m in ("cpu_ms", "wall_ms")}
        row["ratio_cpu"] = row["new"]["cpu_ms"] / row["old"]["cpu_ms"]
        row["ratio_wall"] = row["new"]["wall_ms"] / row["old"]["wall_ms"]
        table[key] = row
    print(f"{'case':<20} {'old cpu ms':>10} {'new cpu ms':>10} {'new/old':>8} {'old wall':>9} "
          f"{'new wall':>9} {'new/old':>8}")
    for key, row in table.items():
        print(f"{key:<20} {row['old']['cpu_ms']:>10.3f} {row['new']['cpu_ms']:>10.3f} "
              f"{row['ratio_cpu']:>8.3f} {row['old']['wall_ms']:>9.3f} {row['new']['wall_ms']:>9.3f} "
              f"{row['ratio_wall']:>8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"old": args.old, "new": args.new, "bundle": args.bundle, "new_bundle": args.new_bundle,
                                               "load_avg": os.getloadavg(), "cases": table}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
