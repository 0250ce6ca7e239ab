"""Real point sets for the directions / optimisation tests: graph nodes of the sample extracts that the
car profile can reach from one another (filtered through the router's own matrix)."""

from __future__ import annotations

import numpy as np
import pytest

# Places in Andorra (town centres), used as waypoints
ANDORRA = {
    "andorra_la_vella": (1.5218, 42.5063),
    "encamp": (1.5800, 42.5350),
    "canillo": (1.5975, 42.5670),
    "sant_julia": (1.4910, 42.4640),
    "ordino": (1.5333, 42.5560),
    "pas_de_la_casa": (1.7330, 42.5420),
}
# Liechtenstein: Vaduz, Schaan, Balzers, Triesenberg, Eschen
LIECHTENSTEIN = {
    "vaduz": (9.5215, 47.1410),
    "schaan": (9.5095, 47.1650),
    "balzers": (9.4960, 47.0660),
    "triesenberg": (9.5420, 47.1180),
    "eschen": (9.5230, 47.2110),
}


def reachable_points(engine, n: int, seed: int, costing: str = "auto") -> np.ndarray:
    """n (lon, lat) graph nodes, all mutually reachable for `costing`, chosen at random with `seed`."""
    g = engine.graph
    rng = np.random.default_rng(seed)
    usable = engine.router.profile(costing).usable
    nodes = np.unique(np.asarray(g.edge_src)[usable])
    lon = np.asarray(g.node_lon)[nodes]
    lat = np.asarray(g.node_lat)[nodes]
    idx = rng.choice(len(lon), size=min(len(lon), 4 * n), replace=False)
    pts = np.column_stack([lon[idx], lat[idx]])
    res = engine.matrix(pts, pts, costing)
    ok = np.isfinite(res.time_s)
    # greedily keep points whose rows and columns are finite among the kept ones
    keep: list[int] = []
    for i in range(len(pts)):
        if all(ok[i, j] and ok[j, i] for j in keep) and ok[i, i]:
            keep.append(i)
        if len(keep) == n:
            break
    assert len(keep) == n, "not enough mutually reachable nodes"
    return pts[keep]


@pytest.fixture(scope="session")
def andorra_client(api_client, andorra):
    return api_client(andorra)
