"""`geoengine warm` (geoengine.analysis.warm): every request path runs once on the bundle, the analysis
kernels on a local part of the network rather than a hierarchy of the whole junction graph."""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import dijkstra

from geoengine.analysis.access import accessibility
from geoengine.analysis.warm import _local_network, warm


def test_warm_runs_every_path(andorra):
    steps = warm(andorra)
    assert {"components", "route", "matrix", "isochrones", "accessibility", "nearest_pois", "elevation"} <= set(steps)
    assert all(v >= 0 for v in steps.values())


def test_local_network_is_the_induced_subgraph(andorra):
    net = andorra.network("auto")
    centre = (float(np.median(net.lon)), float(np.median(net.lat)))
    sub = _local_network(net, centre, 500)
    assert sub.n_nodes == 500 and 0 < sub.n_edges < net.n_edges
    # the nearest 500 junctions, and every edge between two of them, with its weights
    d2 = (net.lon - centre[0]) ** 2 + (net.lat - centre[1]) ** 2
    assert np.max(d2[np.isin(net.osm_id, sub.osm_id)]) <= np.partition(d2, 499)[499]
    orig = {(a, b): w for a, b, w in zip(net.osm_id[net.src].tolist(), net.osm_id[net.dst].tolist(),
                                         net.time_s.tolist(), strict=True)}
    inside = set(sub.osm_id.tolist())
    expected = {k for k in orig if k[0] in inside and k[1] in inside}
    got = set(zip(sub.osm_id[sub.src].tolist(), sub.osm_id[sub.dst].tolist(), strict=True))
    assert got == expected
    # accessibility on it equals Dijkstra on the same subgraph
    pts = np.column_stack([sub.lon, sub.lat])[np.flatnonzero(sub.in_component)[:20]]
    r = accessibility(sub, pts, max_time_s=60)
    poi_nodes, _ = sub.nearest_nodes(pts[:, 0], pts[:, 1])
    d = dijkstra(sub.to_scipy("time_s").T.tocsr(), indices=poi_nodes)
    assert np.array_equal(r.count, (d <= 60).sum(axis=0))
