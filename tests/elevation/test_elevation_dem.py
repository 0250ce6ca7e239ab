"""DEM readers: HGT in every packaging and GeoTIFF, checked against the raw samples read here."""

from __future__ import annotations

import gzip
import zipfile

import numpy as np
import pytest
import tifffile

from geoengine.elevation.dem import VOID, read_dem
from geoengine.elevation.model import ElevationModel
from geoengine.errors import BuildError


def test_hgt_zip_matches_raw_samples(shared_data_dir, n42e001):
    tile = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    assert tile.name == "N42E001"
    assert (tile.rows, tile.cols) == (1201, 1201)
    assert (tile.north, tile.south, tile.west, tile.east) == (43.0, 42.0, 1.0, 2.0)
    assert tile.arc_seconds == 3.0
    assert tile.data.dtype == np.int16 and tile.data.dtype.byteorder in ("=", "<", "|")
    np.testing.assert_array_equal(tile.data, n42e001)
    assert tile.voids == int((n42e001 == VOID).sum())


def test_hgt_plain_and_gzip(tmp_path, shared_data_dir, n41e001):
    raw = zipfile.ZipFile(shared_data_dir / "andorra/N41E001.hgt.zip").read("N41E001.hgt")
    (tmp_path / "N41E001.hgt").write_bytes(raw)
    (tmp_path / "N41E001.hgt.gz").write_bytes(gzip.compress(raw))
    for name in ("N41E001.hgt", "N41E001.hgt.gz"):
        tile = read_dem(tmp_path / name)
        assert (tile.name, tile.south, tile.west) == ("N41E001", 41.0, 1.0)
        np.testing.assert_array_equal(tile.data, n41e001)


def test_one_arc_second_detected_from_size(tmp_path, n42e001):
    # A 3601 x 3601 grid made from the real SRTM3 samples (each repeated 3 times): only the size matters.
    big = np.repeat(np.repeat(n42e001, 3, axis=0), 3, axis=1)[:3601, :3601]
    (tmp_path / "S12W077.hgt").write_bytes(big.astype(">i2").tobytes())
    tile = read_dem(tmp_path / "S12W077.hgt")
    assert (tile.rows, tile.arc_seconds) == (3601, 1.0)
    assert (tile.north, tile.south, tile.west, tile.east) == (-11.0, -12.0, -77.0, -76.0)
    assert tile.step_lat == pytest.approx(1 / 3600)


def test_bad_hgt_files(tmp_path, n42e001):
    (tmp_path / "N42E001.hgt").write_bytes(n42e001.astype(">i2").tobytes()[:-2])
    with pytest.raises(BuildError, match="2,884,802"):
        read_dem(tmp_path / "N42E001.hgt")
    (tmp_path / "tile.hgt").write_bytes(n42e001.astype(">i2").tobytes())
    with pytest.raises(BuildError, match="N42E001.hgt"):
        read_dem(tmp_path / "tile.hgt")
    with zipfile.ZipFile(tmp_path / "N42E001.hgt.zip", "w") as zf:
        zf.writestr("readme.txt", "no tile here")
    with pytest.raises(BuildError, match="exactly one .hgt"):
        read_dem(tmp_path / "N42E001.hgt.zip")
    (tmp_path / "N42E001.hgt.gz").write_bytes(b"not gzip")
    with pytest.raises(BuildError, match="cannot read"):
        read_dem(tmp_path / "N42E001.hgt.gz")
    (tmp_path / "dem.asc").write_text("ncols 2")
    with pytest.raises(BuildError, match="neither"):
        read_dem(tmp_path / "dem.asc")


def _geokeys(raster_type: int, model_type: int = 2) -> tuple:
    # GeoKeyDirectory header (version 1, revision 1.0, 2 keys), then ModelType and RasterType
    return (1, 1, 0, 2, 1024, 0, 1, model_type, 1025, 0, 1, raster_type)


def write_geotiff(path, data, *, west, north, step, raster_type, nodata=None, model_type=2):
    """Write `data` as a GeoTIFF placed by tie point and pixel scale (tie point = first sample for
    PixelIsPoint, outer corner of the first pixel for PixelIsArea)."""
    tie_x, tie_y = (west, north) if raster_type == 2 else (west - step / 2, north + step / 2)
    tags = [
        (33550, "d", 3, (step, step, 0.0), False),
        (33922, "d", 6, (0.0, 0.0, 0.0, tie_x, tie_y, 0.0), False),
        (34735, "H", 12, _geokeys(raster_type, model_type), False),
    ]
    if nodata is not None:
        tags.append((42113, "s", 0, str(nodata), False))
    tifffile.imwrite(path, data, extratags=tags)


def test_geotiff_int16_pixel_is_point(tmp_path, n42e001):
    write_geotiff(tmp_path / "andorra.tif", n42e001.astype(np.int16), west=1.0, north=43.0, step=1 / 1200, raster_type=2)
    tile = read_dem(tmp_path / "andorra.tif")
    assert tile.north == pytest.approx(43.0) and tile.west == pytest.approx(1.0)
    assert tile.south == pytest.approx(42.0) and tile.east == pytest.approx(2.0)
    assert tile.arc_seconds == pytest.approx(3.0)
    np.testing.assert_array_equal(tile.data, n42e001)


def test_geotiff_float_pixel_is_area_with_nodata(tmp_path, shared_data_dir, n42e001):
    # The same real samples as float32 pixels centred on the HGT grid, voids as -9999 and NaN.
    data = n42e001.astype(np.float32)
    voids = n42e001 == VOID
    data[voids] = -9999.0
    data[0, 0] = np.nan
    write_geotiff(tmp_path / "andorra_f.tif", data, west=1.0, north=43.0, step=1 / 1200, raster_type=1, nodata=-9999)
    tile = read_dem(tmp_path / "andorra_f.tif")
    assert tile.north == pytest.approx(43.0) and tile.west == pytest.approx(1.0)
    expected = n42e001.copy()
    expected[0, 0] = VOID
    np.testing.assert_array_equal(tile.data, expected)
    # sampling the GeoTIFF equals sampling the HGT tile
    hgt = ElevationModel.from_tiles([read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")])
    tif = ElevationModel.from_tiles([tile])
    rng = np.random.default_rng(7)
    lats, lons = rng.uniform(42.01, 42.99, 5000), rng.uniform(1.01, 1.99, 5000)
    a, b = hgt.sample(lats, lons)[0], tif.sample(lats, lons)[0]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6, equal_nan=True)


def test_bad_geotiffs(tmp_path, n42e001):
    part = n42e001[:100, :100].astype(np.int16)
    write_geotiff(tmp_path / "utm.tif", part, west=400000.0, north=4700000.0, step=90.0, raster_type=1, model_type=1)
    with pytest.raises(BuildError, match="projected"):
        read_dem(tmp_path / "utm.tif")
    tifffile.imwrite(tmp_path / "plain.tif", part)
    with pytest.raises(BuildError, match="ModelPixelScale"):
        read_dem(tmp_path / "plain.tif")
    tifffile.imwrite(tmp_path / "rgb.tif", np.stack([part, part, part], axis=-1).astype(np.uint8),
                     extratags=[(33550, "d", 3, (1.0, 1.0, 0.0), False), (33922, "d", 6, (0, 0, 0, 1.0, 43.0, 0), False)])
    with pytest.raises(BuildError, match="single-band"):
        read_dem(tmp_path / "rgb.tif")
    (tmp_path / "broken.tif").write_bytes(b"II*\x00garbage")
    with pytest.raises(BuildError, match="cannot read GeoTIFF"):
        read_dem(tmp_path / "broken.tif")
