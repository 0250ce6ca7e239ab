"""The compile kit (geoengine/bundler/warmkit.py): its extract builds into a full bundle whose request
paths answer, and a build starts the one-time compile in the background only where the cache lacks it."""

from __future__ import annotations

import subprocess
import sys

import osmium
import pytest

from geoengine.bundler import warmkit


def test_kit_extract_has_what_every_stage_reads(tmp_path):
    path = warmkit.write_extract(tmp_path / "kit.osm.pbf")
    kinds = {"highway": 0, "restriction": 0, "addr:housenumber": 0, "addr:interpolation": 0, "place": 0,
             "amenity": 0, "building": 0}
    for obj in osmium.FileProcessor(str(path)):
        for k in kinds:
            if k in obj.tags or (k == "restriction" and obj.tags.get("type") == "restriction"):
                kinds[k] += 1
    assert all(kinds.values()), kinds
    assert kinds["highway"] == 2 * warmkit.GRID


def test_kit_builds_a_bundle_that_routes_and_searches(tmp_path, settings):
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.engine import Engine
    from geoengine.progress import NullProgress

    inputs = BuildInputs(osm=warmkit.write_extract(tmp_path / "kit.osm.pbf"), dem=[warmkit.write_dem(tmp_path)])
    out = build(inputs, tmp_path / "bundle", settings, progress=NullProgress())
    engine = Engine.open(out, settings=settings)
    for stage in ("graph", "elevation", "routing", "search", "tiles"):
        assert engine.bundle.has_stage(stage), stage
    a = {"lon": warmkit.LON0 + 0.1 * warmkit.STEP, "lat": warmkit.LAT0 + 1 * warmkit.STEP}
    b = {"lon": warmkit.LON0 + 6 * warmkit.STEP, "lat": warmkit.LAT0 + 6.05 * warmkit.STEP}
    best = engine.compute_route(locations=[a, b], costing="pedestrian").best
    # along the grid's streets: at least the Manhattan distance between the two junctions, and no detour
    from geoengine.geo import haversine_m

    dx = haversine_m(warmkit.LAT0, warmkit.LON0, warmkit.LAT0, warmkit.LON0 + 6 * warmkit.STEP)
    dy = haversine_m(warmkit.LAT0, warmkit.LON0, warmkit.LAT0 + 5 * warmkit.STEP, warmkit.LON0)
    assert 0.97 * (dx + dy) < best.length_m < 1.1 * (dx + dy)
    names = [r["name"] for r in engine.search("Kit Cafe")["results"]]
    assert "Kit Cafe" in names
    assert 1000 - 300 <= engine.elevation_at(lon=a["lon"], lat=a["lat"]) <= 1000 + 300


def test_background_compile_only_when_the_cache_lacks_the_kit(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    started = []

    class FakePopen:
        def __init__(self, cmd, **kw):
            started.append(cmd)

    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    logs = []
    assert not warmkit.is_warm()
    assert warmkit.start_in_background(logs.append) is not None
    assert started == [[sys.executable, "-m", "geoengine.bundler.warmkit"]]
    assert "background" in logs[0]
    warmkit.stamp_path().parent.mkdir(parents=True, exist_ok=True)
    warmkit.stamp_path().write_text("1\n")
    assert warmkit.is_warm()
    assert warmkit.start_in_background(logs.append) is None
    assert len(started) == 1


def test_a_second_kit_child_leaves_while_one_holds_the_lock(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    calls = []
    monkeypatch.setattr(warmkit, "build_and_warm", lambda log=None: calls.append(1))
    with open(tmp_path / "cache" / "kit.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert warmkit.main() == 0
    assert calls == []
    assert warmkit.main() == 0
    assert calls == [1]


@pytest.mark.parametrize("args", [["warm", "--help"]])
def test_warm_help_names_the_kit(args):
    out = subprocess.run([sys.executable, "-m", "geoengine", *args], capture_output=True, text=True, check=True)
    assert "--no-kit" in out.stdout and "compile kit" in out.stdout


def test_the_kit_update_patches_every_stage(tmp_path, settings):
    """`build_and_warm` updates the kit (`update_kit`) so that an update's kernels are compiled too: each
    stage's patch runs, none declines."""
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.engine import Engine
    from geoengine.progress import NullProgress
    from geoengine.tiles import stage as tiles_stage

    inputs = BuildInputs(osm=warmkit.write_extract(tmp_path / "kit.osm.pbf"), dem=[warmkit.write_dem(tmp_path)])
    out = build(inputs, tmp_path / "bundle", settings, progress=NullProgress())
    share = tiles_stage.PATCH_MAX_SHARE
    patched = warmkit.update_kit(out, tmp_path, settings)
    assert tiles_stage.PATCH_MAX_SHARE == share  # (restored)
    assert {"source", "graph", "routing", "search", "tiles"} <= set(patched), patched
    engine = Engine.open(out, settings=settings)
    assert "Kit Avenue" in [r["name"] for r in engine.search("Kit Avenue")["results"]]
