"""Graph-side timings on the sample extracts: build, open, edge costs, turn graph, snapping.

    PYTHONPATH=. python benchmarks/graph_bench.py [region ...]

Peers: the build is compared with osrm-extract + osrm-contract in the routing benchmark (it needs the
CH); here the figures are absolute, for orientation (median of repeated runs, one thread).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
FILES = {
    "andorra": "andorra/andorra.osm.pbf",
    "liechtenstein": "liechtenstein/valhalla-liechtenstein-latest.osm.pbf",
    "helsinki": "helsinki/helsinki.osm.pbf",
    "nominatim": "liechtenstein/nominatim-apidb-test-data.osm.pbf",
}


def timeit(fn, repeat=5):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main(regions):
    for region in regions:
        bench_region(region)


def bench_region(region):
    from geoengine.costing import COSTINGS, edge_costs, mode_of
    from geoengine.graph import Graph, turn_graph
    from geoengine.graph.build import build_graph
    from geoengine.routing.snap import Snapper

    osm = DATA / FILES[region]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "graph"
        t_build, res = timeit(lambda: build_graph(osm, out), repeat=3)
        t_open, g = timeit(lambda: Graph.open(out))
        t_costs, _ = timeit(lambda: [edge_costs(g, c) for c in COSTINGS])
        cost, _t, length = edge_costs(g, "auto")
        t_turn, tg = timeit(lambda: turn_graph(g, cost, length, mode=mode_of("auto")))
        t_index, snapper = timeit(lambda: Snapper(g), repeat=3)
        mask = np.isfinite(cost)
        rng = np.random.default_rng(0)
        k = np.asarray(g.edge_src)[rng.choice(np.flatnonzero(mask), 1000)]
        lon = g.node_lon[k] + rng.normal(0, 0.0005, 1000)
        lat = g.node_lat[k] + rng.normal(0, 0.0005, 1000)
        singles = []
        for a, b in zip(lon, lat, strict=True):
            t = time.perf_counter()
            snapper.snap(a, b, mask)
            singles.append(time.perf_counter() - t)
        t_many, _ = timeit(lambda: snapper.snap_many(lon, lat, mask), repeat=3)
        c = res["counts"]
        print(f"{region}: {c['nodes']:,} nodes, {c['edges']:,} edges, {len(tg[1]):,} car turn arcs")
        print(f"  build {t_build * 1000:.0f} ms | open {t_open * 1000:.1f} ms | edge costs x9 "
              f"{t_costs * 1000:.1f} ms | car turn graph {t_turn * 1000:.1f} ms")
        print(f"  snap index {t_index * 1000:.0f} ms | snap p50 {statistics.median(singles) * 1e6:.0f} us | "
              f"snap_many 1000 pts {t_many * 1000:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:] or ["andorra", "liechtenstein", "helsinki", "nominatim"])
