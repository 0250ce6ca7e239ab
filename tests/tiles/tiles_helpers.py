"""Helpers for the tile tests: tile coordinates of real places and decoding."""

from __future__ import annotations

import gzip
import math

import mapbox_vector_tile

# Andorra la Vella, the capital (centre of the old town).
ANDORRA_LA_VELLA = (1.5218, 42.5063)


def lonlat_tile(lon: float, lat: float, z: int) -> tuple[int, int]:
    n = 1 << z
    x = int((lon + 180.0) / 360.0 * n)
    r = math.radians(lat)
    y = int((1.0 - math.asinh(math.tan(r)) / math.pi) / 2.0 * n)
    return x, y


def decode(data: bytes) -> dict:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return mapbox_vector_tile.decode(data)
