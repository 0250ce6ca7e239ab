"""Analysis fixtures: the Andorra session bundle, and real points of interest from its own search stage
(the documents' locations: OSM POIs, streets and places), so accessibility runs on real data."""

from __future__ import annotations

import numpy as np
import pytest


def search_points(engine, n: int, seed: int = 13) -> np.ndarray:
    folder = engine.bundle.path / "search"
    lon = np.load(folder / "lon.npy")
    lat = np.load(folder / "lat.npy")
    w, s, e, nn = engine.bbox
    keep = np.flatnonzero(np.isfinite(lon) & np.isfinite(lat) & (lon >= w) & (lon <= e) & (lat >= s) & (lat <= nn))
    rng = np.random.default_rng(seed)
    pick = rng.choice(keep, size=min(n, len(keep)), replace=False)
    return np.column_stack([lon[pick], lat[pick]])


@pytest.fixture(scope="session")
def real_pois(andorra):
    """(300, 2) lon/lat of real documents of the Andorra bundle's search stage."""
    return search_points(andorra, 300)


@pytest.fixture(scope="session")
def town_points(andorra):
    """(40, 2) other real points (query locations) within 100 m of a car-network junction."""
    pts = search_points(andorra, 400, seed=7)
    _, d = andorra.network("auto").nearest_nodes(pts[:, 0], pts[:, 1])
    return pts[d < 100][:40]
