"""GeoNames populated places: the raw 19-column `geoname` table (cities500/cities1000/...,
tab-separated, no header) as `.txt`, `.txt.gz` or `.zip`, and admin1 names as a JSON list
`[{code, name}]` or a dict `{code: name}`.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geoengine.errors import BuildError

# geoname table columns (https://download.geonames.org/export/dump/readme.txt)
GEONAMEID, NAME, ASCIINAME, ALTNAMES, LAT, LON, FCLASS, FCODE, CC, CC2, ADMIN1 = range(11)
POPULATION = 14


@dataclass
class Places:
    """Column arrays of a GeoNames table (one row per place)."""

    ids: np.ndarray  # int64
    lat: np.ndarray
    lon: np.ndarray
    population: np.ndarray  # int64
    name: list[str]
    altnames: list[str]  # comma-separated alternate names as in the table
    fcode: list[str]
    country: list[str]
    admin1: list[str]  # "CC.code"

    def __len__(self) -> int:
        return len(self.ids)


def _open_text(path: Path) -> io.TextIOBase:
    name = path.name.lower()
    if name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    if name.endswith(".zip"):
        zf = zipfile.ZipFile(path)
        members = [m for m in zf.namelist() if m.lower().endswith(".txt") and "readme" not in m.lower()]
        if not members:
            raise BuildError(f"{path} holds no .txt GeoNames table")
        return io.TextIOWrapper(zf.open(members[0]), encoding="utf-8")
    return open(path, encoding="utf-8")


def read_places(path: str | Path) -> Places:
    path = Path(path)
    ids, lat, lon, pop, name, alt, fcode, cc, a1 = [], [], [], [], [], [], [], [], []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 19:
                if not line.strip():
                    continue
                raise BuildError(f"{path} line {lineno}: {len(cols)} columns, a GeoNames table has 19")
            try:
                ids.append(int(cols[GEONAMEID]))
                lat.append(float(cols[LAT]))
                lon.append(float(cols[LON]))
            except ValueError as exc:
                raise BuildError(f"{path} line {lineno}: {exc}") from exc
            pop.append(int(cols[POPULATION]) if cols[POPULATION].isdigit() else 0)
            name.append(cols[NAME])
            alt.append(cols[ALTNAMES])
            fcode.append(cols[FCODE])
            cc.append(cols[CC])
            a1.append(f"{cols[CC]}.{cols[ADMIN1]}")
    return Places(np.array(ids, np.int64), np.array(lat), np.array(lon), np.array(pop, np.int64),
                  name, alt, fcode, cc, a1)


def read_admin1(path: str | Path | None) -> dict[str, str]:
    if path is None:
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        return {str(k): str(v) for k, v in data.items()}
    return {str(d["code"]): str(d["name"]) for d in data if isinstance(d, dict) and "code" in d and "name" in d}


def importance(population: int, fcode: str) -> float:
    """0.15 + 0.1 per decade of population (500 -> 0.42, 1e6 -> 0.75), +0.1 capitals, +0.05 admin seats."""
    imp = 0.15 + 0.1 * math.log10(population + 1)
    if fcode == "PPLC":
        imp += 0.1
    elif fcode in ("PPLA", "PPLG"):
        imp += 0.05
    return min(imp, 0.95)


PLACE_CLASS = {"PPLC": "city", "PPLA": "city", "PPLA2": "town", "PPLA3": "town", "PPLA4": "village",
               "PPLX": "suburb", "PPLL": "locality", "PPLF": "farm", "PPLH": "locality", "PPLQ": "locality"}


def place_class(population: int, fcode: str) -> str:
    if fcode in PLACE_CLASS:
        return PLACE_CLASS[fcode]
    if population >= 100_000:
        return "city"
    if population >= 10_000:
        return "town"
    return "village"
