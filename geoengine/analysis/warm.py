"""Fill Numba's compile cache for a bundle's request paths (`geoengine warm`; docs/analysis.md).

Every kernel is compiled with `cache=True`, so the machine code is written to NUMBA_CACHE_DIR (geoengine
defaults it to $GEOENGINE_HOME/numba-cache) and later processes load it instead of compiling. This runs
one real call of each library path over the bundle itself (route, matrix, route_many, isochrone, map
matching, elevation, search, network export, accessibility, nearest POIs), so every kernel meets the
argument types it meets in use. `./dev setup` runs it over the bundles that exist and `geoengine build`
over the bundle it has just built; it takes seconds when the cache is already full.
"""

from __future__ import annotations

import time

import numpy as np


def warm(engine, log=None) -> dict[str, float]:
    """Run each request path once; returns seconds per step."""
    steps: dict[str, float] = {}

    def step(name, fn):
        t0 = time.perf_counter()
        fn()
        steps[name] = round(time.perf_counter() - t0, 3)
        if log:
            log(f"[warm] {name} {steps[name]:.2f}s")

    step("components", engine.warm)
    if not engine.bundle.has_stage("graph"):
        return steps
    net = engine.network("auto")
    ids = np.flatnonzero(net.in_component)
    if len(ids) < 2:
        return steps
    pick = ids[np.linspace(0, len(ids) - 1, 4).astype(np.int64)]
    pts = np.column_stack([net.lon[pick], net.lat[pick]])
    locs = [{"lon": float(x), "lat": float(y)} for x, y in pts[:2].tolist()]

    def route():
        from geoengine.errors import NoRoute

        for costing in ("auto", "pedestrian"):
            try:
                engine.route(locations=locs, costing=costing)
            except NoRoute:
                pass

    step("route", route)
    step("matrix", lambda: engine.matrix(pts, pts))
    step("route_many", lambda: engine.route_many(pts, pts[::-1]))
    step("isochrones", lambda: engine.isochrones(pts[:1], [2]))
    step("network", lambda: (net.to_scipy(), net.turns()))
    # the analysis kernels meet the same types on a few thousand junctions around one point as on the
    # whole network, whose junction hierarchy (seconds and gigabytes at country scale) nobody keeps here
    local = _local_network(net, pts[0], LOCAL_JUNCTIONS)
    lpts = np.column_stack([local.lon, local.lat])[np.flatnonzero(local.in_component)[:4]]

    def accessibility():
        from geoengine.analysis.access import accessibility as run

        run(local, lpts, max_time_s=120, at=lpts)

    def nearest_pois():
        from geoengine.analysis.access import nearest_pois as run

        run(local, lpts, lpts, 2, max_distance_m=2000)

    step("accessibility", accessibility)
    step("nearest_pois", nearest_pois)
    step("elevation", lambda: engine.elevation(lat=pts[:, 1], lon=pts[:, 0]))
    return steps


LOCAL_JUNCTIONS = 4000


def _local_network(net, center, k: int):
    """The network's k junctions nearest `center` (lon, lat) and the edges between them."""
    d2 = (net.lon - center[0]) ** 2 + (net.lat - center[1]) ** 2
    nodes = np.sort(np.argpartition(d2, k)[:k]) if len(d2) > k else np.arange(len(d2))
    return net._induced(nodes)
