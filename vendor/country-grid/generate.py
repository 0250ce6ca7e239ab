#!/usr/bin/env python3
"""Derive geoengine's country grid (data/search/country_grid.bin) from Nominatim's country_osm_grid, and the
default country names (data/search/country_names.json) from Nominatim's country-names settings.

Source: `country_osm_grid.sql.gz`, the "simplified OSM country grid" that Nominatim falls back on for the
country of an object that no country boundary of its database covers (`get_country_code` in Nominatim's
lib-sql/functions/utils.sql). It ships in the PyPI package nominatim-db (`nominatim_db/resources/`; version
NOMINATIM_VERSION, the one benchmarks/peers/nominatim.sh installs). Licence: ODbL-1.0, (c) OpenStreetMap
contributors (the file's own header, kept in the output's `source`).

The output holds the same polygons, losslessly (the grid's coordinates lie on a 1e-4 degree lattice): per
polygon its country code and Nominatim's `area` (the tie-break: the smallest covering polygon wins), its
rings (exterior first) and their vertices as int32 steps of 1e-4 degree; six .npy arrays one after the
other (source text, codes, areas, polygon -> first ring, ring ends, steps), compressed with xz.
A multipolygon row becomes one polygon per part, each with the row's code and area.

The default names: `name: default:` of each `settings/country-names/<cc>.yaml` of the same package (the name
Nominatim gives a country in an address without a language: "Schweiz/Suisse/Svizzera/Svizra"), as
{"source": ..., "names": {"CH": ...}}.

    python vendor/country-grid/generate.py [--source PATH]            # rewrite both files
    python vendor/country-grid/generate.py [--source PATH] --check    # exit 1 when the file differs
    python vendor/country-grid/generate.py --pypi [--if-missing]      # the source from PyPI's wheel (./dev setup)

The grid (3.3 MB) is not committed: `./dev setup` runs the last line, which downloads nominatim-db's wheel
(15 MB, no dependencies) with pip into a temporary folder and reads the two resources from it.
"""

from __future__ import annotations

import argparse
import gzip
import io
import lzma
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import shapely

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "data" / "search" / "country_grid.bin"
NAMES_OUT = ROOT / "data" / "search" / "country_names.json"
NOMINATIM_VERSION = "5.3.3"
DEFAULT_SOURCE = (ROOT / "benchmarks" / ".peers" / "nominatim-venv" / "lib" / "python3.12" / "site-packages"
                  / "nominatim_db" / "resources" / "country_osm_grid.sql.gz")
SCALE = 10_000  # 1e-4 degree


def read_grid(path: Path) -> tuple[list[str], list[float], list, str]:
    """(codes, areas, geometries, header) of the rows of the SQL dump."""
    codes, areas, wkb, header = [], [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        copying = False
        for line in f:
            if not copying:
                if line.startswith("--") and line.strip("- \n"):
                    header.append(line.strip("- \n"))
                copying = line.startswith("COPY ")
                continue
            if line.startswith("\\."):
                break
            cc, area, geom = line.rstrip("\n").split("\t")
            codes.append(cc)
            areas.append(float(area))
            wkb.append(geom)
    return codes, areas, list(shapely.from_wkb(wkb)), "; ".join(header)


def encode(codes, areas, geoms, header: str) -> bytes:
    cc, area, poly_rings, ring_ends, xy = [], [], [0], [0], []
    for code, a, g in zip(codes, areas, geoms, strict=True):
        for part in getattr(g, "geoms", [g]):
            if part.is_empty:
                continue
            for ring in [part.exterior, *part.interiors]:
                c = np.asarray(ring.coords)
                q = np.round(c * SCALE)
                if np.abs(q / SCALE - c).max() > 1e-9:
                    raise ValueError("a vertex off the 1e-4 degree lattice: the encoding would not be lossless")
                xy.append(q.astype(np.int32))
                ring_ends.append(ring_ends[-1] + len(c))
            cc.append(code)
            area.append(a)
            poly_rings.append(len(ring_ends) - 1)
    xy = np.concatenate(xy)
    steps = np.diff(xy, axis=0, prepend=np.zeros((1, 2), np.int32))
    buf = io.BytesIO()
    # .npy arrays one after the other (read back as a stream: no buffer of the whole decompressed file)
    for arr in (np.asarray(f"Nominatim {NOMINATIM_VERSION} country_osm_grid.sql.gz: {header}"), np.asarray(cc, "S2"),
                np.asarray(area, np.float64), np.asarray(poly_rings, np.int32), np.asarray(ring_ends, np.int32),
                steps.astype(np.int32)):
        np.lib.format.write_array(buf, arr, allow_pickle=False)
    return lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME)


def default_names(settings: Path) -> str:
    """The JSON of Nominatim's default country names (settings/country-names/*.yaml)."""
    import json

    import yaml

    names = {}
    for f in sorted(settings.glob("*.yaml")):
        default = ((yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("name") or {}).get("default")
        if default and len(f.stem) == 2:
            names[f.stem.upper()] = str(default)
    return json.dumps({"source": f"Nominatim {NOMINATIM_VERSION} settings/country-names/*.yaml (name: default), "
                                 "GPL-3.0 project, names from OpenStreetMap (ODbL)", "names": names},
                      ensure_ascii=False, indent=0, sort_keys=True) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description="Derive data/search/country_grid.bin from Nominatim's country grid.")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="country_osm_grid.sql.gz (nominatim-db "
                                                                       f"{NOMINATIM_VERSION}, resources/)")
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    ap.add_argument("--pypi", action="store_true", help=f"read the source from nominatim-db {NOMINATIM_VERSION}'s "
                                                        "wheel, downloaded with pip into a temporary folder")
    ap.add_argument("--if-missing", action="store_true", help="do nothing when the grid file exists")
    a = ap.parse_args()
    if a.if_missing and OUT.exists():
        return 0
    if a.pypi:
        with tempfile.TemporaryDirectory() as tmp:
            return _write(_from_wheel(Path(tmp)), a.check)
    return _write(a.source, a.check)


def _from_wheel(tmp: Path) -> Path:
    """Downloads the wheel into `tmp`, extracts the grid and the country names there; the grid's path."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(tmp),
                    f"nominatim-db=={NOMINATIM_VERSION}"], check=True)
    (wheel,) = tmp.glob("nominatim_db-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name == "nominatim_db/resources/country_osm_grid.sql.gz" or \
                    name.startswith("nominatim_db/resources/settings/country-names/"):
                z.extract(name, tmp)
    return tmp / "nominatim_db" / "resources" / "country_osm_grid.sql.gz"


def _write(source: Path, check: bool) -> int:
    data = encode(*read_grid(source))
    names = default_names(source.parent / "settings" / "country-names").encode("utf-8")
    if check:
        same = OUT.exists() and OUT.read_bytes() == data and NAMES_OUT.exists() and NAMES_OUT.read_bytes() == names
        print("up to date" if same else f"{OUT} or {NAMES_OUT} differs from what {source} gives")
        return 0 if same else 1
    OUT.write_bytes(data)
    NAMES_OUT.write_bytes(names)
    print(f"wrote {OUT} ({len(data):,} bytes) and {NAMES_OUT} ({len(names):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
