"""Independent readings of the raw SRTM samples, to check the engine against.

Nothing here imports geoengine.elevation: the tiles are read with zipfile and numpy ('>i2') and the
bilinear value is computed by hand, the plain way, one point at a time.
"""

from __future__ import annotations

import math
import zipfile

import numpy as np
import pytest

VOID = -32768


def raw_hgt(path) -> np.ndarray:
    """The 1201 x 1201 big-endian int16 samples of a zipped SRTM3 tile, row 0 = north edge."""
    with zipfile.ZipFile(path) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(".hgt")]
        raw = zf.read(member)
    assert len(raw) == 1201 * 1201 * 2
    return np.frombuffer(raw, dtype=">i2").reshape(1201, 1201)


def hand_bilinear(samples: np.ndarray, south: int, west: int, lat: float, lon: float) -> float | None:
    """Bilinear value inside one SRTM3 tile with corner (south, west), computed step by step; None
    when a void is among the four samples."""
    row = (south + 1 - lat) * 1200  # rows count down from the north edge
    col = (lon - west) * 1200
    r0, c0 = min(int(math.floor(row)), 1199), min(int(math.floor(col)), 1199)
    fr, fc = row - r0, col - c0
    nw, ne = int(samples[r0, c0]), int(samples[r0, c0 + 1])
    sw, se = int(samples[r0 + 1, c0]), int(samples[r0 + 1, c0 + 1])
    if VOID in (nw, ne, sw, se):
        return None  # the tests that need voids compute their own expectation
    north_edge = nw + (ne - nw) * fc
    south_edge = sw + (se - sw) * fc
    return north_edge + (south_edge - north_edge) * fr


@pytest.fixture(scope="session")
def n42e001(shared_data_dir) -> np.ndarray:
    return raw_hgt(shared_data_dir / "andorra/N42E001.hgt.zip")


@pytest.fixture(scope="session")
def n41e001(shared_data_dir) -> np.ndarray:
    return raw_hgt(shared_data_dir / "andorra/N41E001.hgt.zip")


@pytest.fixture(scope="session")
def n43e007(shared_data_dir) -> np.ndarray:
    return raw_hgt(shared_data_dir / "monaco/N43E007.hgt.zip")


@pytest.fixture(scope="session")
def monaco(engine_for):
    return engine_for("monaco")


@pytest.fixture(scope="session")
def bilinear():
    """The hand computation above, as a fixture: bilinear(samples, south, west, lat, lon)."""
    return hand_bilinear
