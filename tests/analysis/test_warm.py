"""`geoengine warm` (geoengine.analysis.warm): every request path runs once on a small bundle cut out of
the bundle (same array types, a few thousand junctions), and a fresh process then compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from geoengine.analysis.warm import local_bundle, run_steps, warm
from geoengine.bundle import Bundle
from geoengine.engine import Engine
from geoengine.graph import Graph
from geoengine.graph.store import ARRAYS
from geoengine.routing.cch import TOPOLOGY_ARRAYS, CCHTopology

ROOT = Path(__file__).resolve().parents[2]


def test_warm_runs_every_path(andorra):
    steps = warm(andorra)
    assert {"local_bundle", "topology", "components", "route", "alternates", "optimised_route", "matrix", "route_many", "isochrones", "map_match",
            "network", "customisations", "accessibility", "nearest_pois", "elevation"} <= set(steps)
    assert all(v >= 0 for v in steps.values())


def test_local_bundle_is_the_induced_graph_with_the_bundle_types(andorra, tmp_path):
    real = andorra.graph
    out = local_bundle(andorra.bundle, tmp_path / "local", k=500)
    run_steps(out, andorra.path, ["topology"])
    sub = Graph.open(out / "graph")
    assert sub.n_nodes == 500 and 0 < sub.n_segments < real.n_segments
    for name in ARRAYS:  # the kernels meet the same types: dtype, dimensions, read-only memory maps
        a, b = getattr(sub, name), getattr(real, name)
        assert (a.dtype, a.ndim, a.flags.writeable) == (b.dtype, b.ndim, b.flags.writeable), name
    # the segments are exactly those of the real graph between two kept junctions, with their attributes
    osm = np.asarray(real.node_osm_id)
    kept = set(np.asarray(sub.node_osm_id).tolist())
    want = {(int(u), int(v), int(w)) for u, v, w in zip(osm[real.seg_u], osm[real.seg_v], real.seg_way, strict=True)
            if u in kept and v in kept}
    sosm = np.asarray(sub.node_osm_id)
    got = {(int(u), int(v), int(w)) for u, v, w in zip(sosm[sub.seg_u], sosm[sub.seg_v], sub.seg_way, strict=True)}
    assert got == want
    e = 7 % sub.n_edges
    assert sub.edge_shape(e)[0][0] == sub.node_lon[sub.edge_src[e]]  # shapes follow their segments
    assert np.array_equal(np.diff(sub.node_out_offsets), np.bincount(sub.edge_src, minlength=sub.n_nodes))
    topo, real_topo = CCHTopology.load(out / "routing" / "cch"), CCHTopology.load(andorra.path / "routing" / "cch")
    assert topo.n == sub.n_edges
    for name in TOPOLOGY_ARRAYS:
        assert getattr(topo, name).dtype == getattr(real_topo, name).dtype, name
    # a working bundle: grades and DEM of the real one, and routes on it
    small = Engine.open(out)
    assert small.graph.meta.get("grades") == real.meta.get("grades") and small.graph.edge_climb is not None
    pts = np.column_stack([small.network("auto").lon, small.network("auto").lat])[:2]
    assert np.array_equal(small.elevation(pts), andorra.elevation(pts))
    assert Bundle.open(out).stages.keys() == {"graph", "routing", "elevation"}


PATHS = r"""
import json, sys
import numpy as np
from numba.core.dispatcher import Dispatcher
import geoengine

engine = geoengine.open(sys.argv[1])
engine.warm()  # the server's start-up
net = engine.network("auto")
ids = np.flatnonzero(net.in_component)
pts = np.column_stack([net.lon, net.lat])[ids[np.linspace(0, len(ids) - 1, 6).astype(np.int64)][1:5]]
locs = [{"lon": float(x), "lat": float(y)} for x, y in pts[:2].tolist()]
trip = engine.route(locations=locs, costing="auto")
for costing in ("pedestrian", "bicycle"):
    try:
        engine.route(locations=locs, costing=costing)
    except geoengine.NoRoute:  # e.g. a point on a motorway: the search ran all the same
        pass
engine.route(locations=locs, costing="auto", costing_options={"use_highways": 0.2})
engine.route(locations=locs, costing="auto", alternates=2)
from geoengine.dialects import osrm
osrm.run("route", engine, "v1", "driving", ";".join(f"{p['lon']},{p['lat']}" for p in locs), {"steps": "true"})
engine.optimised_route(locations=[{"lon": float(x), "lat": float(y)} for x, y in pts])
far = np.column_stack([net.lon, net.lat])[ids[np.linspace(0, len(ids) - 1, 17).astype(np.int64)]]
try:  # 17 stops: the heuristic order
    engine.optimised_route(locations=[{"lon": float(x), "lat": float(y)} for x, y in far])
except geoengine.NoRoute:
    pass
engine.matrix(pts, pts)
engine.matrix(pts, pts, costing="auto", costing_options={"use_tolls": 0.1})
engine.route_many(pts, pts[::-1])
engine.isochrones(pts[:2], [3, 6])
engine.isochrone(locations=locs[:1], contours=[{"time": 4}])
from geoengine.geo import decode_polyline
lat, lon = decode_polyline(trip["trip"]["legs"][0]["shape"], 6)
engine.map_match(shape=[{"lon": float(x), "lat": float(y)} for x, y in zip(lon[::3], lat[::3])], costing="bicycle")
engine.elevation(pts)
engine.elevation_profile(pts)
net.to_scipy(), net.turns()
engine.accessibility(pts, max_time_s=300)
engine.nearest_pois(pts, pts, 2, max_time_s=600)
engine.router.customiser.wait()
compiled, loaded = [], 0
for name, mod in list(sys.modules.items()):
    if name.startswith("geoengine"):
        for attr, f in vars(mod).items():
            if isinstance(f, Dispatcher) and f.__module__ == name:
                loaded += sum(f.stats.cache_hits.values())
                if sum(f.stats.cache_misses.values()):
                    compiled.append(f"{name}.{attr}")
print(json.dumps({"compiled": compiled, "loaded": loaded}))
"""


def test_a_fresh_process_compiles_nothing_after_warm(andorra, tmp_path):
    """`geoengine warm` with an empty compile cache, then a new interpreter that serves the real bundle
    (start-up, routes of three costings, an OSRM dialect route, non-default options and alternates, optimised routes, matrices, isochrones, map matching,
    elevation, network export, accessibility, nearest POIs, the perfect customisations): every kernel
    it runs is loaded from the cache, none is compiled."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-m", "geoengine", "warm", "--quiet", str(andorra.path)], env=env,
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-c", PATHS, str(andorra.path)], env=env, capture_output=True, text=True,
                       timeout=1800)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["compiled"] == []
    assert r["loaded"] >= 40  # the kernels were there to load (the statistics see the cache)


def test_a_bundle_of_warmed_types_is_not_warmed_again(andorra, tmp_path, monkeypatch):
    from geoengine.analysis import warm as analysis_warm
    from geoengine.bundler import warmkit
    from geoengine.bundler import warmkit as warm_mod
    from geoengine.bundler.pipeline import link_tree

    monkeypatch.setattr(warmkit, "cache_dir", lambda: tmp_path / "cache")  # where the stamps go
    logs: list[str] = []
    steps = warm_mod.warm_bundle(andorra, log=logs.append)
    assert steps is not None and "route" in steps and warm_mod.bundle_stamp_path(andorra.bundle.path).exists()
    assert warm_mod.warm_bundle(andorra, log=logs.append) is None  # the cache holds these types' kernels
    assert "nothing to compile" in logs[-1]
    # another folder with the same files has the same types; a changed dtype or a missing stage does not
    copy = tmp_path / "copy"
    link_tree(andorra.bundle.path, copy)
    assert warm_mod.types_key(copy) == warm_mod.types_key(andorra.bundle.path)
    lat = copy / "graph" / "node_lat.npy"
    a = np.load(lat)
    lat.unlink()
    np.save(lat, a.astype(np.float32 if a.dtype == np.float64 else np.float64))
    assert warm_mod.types_key(copy) != warm_mod.types_key(andorra.bundle.path)
    np.save(lat, a)
    assert warm_mod.types_key(copy) == warm_mod.types_key(andorra.bundle.path)
    import shutil

    shutil.rmtree(copy / "elevation")
    assert warm_mod.types_key(copy) != warm_mod.types_key(andorra.bundle.path)
    calls = []
    monkeypatch.setattr(analysis_warm, "warm", lambda engine, log=None: calls.append(engine) or {})
    assert warm_mod.warm_bundle(andorra, force=True) == {} and calls == [andorra]  # --force warms all the same
