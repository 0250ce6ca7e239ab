"""The tile stage's two parts (collection, cutting) in one process, against tilemaker on the same extract.

    PYTHONPATH=. .venv/bin/python benchmarks/tiles_stage_bench.py /work/scale-cache/liechtenstein-x16.osm.pbf

Prints wall and CPU seconds (this process and its forked workers) of `collect_spooled` and `cut_spooled`
as the `tiles` stage runs them (both cores), the cut writing its tiles into an MBTiles archive as the stage
does (tilemaker's time includes writing its archive too), then runs tilemaker (Debian's 2.2, `apt-get install
tilemaker`) with its OpenMapTiles example profile, shapefile layers removed, as benchmarks/tiles_bench.py
does, and prints its wall, CPU and peak RSS and the ratio of CPU seconds. Issue 29's target: the stage
takes no longer than tilemaker on the same extract.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def geoengine_stage(osm: Path) -> dict:
    from geoengine.bundler.pbfscan import scan_pbf
    from geoengine.tiles.mbtiles import MBTilesWriter
    from geoengine.tiles.spool import collect_spooled, cut_spooled

    bbox = scan_pbf(osm)["bbox"]
    with tempfile.TemporaryDirectory() as tmp:
        c0, t0 = cpu(), time.time()
        spool, parts = collect_spooled(osm, bbox, Path(tmp) / "spool")
        c1, t1 = cpu(), time.time()
        writer = MBTilesWriter(Path(tmp) / "out.mbtiles")
        for z, x, y, data in cut_spooled(spool, parts, bbox):
            writer.add(z, x, y, data)
        n = writer.count
        writer.close({"name": osm.stem, "format": "pbf", "compression": "gzip"})
        c2, t2 = cpu(), time.time()
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return {"collect_wall": t1 - t0, "collect_cpu": c1 - c0, "cut_wall": t2 - t1, "cut_cpu": c2 - c1, "tiles": n,
            "peak_rss_mib": peak // 1024}


def tilemaker(osm: Path) -> dict | None:
    if not shutil.which("tilemaker"):
        return None
    ex = Path("/usr/share/doc/tilemaker/examples")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = json.loads((ex / "config-openmaptiles.json").read_text())
        cfg["layers"] = {k: v for k, v in cfg["layers"].items() if "source" not in v}
        (Path(tmp) / "config.json").write_text(json.dumps(cfg))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        subprocess.run(["tilemaker", "--input", str(osm), "--output", str(Path(tmp) / "out.mbtiles"), "--config",
                        str(Path(tmp) / "config.json"), "--process", str(ex / "process-openmaptiles.lua")],
                       check=True, capture_output=True, cwd=tmp)
        wall = time.time() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": wall, "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "peak_rss_mib": after.ru_maxrss // 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pbf", type=Path)
    ap.add_argument("--no-peer", action="store_true", help="measure geoengine only (no tilemaker run)")
    args = ap.parse_args()
    ge = geoengine_stage(args.pbf)
    print(f"{args.pbf.name}: geoengine collection {ge['collect_wall']:.1f} s wall {ge['collect_cpu']:.1f} s CPU, "
          f"cutting and writing {ge['cut_wall']:.1f} s wall {ge['cut_cpu']:.1f} s CPU, {ge['tiles']} tiles, "
          f"stage {ge['collect_cpu'] + ge['cut_cpu']:.1f} s CPU, peak {ge['peak_rss_mib']} MiB (largest process)",
          flush=True)
    if args.no_peer:
        return 0
    tm = tilemaker(args.pbf)
    if tm is None:
        print("tilemaker: skipped (apt-get install tilemaker)")
        return 0
    total = ge["collect_cpu"] + ge["cut_cpu"]
    wall = ge["collect_wall"] + ge["cut_wall"]
    print(f"tilemaker: {tm['wall']:.1f} s wall {tm['cpu']:.1f} s CPU, peak {tm['peak_rss_mib']} MiB; "
          f"geoengine / tilemaker CPU = {total / tm['cpu']:.2f}x, wall = {wall / tm['wall']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
