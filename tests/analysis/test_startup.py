"""A fresh process's first route (issue 13): what it imports, the compiled strongly-connected-components kernel
that replaced scipy's on the route path, and the BLAS preload of geoengine/_startup.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from geoengine.graph.scc import scc_labels
from geoengine.graph.turns import largest_component

ROOT = Path(__file__).resolve().parents[2]


def scipy_labels(off, tgt):
    n = len(off) - 1
    m = sp.csr_matrix((np.ones(len(tgt), dtype=np.int8), tgt, off), shape=(n, n))
    return connected_components(m, directed=True, connection="strong")


@pytest.mark.parametrize("region", ["andorra", "liechtenstein"])
@pytest.mark.parametrize("costing", ["auto", "bicycle", "pedestrian"])
def test_scc_labels_equal_scipy_on_real_turn_graphs(engine_for, region, costing):
    prof = engine_for(region).router.profile(costing)
    off, tgt, _w, _s = prof.turn_csr()
    label, k = scc_labels(np.asarray(off, dtype=np.int64), tgt)
    k2, label2 = scipy_labels(off, tgt)
    assert k == k2 and k > 1
    np.testing.assert_array_equal(label, label2)
    # the snapping mask: usable edges of the component holding most usable edges
    mask = largest_component(off, tgt, prof.usable)
    best = np.bincount(label2[prof.usable]).argmax()
    np.testing.assert_array_equal(mask, prof.usable & (label2 == best))
    assert 0 < mask.sum() <= prof.usable.sum()


def test_scc_labels_equal_scipy_on_random_graphs():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 40, 300):
        for density in (0.5, 1.0, 2.0, 4.0):
            m = int(n * density)
            src = rng.integers(0, n, m)
            dst = rng.integers(0, n, m)
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
            off = np.searchsorted(src, np.arange(n + 1)).astype(np.int64)
            label, k = scc_labels(off, dst.astype(np.int32))
            k2, label2 = scipy_labels(off, dst)
            assert k == k2
            np.testing.assert_array_equal(label, label2)


def test_scc_labels_of_an_empty_graph():
    label, k = scc_labels(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))
    assert k == 0 and len(label) == 0


def _child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("GEOENGINE_FULL_SCIPY_IMPORT", None)
    return env


FIRST_ROUTE = r"""
import json, sys
import geoengine
engine = geoengine.open(sys.argv[1])
trip = engine.route(locations=[{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}])
heavy = ["scipy.linalg", "scipy.sparse", "rtree", "osmium", "pandas", "geopandas", "shapely", "fastapi",
         "starlette", "httpx", "dask", "igraph", "networkx", "matplotlib"]
print(json.dumps({"summary": trip["trip"]["summary"], "shape": trip["trip"]["legs"][0]["shape"],
                  "imported": [m for m in heavy if m in sys.modules]}))
"""


def test_first_route_in_a_fresh_process_imports_nothing_heavy(andorra):
    """The first route of a new interpreter equals the in-process one and imports neither scipy.linalg (Numba's
    BLAS check is served by the preloaded extension module), the R-tree (plain locations snap on the grid),
    the graph build's osmium, nor anything of the HTTP side or the analysis extra."""
    locs = [{"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}]
    here = andorra.route(locations=locs)  # in-process first: the child then loads the compiled kernels
    p = subprocess.run([sys.executable, "-c", FIRST_ROUTE, str(andorra.path)], capture_output=True, text=True,
                       env=_child_env(), timeout=600)
    assert p.returncode == 0, p.stderr
    child = json.loads(p.stdout.strip().splitlines()[-1])
    assert child["imported"] == []
    assert child["summary"]["length"] == here["trip"]["summary"]["length"]
    assert child["summary"]["time"] == here["trip"]["summary"]["time"]
    assert child["shape"] == here["trip"]["legs"][0]["shape"]


BLAS = r"""
import json, os, sys
import geoengine
import numba
import numpy as np

@numba.njit
def dot(a, b):
    return np.dot(a, b)

x = np.arange(5.0)
first = float(dot(x, x))
linalg_before = "scipy.linalg" in sys.modules
import scipy.linalg
print(json.dumps({"dot": first, "linalg_before": linalg_before,
                  "bound": getattr(scipy.linalg, "cython_blas", None) is sys.modules.get("scipy.linalg.cython_blas"),
                  "loader": type(scipy.linalg.__spec__.loader).__name__,
                  "solve": scipy.linalg.solve(np.eye(2) * 2.0, np.ones(2)).tolist()}))
"""


@pytest.mark.parametrize("full", [False, True])
def test_blas_preload_keeps_numba_blas_and_a_later_scipy_linalg_whole(full):
    env = _child_env()
    if full:
        env["GEOENGINE_FULL_SCIPY_IMPORT"] = "1"
    p = subprocess.run([sys.executable, "-c", BLAS], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["dot"] == 30.0  # np.dot in a kernel goes through scipy's cython_blas
    assert r["linalg_before"] is full  # the opt-out imports scipy.linalg with Numba's target, as before
    assert r["bound"] is True
    assert r["loader"] == "SourceFileLoader"
    assert r["solve"] == [0.5, 0.5]
