"""The `elevation` build stage: what lands in the bundle, and which tiles are kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

import geoengine
from geoengine.elevation.dem import VOID, DemTile, read_dem
from geoengine.elevation.model import ElevationModel
from geoengine.elevation.stage import MARGIN_DEG, select_tiles

ANDORRA_BBOX = (1.4221, 42.4351, 1.7804, 42.6572)


def test_andorra_bundle_holds_both_tiles(andorra, n42e001, n41e001):
    stage = andorra.bundle.stages["elevation"]
    counts = {k: v for k, v in stage["counts"].items() if not k.endswith("_segments")}  # grades: test_grades.py
    assert counts == {
        "tiles": 2,
        "samples": 2 * 1201 * 1201,
        "voids": int((n42e001 == VOID).sum() + (n41e001 == VOID).sum()),
    }
    index = json.loads((andorra.path / "elevation/index.json").read_text())
    by_name = {t["name"]: t for t in index["tiles"]}
    assert set(by_name) == {"N42E001", "N41E001"}
    t = by_name["N41E001"]
    assert (t["south"], t["north"], t["west"], t["east"]) == (41.0, 42.0, 1.0, 2.0)
    assert (t["rows"], t["cols"], t["arc_seconds"]) == (1201, 1201, 3.0)
    assert t["voids"] == int((n41e001 == VOID).sum())
    samples = np.load(andorra.path / "elevation/samples.npy", mmap_mode="r")
    assert isinstance(samples, np.memmap) and samples.dtype == np.int16 and samples.size == 2 * 1201 * 1201
    for name, raw in (("N42E001", n42e001), ("N41E001", n41e001)):
        start = by_name[name]["offset"]
        np.testing.assert_array_equal(samples[start : start + 1201 * 1201].reshape(1201, 1201), raw)
    for rel in stage["outputs"]:
        assert (andorra.path / rel).exists()


def test_engine_maps_tiles_instead_of_reading_them(andorra):
    andorra.elevation(lat=[42.5], lon=[1.5])
    samples = andorra._elevation._samples
    assert not samples.flags.writeable and not samples.flags.owndata  # a read-only view of the mapped file


def test_monaco_voids_recorded(monaco):
    stage = monaco.bundle.stages["elevation"]
    assert stage["counts"]["voids"] == 1595
    assert stage["info"]["tiles"] == ["N43E007"]


def test_region_without_dem_builds_without_the_stage(liechtenstein):
    assert "elevation" not in liechtenstein.bundle.stages
    assert "source" in liechtenstein.bundle.stages


def test_select_tiles_keeps_what_meets_the_grown_bbox(shared_data_dir):
    n42 = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    n41 = read_dem(shared_data_dir / "andorra/N41E001.hgt.zip")
    n43e7 = read_dem(shared_data_dir / "monaco/N43E007.hgt.zip")
    kept, skipped = select_tiles([n42, n41, n43e7, n42], ANDORRA_BBOX)
    # N41E001 is 0.44 degrees south of the header bbox, within the margin
    assert ANDORRA_BBOX[1] - 42.0 < MARGIN_DEG
    assert [t.name for t in kept] == ["N42E001", "N41E001"]
    assert kept[0] is n42  # HGT tiles are stored whole
    assert any("N43E007" in s and "outside" in s for s in skipped)
    assert any("same tile" in s for s in skipped)
    kept, _ = select_tiles([n42, n41], None)  # no bbox known: keep everything
    assert len(kept) == 2


def test_big_raster_is_cropped_to_the_grown_bbox(shared_data_dir):
    n42 = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    n42.source = "N42E001.tif"  # the same real samples, as if they came from a GeoTIFF
    bbox = (1.80, 42.80, 1.85, 42.85)  # grown by the margin: 1.30..2.35, 42.30..43.35
    (kept,), _ = select_tiles([n42], bbox)
    assert kept.rows < 1201 and kept.cols < 1201
    assert kept.south <= bbox[1] - MARGIN_DEG < kept.south + 2 * kept.step_lat  # at most one spare row
    assert kept.west <= bbox[0] - MARGIN_DEG < kept.west + 2 * kept.step_lon
    assert (kept.north, kept.east) == (43.0, 2.0)
    whole, cropped = ElevationModel.from_tiles([n42]), ElevationModel.from_tiles([kept])
    rng = np.random.default_rng(5)
    lats = rng.uniform(kept.south, kept.north, 2000)
    lons = rng.uniform(kept.west, kept.east, 2000)
    np.testing.assert_allclose(whole.sample(lats, lons)[0], cropped.sample(lats, lons)[0], atol=1e-9, equal_nan=True)


def test_crop_keeps_samples_around_window_edges(shared_data_dir):
    n42 = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    window = (1.2001, 42.3001, 1.6003, 42.7003)
    part = n42.crop(window)
    assert part.north >= window[3] and part.south <= window[1]
    assert part.west <= window[0] and part.east >= window[2]


def test_same_named_rasters_of_different_places_are_both_kept(shared_data_dir):
    """Two GeoTIFFs both called dem.tif (from different folders) hold different places."""
    n42 = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    halves = [
        DemTile(name="dem", data=np.ascontiguousarray(n42.data[r0:r1]), north=43.0 - r0 / 1200, west=1.0,
                step_lat=n42.step_lat, step_lon=n42.step_lon, source="dem.tif")
        for r0, r1 in ((0, 601), (600, 1201))
    ]
    kept, skipped = select_tiles(halves + [halves[0]], ANDORRA_BBOX)
    assert [t.name for t in kept] == ["dem", "dem-2"]
    assert len(skipped) == 1 and "same tile" in skipped[0]
    both = ElevationModel.from_tiles(kept)
    whole = ElevationModel.from_tiles([n42])
    rng = np.random.default_rng(11)
    lats, lons = rng.uniform(42.01, 42.99, 3000), rng.uniform(1.01, 1.99, 3000)
    np.testing.assert_allclose(both.sample(lats, lons)[0], whole.sample(lats, lons)[0], atol=1e-9, equal_nan=True)


def test_build_with_a_geotiff_dem(tmp_path, settings, shared_data_dir, n42e001, bilinear):
    """The pipeline with a GeoTIFF input: the real N42E001 samples written as float32 GeoTIFF pixels."""
    import tifffile

    from geoengine.bundler.pipeline import BuildInputs, build

    tif = tmp_path / "andorra-dem.tif"
    step = 1 / 1200
    tifffile.imwrite(tif, n42e001.astype(np.float32), extratags=[
        (33550, "d", 3, (step, step, 0.0), False),
        (33922, "d", 6, (0.0, 0.0, 0.0, 1.0 - step / 2, 43.0 + step / 2, 0.0), False),  # PixelIsArea corner
        (42113, "s", 0, "-32768", False),
    ])
    inputs = BuildInputs(osm=shared_data_dir / "andorra/andorra.osm.pbf", dem=[tif])
    engine = geoengine.open(build(inputs, tmp_path / "bundle", settings), settings=settings)
    stage = engine.bundle.stages["elevation"]
    assert stage["info"]["tiles"] == ["andorra-dem"]
    assert stage["counts"]["voids"] == int((n42e001 == VOID).sum())
    lat, lon = 42.5063, 1.5218
    assert engine.elevation_at(lat=lat, lon=lon) == pytest.approx(bilinear(n42e001, 42, 1, lat, lon), abs=1e-6)


def test_build_with_dem_files_that_miss_the_extract(tmp_path, settings, shared_data_dir):
    from geoengine.bundler.pipeline import BuildInputs, build
    from geoengine.errors import OutsideCoverage

    inputs = BuildInputs(osm=shared_data_dir / "andorra/andorra.osm.pbf", dem=[shared_data_dir / "monaco/N43E007.hgt.zip"])
    engine = geoengine.open(build(inputs, tmp_path / "bundle", settings), settings=settings)
    stage = engine.bundle.stages["elevation"]
    assert stage["counts"]["tiles"] == 0 and "N43E007.hgt.zip (outside the extract)" in stage["info"]["skipped"]
    with pytest.raises(OutsideCoverage, match="none of which meets the extract"):
        engine.elevation_at(lat=42.5, lon=1.5)
    assert np.isnan(engine.elevation(lat=[42.5], lon=[1.5])).all()

