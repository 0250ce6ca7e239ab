"""The tiles stage's two ways on one extract, each in a fresh child process, in the same run: the whole
feature set in memory (geoengine.tiles.features.collect + tiler.cut_tiles, the stage before issue 10)
against features spooled to disk by partition (geoengine.tiles.spool, the stage now). Prints wall, CPU
(workers included), the parent's peak RSS, the process tree's peak PSS, and whether the tiles are
byte-identical.

    PYTHONPATH=. .venv/bin/python benchmarks/tiles_spool_bench.py EXTRACT.osm.pbf
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import run_measured  # noqa: E402

CHILD = r"""
import hashlib, json, sys, tempfile
from pathlib import Path
from geoengine.bundler.source import describe_extract
path, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
bbox = describe_extract(path)["bbox"]
h = {}
if mode == "memory":
    from geoengine.tiles.features import collect
    from geoengine.tiles.tiler import cut_tiles
    tiles = cut_tiles(collect(path, bbox), bbox)
else:
    from geoengine.tiles.spool import collect_spooled, cut_spooled
    spool, parts = collect_spooled(path, bbox, Path(tempfile.mkdtemp()))
    tiles = cut_spooled(spool, parts, bbox)
for z, x, y, d in tiles:
    h[f"{z}/{x}/{y}"] = hashlib.sha256(d).hexdigest()
Path(out).write_text(json.dumps(h))
"""


def main() -> int:
    pbf = Path(sys.argv[1]).resolve()
    root = Path(__file__).resolve().parents[1]
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("memory", "spool"):
            out = Path(tmp) / f"{mode}.json"
            res[mode] = run_measured([sys.executable, "-c", CHILD, str(pbf), mode, str(out)],
                                     env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                                     log=Path(tmp) / f"{mode}.log")
            res[mode]["tiles"] = json.loads(out.read_text())
    same = res["memory"]["tiles"] == res["spool"]["tiles"]
    for mode in ("memory", "spool"):
        r = res[mode]
        print(f"{mode:7s} wall {r['seconds']:7.1f} s  cpu {r['cpu_seconds']:7.1f} s  peak RSS {r['peak_rss_mb']:6.0f} MB"
              f"  tree PSS {r['tree_peak_pss_mb']:6.0f} MB  tiles {len(r['tiles'])}")
    m, s = res["memory"], res["spool"]
    print(f"spool/memory: wall {s['seconds'] / m['seconds']:.2f}, cpu {s['cpu_seconds'] / m['cpu_seconds']:.2f}, "
          f"peak RSS {s['peak_rss_mb'] / m['peak_rss_mb']:.2f}, tree PSS {s['tree_peak_pss_mb'] / m['tree_peak_pss_mb']:.2f};"
          f" tiles byte-identical: {same}")
    digest = hashlib.sha256(json.dumps(sorted(res["spool"]["tiles"].items())).encode()).hexdigest()[:16]
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "tiles"} for k, v in res.items()}
                     | {"identical": same, "spool_digest": digest}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
