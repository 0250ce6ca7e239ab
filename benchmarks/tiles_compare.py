"""Check that a change to the tile stage keeps every tile: build the tiles of an extract at two
revisions and compare every tile's decoded features.

    git stash  # or check out the old revision
    PYTHONPATH=. .venv/bin/python benchmarks/tiles_compare.py dump andorra.osm.pbf /tmp/before.pkl
    git stash pop
    PYTHONPATH=. .venv/bin/python benchmarks/tiles_compare.py dump andorra.osm.pbf /tmp/after.pkl
    PYTHONPATH=. .venv/bin/python benchmarks/tiles_compare.py compare /tmp/before.pkl /tmp/after.pkl

`dump` runs the `tiles` stage's collection and cut (geoengine.tiles.spool, both cores) and pickles
{(z, x, y): uncompressed tile bytes}. `compare` requires the same set of tiles and, for every tile whose
bytes differ, the same decoded layers and features (mapbox-vector-tile's decoder); it prints how many
tiles are byte-identical and exits 1 when any tile decodes differently.
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def dump(osm: Path, out: Path) -> int:
    from geoengine.bundler.pbfscan import scan_pbf
    from geoengine.tiles.spool import collect_spooled, cut_spooled

    bbox = scan_pbf(osm)["bbox"]
    tiles = {}
    with tempfile.TemporaryDirectory() as tmp:
        spool, parts = collect_spooled(osm, bbox, Path(tmp) / "spool")
        for z, x, y, data in cut_spooled(spool, parts, bbox):
            tiles[(z, x, y)] = gzip.decompress(data)
    with open(out, "wb") as fh:
        pickle.dump(tiles, fh, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{osm.name}: {len(tiles)} tiles -> {out}")
    return 0


def compare(a_path: Path, b_path: Path) -> int:
    import mapbox_vector_tile

    with open(a_path, "rb") as fh:
        a = pickle.load(fh)
    with open(b_path, "rb") as fh:
        b = pickle.load(fh)
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        print(f"the tile sets differ: {len(only)} tiles in one only, e.g. {only[:5]}")
        return 1
    same = differ = 0
    for key in sorted(a):
        if a[key] == b[key]:
            same += 1
        elif mapbox_vector_tile.decode(a[key]) != mapbox_vector_tile.decode(b[key]):
            differ += 1
            if differ <= 5:
                print(f"tile {key} decodes differently")
    print(f"{len(a)} tiles: {same} byte-identical, {differ} decoded differently")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="build every tile of an extract and pickle the decoded bytes")
    d.add_argument("osm", type=Path)
    d.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="compare two dumps tile by tile")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    return dump(args.osm, args.out) if args.cmd == "dump" else compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
