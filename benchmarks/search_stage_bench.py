"""The search build stage alone (documents + index) on one extract, in a forked child: wall, CPU of the
child (all its threads), the child's peak RSS (wait4: its largest process, the child or the reader it forks), the highest sum of
the child's and its own children's RSS sampled every 20 ms (peak_tree_mb), the parent's RSS at the fork (what
the child starts with), and per sub-step of build_documents (then `write_index`) its wall, CPU and the child's RSS
after it. Compare two trees by running it with PYTHONPATH pointing at each, on the same machine state:

    PYTHONPATH=<tree> python benchmarks/search_stage_bench.py EXTRACT.osm.pbf [GEONAMES.txt.gz ADMIN1.json]

Without the GeoNames files it measures what benchmarks/scale_bench.py's build step does (`geoengine build
FILE` is given no `places`); with them the GeoNames step comes on top (the table is read and its important
places become documents: about 12 s of CPU more at 64 copies). Numba's compile time is not counted when
NUMBA_CACHE_DIR holds the compiled kernels (run it twice). The 64-copy extract:
../shared/tools/replicate_extract.py valhalla-liechtenstein-latest.osm.pbf OUT 8.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import threading
import time
from pathlib import Path


def rss_mb(pid: str = "self") -> float:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    except OSError:  # (a child that just ended)
        pass
    return 0.0


def tree_mb() -> float:
    """RSS of this process and its children (the search read's forked reader): what the machine holds."""
    total = rss_mb()
    for task in os.listdir("/proc/self/task"):
        try:
            kids = open(f"/proc/self/task/{task}/children").read().split()
        except OSError:
            continue
        total += sum(rss_mb(k) for k in kids)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pbf")
    ap.add_argument("places", nargs="?", help="GeoNames table (as the build's `places` input)")
    ap.add_argument("admin1", nargs="?", help="GeoNames admin1 names")
    a = ap.parse_args()
    import numpy  # noqa: F401  (imports before the fork, as the build process has them)
    import osmium  # noqa: F401
    import scipy.spatial  # noqa: F401
    import shapely  # noqa: F401

    from geoengine.search.documents import build_documents
    from geoengine.search.write import write_index

    start = rss_mb()
    fd, result = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        out = Path(tempfile.mkdtemp())
        c0 = time.process_time()
        samples: list[tuple[float, float]] = []  # (time, RSS MB) every 20 ms: the peak of each step
        tree: list[float] = [0.0]  # the highest RSS of this process and its children together
        done = threading.Event()

        def poll():
            while not done.wait(0.02):
                samples.append((time.perf_counter(), rss_mb()))
                tree[0] = max(tree[0], tree_mb())

        threading.Thread(target=poll, daemon=True).start()
        t1 = time.perf_counter()
        gc.freeze()  # as the build stage does (search/stage.py): what exists before it is not collected
        try:  # as the build stage does: the read's records kept for updates (search/records.py), where the tree has them
            from geoengine.search import records

            def keep(*read):
                records.save(out, records.records_of(*read))

            ds, info = build_documents(a.pbf, a.places, a.admin1, keep=keep, keep_ways=str(out / "ways"))
        except ImportError:
            ds, info = build_documents(a.pbf, a.places, a.admin1)
        c2, t2 = time.process_time(), time.perf_counter()
        write_index(out, ds, release=True)  # as the build stage calls it
        steps = info.get("steps", []) + [{"step": "write_index", "wall_s": round(time.perf_counter() - t2, 3),
                                  "cpu_s": round(time.process_time() - c2, 3), "rss_mb": round(rss_mb(), 1)}]
        done.set()
        end = t1
        for st in steps:  # the highest sampled RSS inside each step
            begin, end = end, end + st["wall_s"]
            st["peak_mb"] = round(max([r for t, r in samples if begin <= t <= end] + [st["rss_mb"]]), 1)
        Path(result).write_text(json.dumps({"documents": len(ds), "cpu_s": round(time.process_time() - c0, 2),
                                            "documents_wall_s": round(t2 - t1, 2), "steps": steps,
                                            "peak_tree_mb": round(tree[0], 1)}))
        os._exit(0)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    child = json.loads(Path(result).read_text())
    os.unlink(result)
    # cpu_s: the child's and its reaped children's (wait4), cpu_child_s: the child's own
    print(json.dumps({"pbf": a.pbf, "status": status, "wall_s": round(wall, 2),
                      "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "cpu_child_s": child["cpu_s"],
                      "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "start_rss_mb": round(start, 1),
                      "peak_above_start_mb": round(ru.ru_maxrss / 1024 - start, 1),
                      "peak_tree_mb": child["peak_tree_mb"], "documents": child["documents"],
                      "load": os.getloadavg()}))
    for st in child["steps"]:
        print(f"  {st['step']:<18} wall {st['wall_s']:7.2f} s  cpu {st['cpu_s']:7.2f} s  rss after {st['rss_mb']:7.1f} MB"
              f"  peak in it {st['peak_mb']:7.1f} MB")


if __name__ == "__main__":
    main()
