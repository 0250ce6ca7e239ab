"""Sampling on the real Andorra and Monaco DEMs, checked against the raw samples and hand bilinear."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoengine.elevation.dem import VOID, DemTile, read_dem
from geoengine.elevation.model import ElevationModel
from geoengine.errors import InvalidRequest, OutsideCoverage
from geoengine.geo import encode_polyline

# (name, lat, lon, plausible SRTM height range in metres)
PLACES = [
    ("Andorra la Vella", 42.5063, 1.5218, (1000, 1100)),
    ("Encamp", 42.5345, 1.5803, (1200, 1350)),
    ("Sant Julia de Loria", 42.4637, 1.4913, (850, 1000)),
    ("Pas de la Casa", 42.5426, 1.7333, (2000, 2200)),
    ("Coma Pedrosa summit", 42.59167, 1.44333, (2850, 2950)),
]


@pytest.mark.parametrize(("name", "lat", "lon", "plausible"), PLACES, ids=[p[0] for p in PLACES])
def test_known_places_match_hand_bilinear(andorra, n42e001, bilinear, name, lat, lon, plausible):
    expected = bilinear(n42e001, 42, 1, lat, lon)
    got = andorra.elevation(lat=np.array([lat]), lon=np.array([lon]))
    assert got.dtype == np.float64 and got.shape == (1,)
    assert got[0] == pytest.approx(expected, abs=1e-6)
    assert plausible[0] <= got[0] <= plausible[1]
    assert andorra.elevation_at(lat=lat, lon=lon) == pytest.approx(expected, abs=1e-6)


def test_many_points_at_once_match_hand_bilinear(andorra, n42e001, bilinear):
    rng = np.random.default_rng(42)
    lats = rng.uniform(42.43, 42.66, 300)
    lons = rng.uniform(1.42, 1.78, 300)
    got = andorra.elevation(lat=lats, lon=lons)
    expected = np.array([bilinear(n42e001, 42, 1, la, lo) for la, lo in zip(lats, lons, strict=True)], dtype=float)
    clear = np.isfinite(expected)  # cells without voids
    assert clear.sum() > 280
    np.testing.assert_allclose(got[clear], expected[clear], atol=1e-6)
    # shape follows the input
    assert andorra.elevation(lat=lats.reshape(20, 15), lon=lons.reshape(20, 15)).shape == (20, 15)


def test_grid_nodes_return_the_raw_sample(andorra, n42e001):
    rows = np.array([0, 1, 333, 700, 1200, 1200])
    cols = np.array([0, 1200, 517, 600, 0, 1200])
    ok = n42e001[rows, cols] != VOID
    rows, cols = rows[ok], cols[ok]
    got = andorra.elevation(lat=43 - rows / 1200, lon=1 + cols / 1200)
    np.testing.assert_allclose(got, n42e001[rows, cols], atol=1e-6)


def test_polyline_across_the_n41_n42_boundary(andorra, n41e001, n42e001, bilinear):
    # southwards along lon 1.5123 from 42.02 to 41.98, crossing latitude 42.0 (the tiles' shared row)
    lats = np.linspace(42.02, 41.98, 97)
    lons = np.full(lats.size, 1.5123)
    got = andorra.elevation(lat=lats, lon=lons)
    assert np.all(np.isfinite(got))
    for lat, h in zip(lats, got, strict=True):
        tile, south = (n42e001, 42) if lat >= 42.0 else (n41e001, 41)
        assert h == pytest.approx(bilinear(tile, south, 1, lat, 1.5123), abs=1e-6)
    # continuity at the edge: from both sides the value tends to the one on the shared row
    eps = 1e-9
    above, on, below = andorra.elevation(lat=np.array([42.0 + eps, 42.0, 42.0 - eps]), lon=np.full(3, 1.5123))
    assert above == pytest.approx(on, abs=1e-3) and below == pytest.approx(on, abs=1e-3)
    assert on == pytest.approx(bilinear(n41e001, 41, 1, 41.0 + 1 - 1e-12, 1.5123), abs=1e-3)
    # consecutive samples differ no more than the steepest grid step they span
    steps = np.abs(np.diff(got))
    col = int((1.5123 - 1) * 1200)
    band = np.vstack([n42e001[1190:, col : col + 2], n41e001[1:12, col : col + 2]]).astype(float)
    assert steps.max() <= np.abs(np.diff(band, axis=0)).max() + 1e-6
    # the same polyline through the profile helper, as coordinates and as a precision-6 polyline
    prof = andorra.elevation_profile(lats=lats, lons=lons)
    np.testing.assert_allclose(prof.heights, got)
    enc = andorra.elevation_profile(encoded_polyline=encode_polyline(lats, lons, 6))
    np.testing.assert_allclose(enc.heights, andorra.elevation(lat=np.round(lats, 6), lon=np.round(lons, 6)))
    assert prof.distances[0] == 0.0 and np.all(np.diff(prof.distances) > 0)
    assert prof.distances[-1] == pytest.approx(0.04 * math.pi / 180 * 6_371_008.8, rel=1e-9)


def _tile_part(tile: DemTile, r0, r1, c0, c1) -> DemTile:
    return DemTile(
        name=f"{tile.name}-{r0}-{c0}",
        data=np.ascontiguousarray(tile.data[r0:r1, c0:c1]),
        north=tile.north - r0 * tile.step_lat,
        west=tile.west + c0 * tile.step_lon,
        step_lat=tile.step_lat,
        step_lon=tile.step_lon,
        source="part.tif",
    )


@pytest.fixture(scope="module")
def whole_and_split(shared_data_dir):
    """The real N42E001 tile whole, and cut into four tiles that do NOT repeat their edges (like
    GeoTIFF tiles): points between two parts' edge samples need samples of both."""
    tile = read_dem(shared_data_dir / "andorra/N42E001.hgt.zip")
    parts = [_tile_part(tile, 0, 600, 0, 700), _tile_part(tile, 600, 1201, 0, 700),
             _tile_part(tile, 0, 600, 700, 1201), _tile_part(tile, 600, 1201, 700, 1201)]
    return ElevationModel.from_tiles([tile]), ElevationModel.from_tiles(parts)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1200), st.floats(0, 1200)), min_size=1, max_size=50))
def test_tiles_without_shared_edges_are_seamless(whole_and_split, rc):
    whole, split = whole_and_split
    rc = np.array(rc)
    # include the seams: between rows 599 and 600 and between columns 699 and 700
    # and where the seams meet the outer edges (once NaN in the split model only: rc=(599.5, 1200.0), found by hypothesis)
    rc = np.vstack([rc, [[599.5, 10.25], [300.5, 699.75], [599.25, 699.5], [599.0, 700.0],
                         [599.5, 1200.0], [599.5, 0.0], [1200.0, 699.5], [0.0, 699.5], [1200.0, 1200.0]]])
    lats, lons = 43 - rc[:, 0] / 1200, 1 + rc[:, 1] / 1200
    a, sa = whole.sample(lats, lons)
    b, sb = split.sample(lats, lons)
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_allclose(a, b, atol=1e-6, equal_nan=True)


def test_outside_coverage(andorra):
    lats = np.array([45.0, 42.5, 40.9, 42.5, np.nan])
    lons = np.array([1.5, 2.5, 1.5, 0.99, 1.5])
    assert np.isnan(andorra.elevation(lat=lats, lon=lons)).all()
    with pytest.raises(OutsideCoverage, match=r"outside the elevation coverage.*N42E001"):
        andorra.elevation_at(lat=45.0, lon=1.5)
    with pytest.raises(InvalidRequest) as err:
        andorra.elevation_at(lat=91.0, lon=1.5)
    assert err.value.errors[0].field == "lat"


def test_bundle_without_dem(liechtenstein):
    assert not liechtenstein.bundle.has_stage("elevation")
    assert np.isnan(liechtenstein.elevation(lat=np.array([47.14]), lon=np.array([9.52]))).all()
    with pytest.raises(OutsideCoverage, match="without a DEM"):
        liechtenstein.elevation_at(lat=47.14, lon=9.52)
    with pytest.raises(OutsideCoverage, match="without a DEM"):
        liechtenstein.elevation_profile(lats=[47.14], lons=[9.52])


# -- voids: the Monaco tile N43E007 has 1,595 of them --------------------------------------------------


def _cell_point(r0, c0, fr, fc):
    return 44 - (r0 + fr) / 1200, 7 + (c0 + fc) / 1200


def test_monaco_void_count(n43e007):
    assert int((n43e007 == VOID).sum()) == 1595


def test_cell_with_one_void_corner_renormalises(monaco, n43e007):
    v = n43e007 == VOID
    corners = np.stack([v[:-1, :-1], v[:-1, 1:], v[1:, :-1], v[1:, 1:]])
    one_nw = corners[0] & ~corners[1] & ~corners[2] & ~corners[3]
    r0, c0 = map(int, np.argwhere(one_nw)[0])
    ne, sw, se = (float(n43e007[r0, c0 + 1]), float(n43e007[r0 + 1, c0]), float(n43e007[r0 + 1, c0 + 1]))
    # at the cell centre the three valid corners weigh equally
    lat, lon = _cell_point(r0, c0, 0.5, 0.5)
    assert monaco.elevation_at(lat=lat, lon=lon) == pytest.approx((ne + sw + se) / 3, abs=1e-6)
    # at (0.25, 0.75): bilinear weights of NE, SW, SE are 0.5625, 0.0625, 0.1875, renormalised
    lat, lon = _cell_point(r0, c0, 0.25, 0.75)
    w = {"ne": 0.75 * 0.75, "sw": 0.25 * 0.25, "se": 0.25 * 0.75}
    expected = (w["ne"] * ne + w["sw"] * sw + w["se"] * se) / sum(w.values())
    assert monaco.elevation_at(lat=lat, lon=lon) == pytest.approx(expected, abs=1e-6)
    # exactly on the void sample: the mean of the valid samples of its cell
    lat, lon = _cell_point(r0, c0, 0.0, 0.0)
    assert monaco.elevation_at(lat=lat, lon=lon) == pytest.approx((ne + sw + se) / 3, abs=1e-6)


def test_cell_of_four_voids_has_no_height(monaco, n43e007):
    v = n43e007 == VOID
    all4 = v[:-1, :-1] & v[:-1, 1:] & v[1:, :-1] & v[1:, 1:]
    r0, c0 = map(int, np.argwhere(all4)[0])
    lat, lon = _cell_point(r0, c0, 0.3, 0.6)
    assert np.isnan(monaco.elevation(lat=np.array([lat]), lon=np.array([lon]))[0])
    with pytest.raises(OutsideCoverage, match="voids"):
        monaco.elevation_at(lat=lat, lon=lon)
    prof = monaco.elevation_profile(lats=[lat, 43.73], lons=[lon, 7.42])
    assert np.isnan(prof.heights[0]) and prof.status[0] == 1 and np.isfinite(prof.heights[1])


def test_voids_never_count_as_heights(monaco, n43e007):
    """Every cell touching a void, sampled at random inside: the height lies between the smallest
    and largest valid corner, or is NaN when no corner is valid."""
    v = n43e007 == VOID
    touch = v[:-1, :-1] | v[:-1, 1:] | v[1:, :-1] | v[1:, 1:]
    cells = np.argwhere(touch)
    rng = np.random.default_rng(3)
    fr, fc = rng.uniform(0, 1, len(cells)), rng.uniform(0, 1, len(cells))
    lat, lon = _cell_point(cells[:, 0], cells[:, 1], fr, fc)
    got = monaco.elevation(lat=lat, lon=lon)
    corners = np.stack(
        [n43e007[cells[:, 0] + dr, cells[:, 1] + dc] for dr, dc in ((0, 0), (0, 1), (1, 0), (1, 1))], axis=1
    ).astype(float)
    corners[corners == VOID] = np.nan
    all_void = np.isnan(corners).all(axis=1)
    assert np.isnan(got[all_void]).all()
    lo, hi = np.nanmin(corners[~all_void], axis=1), np.nanmax(corners[~all_void], axis=1)
    assert np.all((got[~all_void] >= lo - 1e-9) & (got[~all_void] <= hi + 1e-9))
    assert len(cells) > 1595  # every void touches at least one cell


# -- profile validation ------------------------------------------------------------------------------


def test_profile_validation(andorra):
    with pytest.raises(InvalidRequest, match="exactly one"):
        andorra.elevation_profile()
    with pytest.raises(InvalidRequest, match="not both"):
        andorra.elevation_profile(lats=[42.5], lons=[1.5], encoded_polyline="??")
    with pytest.raises(InvalidRequest, match="at least one point"):
        andorra.elevation_profile(lats=[], lons=[])
    with pytest.raises(InvalidRequest) as err:
        andorra.elevation_profile(lats=[42.5, 42.6, 100.0], lons=[1.5, 1.5, 1.5])
    assert err.value.errors[0].field == "shape[2].lat"
    with pytest.raises(InvalidRequest, match="at most 3 points"):
        andorra.elevation_profile(lats=[42.5] * 4, lons=[1.5] * 4, max_points=3)
    assert len(andorra.elevation_profile(lats=[42.5] * 3, lons=[1.5] * 3, max_points=3)) == 3
    many = encode_polyline(np.full(2001, 42.5), np.full(2001, 1.5))
    with pytest.raises(InvalidRequest, match="at most 2000 points"):
        andorra.elevation_profile(encoded_polyline=many)
