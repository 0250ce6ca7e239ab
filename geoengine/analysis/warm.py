"""Fill Numba's compile cache for a bundle's request paths (`geoengine warm`; docs/analysis.md).

Every kernel is compiled with `cache=True`, so the machine code is written to NUMBA_CACHE_DIR (geoengine
defaults it to $GEOENGINE_HOME/numba-cache) and later processes load it instead of compiling. A kernel's
cache entry is keyed by its argument types (dtype, dimensions, layout, read-only flag), not by the data's
size, so this cuts a small bundle out of the bundle: the `LOCAL_JUNCTIONS` junctions around one point,
the road segments between them, a CCH topology of that graph and the DEM (the same files, linked), every
array written with the bundle's own dtypes and opened memory-mapped as the bundle's are. It then runs one
real call of each library path on that small bundle, in three child processes (`GROUPS`): the server's
start-up `Engine.warm` with the car's customisation, route (with alternates), optimised route, matrix,
route_many, isochrones, map matching, elevation, network export, accessibility, nearest POIs and the
other costings' customisations. So every kernel meets the types it meets in use, in the same memory and
time whatever the bundle's size. Opening the whole bundle instead (`Engine.warm`, the server's start-up)
customised the car over the whole graph: 3.4 GB at 64 copies of Liechtenstein. The search index's three
kernels run once on tiny data with the types of the real index's postings (`search.kernels.warm_kernels`:
its vocabulary is not read); tiles run no compiled code.

`./dev setup` runs it over the bundles that exist and `geoengine build` over the bundle it has just
built; it takes seconds when the cache is already full.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import cached_property
from pathlib import Path

import numpy as np

LOCAL_JUNCTIONS = 4000
# The steps, each group run by one child process (`python -m geoengine.analysis.warm`): Numba keeps what
# it compiles in the process, so a fresh cache filled in one process peaked at 0.72 GB (4 copies of
# Liechtenstein); in three each stays under 0.5 GB. With a full cache a child costs about a second.
GROUPS = (
    ("topology", "components"),
    ("route", "alternates", "optimised_route", "matrix", "route_many", "isochrones", "map_match", "network",
     "customisations"),
    ("accessibility", "nearest_pois", "elevation", "search"),
)


def warm(engine, log=None) -> dict[str, float]:
    """Run each request path once on a small bundle cut out of `engine`'s; returns seconds per step."""
    steps: dict[str, float] = {}

    def record(name, seconds):
        steps[name] = seconds
        if log:
            log(f"[warm] {name} {seconds:.2f}s")

    if not engine.bundle.has_stage("graph"):
        t0 = time.perf_counter()
        engine.elevation(lon=[0.0], lat=[0.0])
        record("elevation", round(time.perf_counter() - t0, 3))
        return steps
    with tempfile.TemporaryDirectory(prefix="geoengine-warm-") as tmp:
        t0 = time.perf_counter()
        local = local_bundle(engine.bundle, Path(tmp) / "local")
        record("local_bundle", round(time.perf_counter() - t0, 3))
        for group in GROUPS:
            for name, seconds in _run_child(local, engine.bundle.path, group).items():
                record(name, seconds)
    return steps


def _run_child(local: Path, real: Path, group) -> dict[str, float]:
    """Run the steps `group` in a new interpreter; returns their seconds (the child's last line)."""
    cmd = [sys.executable, "-m", "geoengine.analysis.warm", str(local), str(real), *group]
    res = subprocess.run(cmd, capture_output=True, text=True)  # the environment's NUMBA_CACHE_DIR
    if res.returncode != 0:
        raise RuntimeError(f"warming {', '.join(group)} failed (exit {res.returncode}):\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_steps(local: Path, real: Path, names) -> dict[str, float]:
    """Run the named steps on the small bundle `local` in this process; seconds per step."""
    steps: dict[str, float] = {}
    paths = None
    for name in names:
        t0 = time.perf_counter()
        if name == "topology":
            real_cch = Path(real) / "routing" / "cch"
            if (Path(local) / "routing").exists():
                _topology(Path(local), real_cch)
        elif name == "search":
            if (Path(real) / "search" / "post_ptr.npy").exists():
                from geoengine.search.kernels import warm_kernels

                warm_kernels(Path(real) / "search")
        else:
            if paths is None:
                from geoengine.engine import Engine

                paths = _Paths(Engine.open(local))
            getattr(paths, name)()
        steps[name] = round(time.perf_counter() - t0, 3)
    return steps


class _Paths:
    """The request paths, one call each, on the small bundle's engine (it customises the whole graph)."""

    def __init__(self, engine):
        self.engine = engine

    @cached_property
    def net(self):
        return self.engine.network("auto")  # after `components`: the car's profile is the start-up's

    @cached_property
    def pts(self):
        """Four junctions of the car network's largest component as (lon, lat) rows; None without two."""
        ids = np.flatnonzero(self.net.in_component)
        if len(ids) < 2:
            return None
        pick = ids[np.linspace(0, len(ids) - 1, 4).astype(np.int64)]
        return np.column_stack([self.net.lon[pick], self.net.lat[pick]])

    @property
    def locs(self) -> list[dict]:
        return [] if self.pts is None else [{"lon": float(x), "lat": float(y)} for x, y in self.pts[:2].tolist()]

    def components(self):
        self.engine.warm()  # the server's start-up: the car's perfect customisation, snapping, ...

    def route(self):
        from geoengine.errors import NoRoute
        from geoengine.narrative.maneuvers import warm_kernels

        for costing in ("auto", "pedestrian") if self.locs else ():  # pedestrian: a new metric's customisation
            try:
                self.engine.route(locations=self.locs, costing=costing)
            except NoRoute:
                pass
        if self.locs:  # the OSRM dialect's own kernels (overview=simplified, steps, nodes)
            from geoengine.dialects import osrm

            coords = ";".join(f"{p['lon']},{p['lat']}" for p in self.locs)
            osrm.run("route", self.engine, "v1", "driving", coords, {"steps": "true", "annotations": "true"})  # a Reply
        warm_kernels()  # build_maneuvers, the narrative's own entry for library callers

    def alternates(self):
        from geoengine.errors import NoRoute

        try:
            if self.locs:
                self.engine.route(locations=self.locs, costing="auto", alternates=1)
        except NoRoute:
            pass

    def optimised_route(self):
        """One request (four stops: the exact order), and the heuristic order of more stops than the exact
        solver takes on a cost matrix of the request's type (the stops of a small bundle may not differ)."""
        from geoengine.errors import GeoengineError
        from geoengine.routing.stop_order import EXACT_MAX, solve

        try:
            if self.pts is not None:
                self.engine.optimised_route(locations=[{"lon": float(x), "lat": float(y)} for x, y in self.pts])
        except GeoengineError:
            pass
        n = EXACT_MAX + 2
        solve(np.abs(np.subtract.outer(np.arange(n), np.arange(n) ** 1.5)).astype(np.float64), rounds=2)

    def matrix(self):
        if self.pts is not None:
            self.engine.matrix(self.pts, self.pts)

    def route_many(self):
        if self.pts is not None:
            self.engine.route_many(self.pts, self.pts[::-1])

    def isochrones(self):
        if self.pts is not None:
            self.engine.isochrones(self.pts[:1], [2])

    def map_match(self):
        """A match of the car route's shape, given as an encoded polyline (its decoding kernel too)."""
        from geoengine.errors import GeoengineError

        try:
            if self.locs:
                trip = self.engine.route(locations=self.locs, costing="auto")
                self.engine.map_match(encoded_polyline=trip["trip"]["legs"][0]["shape"], costing="auto")
        except GeoengineError:  # no route or no match here: the kernels ran all the same
            pass

    def network(self):
        self.net.to_scipy()
        self.net.turns()

    def customisations(self):
        router = self.engine.router
        if router.customiser is not None:
            router.customiser.wait()  # the perfect customisation that follows a new metric's basic one
            router.customiser.topology.warmup()

    def accessibility(self):
        if self.pts is not None:
            self.engine.accessibility(self.pts, max_time_s=120, at=self.pts)

    def nearest_pois(self):
        if self.pts is not None:
            self.engine.nearest_pois(self.pts, self.pts, 2, max_distance_m=2000)

    def elevation(self):
        if self.pts is None:
            self.engine.elevation(lon=[0.0], lat=[0.0])
            return
        self.engine.elevation(lat=self.pts[:, 1], lon=self.pts[:, 0])
        if self.engine.bundle.has_stage("elevation"):  # without a DEM a profile is an error
            self.engine.elevation_profile(self.pts)


# -- the small bundle -------------------------------------------------------------------------------------
def local_bundle(bundle, out: Path, k: int = LOCAL_JUNCTIONS) -> Path:
    """A bundle at `out` of the `k` junctions of `bundle`'s graph nearest its centre junction and the
    segments between them, with a CCH topology and the DEM and grades when `bundle` has them. Every
    array has the dtype of `bundle`'s own, so the kernels run on it meet the same types."""
    from geoengine.bundle import FORMAT, FORMAT_VERSION
    from geoengine.graph import Graph

    graph = Graph.open(bundle.path / "graph")
    nodes = _junctions_near(graph, _centre(graph), k)
    segs = _cut_graph(graph, nodes, out / "graph")
    stages = {"graph": {"version": bundle.stages["graph"]["version"]}}
    if bundle.has_stage("elevation"):
        _link_elevation(bundle.path / "elevation", segs, out / "elevation")
        stages["elevation"] = {"version": bundle.stages["elevation"]["version"]}
    if bundle.has_stage("routing") and (bundle.path / "routing" / "cch" / "cch.json").exists():
        (out / "routing").mkdir()  # the topology: the first child's first step (its kernels compile there)
        stages["routing"] = {"version": bundle.stages["routing"]["version"]}
    lon, lat = np.asarray(graph.node_lon)[nodes], np.asarray(graph.node_lat)[nodes]
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "region": None, "stages": stages,
                "bbox": [float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max())]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out


def _centre(graph) -> tuple[float, float]:
    """(lon, lat) of the median start of the edges a car may take: inside the car network, where it is
    dense (the middle of the bounding box may be a lake or a gap between two regions)."""
    src = np.asarray(graph.edge_src)[graph.mode_mask("auto")]
    if not len(src):
        src = np.asarray(graph.edge_src)
    lon, lat = np.asarray(graph.node_lon)[src], np.asarray(graph.node_lat)[src]
    mid = (float(np.median(lon)), float(np.median(lat)))
    i = int(np.argmin((lon - mid[0]) ** 2 + (lat - mid[1]) ** 2))
    return float(lon[i]), float(lat[i])


def _junctions_near(graph, centre, k: int) -> np.ndarray:
    """The (sorted) ids of the k junctions nearest `centre` (planar distance in degrees is enough)."""
    d2 = (np.asarray(graph.node_lon) - centre[0]) ** 2 + (np.asarray(graph.node_lat) - centre[1]) ** 2
    return np.sort(np.argpartition(d2, k)[:k]) if len(d2) > k else np.arange(len(d2))


def _cut_graph(graph, nodes: np.ndarray, out: Path) -> np.ndarray:
    """Write the graph of the junctions `nodes` and the segments between them (renumbered, restrictions
    between kept edges) to `out` in the graph stage's format; returns the kept segment ids."""
    from geoengine.graph.store import ARRAYS

    out.mkdir(parents=True)
    new_node = np.full(graph.n_nodes, -1, np.int64)
    new_node[nodes] = np.arange(len(nodes))
    segs = np.flatnonzero((new_node[np.asarray(graph.seg_u)] >= 0) & (new_node[np.asarray(graph.seg_v)] >= 0))
    edges = np.column_stack([2 * segs, 2 * segs + 1]).ravel()
    new_edge = np.full(graph.n_edges, -1, np.int64)
    new_edge[edges] = np.arange(len(edges))
    so = np.asarray(graph.shape_offsets, dtype=np.int64)
    count = so[segs + 1] - so[segs]
    shape_offsets = np.zeros(len(segs) + 1, np.int64)
    np.cumsum(count, out=shape_offsets[1:])
    points = np.repeat(so[segs] - shape_offsets[:-1], count) + np.arange(shape_offsets[-1])
    edge_src = new_node[np.asarray(graph.edge_src)[edges]]
    node_out_offsets = np.zeros(len(nodes) + 1, np.int64)
    np.cumsum(np.bincount(edge_src, minlength=len(nodes)), out=node_out_offsets[1:])
    rf, rt = np.asarray(graph.restr_from), np.asarray(graph.restr_to)
    restr = np.flatnonzero((new_edge[rf] >= 0) & (new_edge[rt] >= 0))
    arrays = {
        "node_out_offsets": node_out_offsets, "node_out_edges": np.argsort(edge_src, kind="stable"),
        "seg_u": new_node[np.asarray(graph.seg_u)[segs]], "seg_v": new_node[np.asarray(graph.seg_v)[segs]],
        "shape_offsets": shape_offsets, "edge_src": edge_src,
        "edge_dst": new_node[np.asarray(graph.edge_dst)[edges]],
        "restr_from": new_edge[rf[restr]], "restr_to": new_edge[rt[restr]],
    }
    for name in ARRAYS:
        real = getattr(graph, name)
        if name not in arrays:
            pick = (nodes if name.startswith("node_") else segs if name.startswith("seg_") else
                    points if name.startswith("shape_") else edges if name.startswith("edge_") else restr)
            arrays[name] = np.asarray(real)[pick]
        np.save(out / f"{name}.npy", np.ascontiguousarray(arrays[name], dtype=real.dtype))
    shutil.copyfile(graph.path / "strings.bin", out / "strings.bin")
    meta = dict(graph.meta, counts={"nodes": len(nodes), "segments": len(segs), "edges": len(edges)})
    (out / "graph.json").write_text(json.dumps(meta, indent=1))
    return segs


def _link_elevation(real: Path, segs: np.ndarray, out: Path) -> None:
    """The DEM files of `real` linked into `out` (read only, memory-mapped as they are), and the kept
    segments' grades written there."""
    from geoengine.elevation.grades import GRADE_FILES

    out.mkdir(parents=True)
    for f in real.iterdir():
        if f.name in GRADE_FILES:
            np.save(out / f.name, np.ascontiguousarray(np.load(f, mmap_mode="r")[segs]))
        else:
            os.symlink(f.resolve(), out / f.name)


def _topology(out: Path, real_cch: Path) -> None:
    """The CCH topology of the small graph in `out/routing/cch`, with the arrays' dtypes of `real_cch`
    (the routing stage picks some by size: `dn_edge` is int64 beyond 2**31 supergraph edges)."""
    from geoengine.graph import Graph
    from geoengine.routing.cch import TOPOLOGY_ARRAYS, CCHTopology
    from geoengine.routing.customise import build_topology

    topo = build_topology(Graph.open(out / "graph"))
    real = CCHTopology.load(real_cch, mmap=True)
    arrays = {name: np.asarray(getattr(topo, name), dtype=getattr(real, name).dtype) for name in TOPOLOGY_ARRAYS}
    CCHTopology(topo.n, arrays, topo.info).save(out / "routing" / "cch")


if __name__ == "__main__":  # a child of `warm`: LOCAL_BUNDLE REAL_BUNDLE STEP...
    print(json.dumps(run_steps(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])))
