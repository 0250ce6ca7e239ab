"""The tile stage's cut alone, replayed from a saved spool in one process, so two revisions of the cut can be
compared on the same partitions (run it alternately with each revision first on PYTHONPATH).

    PYTHONPATH=. .venv/bin/python benchmarks/tiles_cut_replay.py spool /work/scale-cache/liechtenstein-x16.osm.pbf /tmp/x16
    PYTHONPATH=/work/main .venv/bin/python benchmarks/tiles_cut_replay.py cut /tmp/x16 --partitions 4
    PYTHONPATH=. .venv/bin/python benchmarks/tiles_cut_replay.py cut /tmp/x16 --partitions 4

`spool` collects the extract as the `tiles` stage does (geoengine.tiles.spool.collect_spooled) and saves the
spool's state beside its partition files. `cut` cuts the largest partitions (zooms 10-14) one after the other
in this process, as the stage's workers do (`spool._cut_partition`), and prints CPU and wall seconds, the
number and bytes of the tiles, a digest of every tile's gzip bytes (equal digests: byte-identical tiles) and
the load average. The CPU includes loading the partition's file (the collection's code).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import resource
import sys
import time
from pathlib import Path


def spool(osm: Path, out: Path) -> int:
    from geoengine.bundler.pbfscan import scan_pbf
    from geoengine.tiles.spool import collect_spooled

    bbox = scan_pbf(osm)["bbox"]
    sp, parts = collect_spooled(osm, bbox, out / "spool")
    with open(out / "state.pkl", "wb") as fh:
        pickle.dump((sp, parts, bbox), fh, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{osm.name}: {len(parts)} partitions -> {out}")
    return 0


def cut(folder: Path, n: int) -> int:
    from geoengine.tiles import mvt, simplify
    from geoengine.tiles import spool as S

    with open(folder / "state.pkl", "rb") as fh:
        sp, parts, bbox = pickle.load(fh)
    sp.folder = folder / "spool"
    plan = S.plan_cut(sp, parts, bbox)
    mvt.warm()
    simplify.warm()
    keys = S._largest_first(sp.folder, plan.partitions)[:n]
    S._JOB = {"folder": sp.folder, "shared": sp.shared, "maxzoom": sp.maxzoom, "bbox": bbox, "pz": sp.pz,
              "full_grid": plan.full_grid}

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    digest = hashlib.sha256()
    tiles = size = 0
    gc.disable()  # as the stage's cut (spool.gc_paused)
    c0, t0 = cpu(), time.time()
    for key in keys:
        for z, x, y, data, *_ in sorted(S._cut_partition(key), key=lambda t: t[:3]):
            digest.update(f"{z}/{x}/{y}".encode())
            digest.update(data)
            tiles += 1
            size += len(data)
    c1, t1 = cpu(), time.time()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"cut {len(keys)} partitions: cpu {c1 - c0:.2f} s wall {t1 - t0:.2f} s tiles {tiles} bytes {size} "
          f"digest {digest.hexdigest()[:16]} load {load}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("spool", help="collect an extract into a spool and save its state")
    s.add_argument("osm", type=Path)
    s.add_argument("out", type=Path)
    c = sub.add_parser("cut", help="cut the largest partitions of a saved spool in this process")
    c.add_argument("folder", type=Path)
    c.add_argument("--partitions", type=int, default=4, help="how many of the largest partitions (default 4)")
    args = ap.parse_args()
    return spool(args.osm, args.out) if args.cmd == "spool" else cut(args.folder, args.partitions)


if __name__ == "__main__":
    sys.exit(main())
