"""The country of a point no country boundary of the extract covers: Nominatim's country grid
(geoengine/search/countries.py, data/search/country_grid.bin). Nominatim's rule (get_country_code): the
smallest grid polygon that covers the point, its edge included; none outside the grid."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import shapely

from geoengine.search.countries import CountryGrid, country_grid
from tests.conftest import data_file

ROOT = Path(__file__).resolve().parents[2]


def _encode(rows) -> bytes:
    """The vendor script's encoding of (code, area, polygon) rows."""
    spec = importlib.util.spec_from_file_location("country_grid_generate", ROOT / "vendor" / "country-grid" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.encode([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], "test")


def test_smallest_covering_polygon_wins_edges_count_and_the_sea_is_none(tmp_path):
    big = shapely.box(0.0, 0.0, 2.0, 2.0)
    small = shapely.Polygon([(0.5, 0.5), (1.5, 0.5), (1.5, 1.5), (0.5, 1.5)], [[(0.9, 0.9), (1.1, 0.9), (1.1, 1.1), (0.9, 1.1)]])
    parts = shapely.MultiPolygon([shapely.box(3.0, 0.0, 3.5, 0.5), shapely.box(4.0, 0.0, 4.5, 0.5)])
    path = tmp_path / "grid.bin"
    path.write_bytes(_encode([("fr", big.area, big), ("ad", small.area, small), ("es", 0.5, parts)]))
    grid = CountryGrid(path)
    assert len(grid) == 4  # the multipolygon's two parts are two polygons of one code and area
    # a code excluded (a country whose own polygon the extract holds) is never given: the next covering one
    assert grid.codes([0.7, 3.2], [0.7, 0.2], exclude={"AD", "ES"}).tolist() == ["FR", None]
    lon = [1.0, 0.7, 0.5, 1.0, 0.2, 3.2, 4.5, 2.5, -1.0]
    lat = [1.0, 0.7, 1.0, 0.9, 0.2, 0.2, 0.25, 0.2, -1.0]
    # the hole of the small one is the big one's; its edge (x 0.5) and the hole's edge are the small one's
    assert grid.codes(lon, lat).tolist() == ["FR", "AD", "AD", "AD", "FR", "ES", "ES", None, None]
    assert grid.codes([], []).tolist() == []


def test_the_committed_grid_decodes_to_valid_polygons():
    grid = country_grid()
    assert "ODbL" in grid.source and len(grid) > 10_000
    assert len(set(grid.cc.tolist())) > 200 and all(len(c) == 2 and c.isupper() for c in set(grid.cc.tolist()))
    sample = np.random.default_rng(26).choice(len(grid), 200, replace=False)
    polys = [grid.polygon(int(p)) for p in sample]
    assert all(p.is_valid and p.area > 0 for p in polys)
    # the box of each polygon is its own
    assert np.allclose(np.asarray([p.bounds for p in polys]), grid.box[sample])


def test_capitals_lie_in_their_country():
    """GeoNames' capitals (PPLC, an oracle apart from OSM) lie in the grid polygon of their own country. The
    grid has OSM's countries: a territory GeoNames codes apart (AS, AW, AX, BL, ...) is part of its state there,
    so the capitals compared are those of the codes the grid has."""
    from geoengine.search.geonames import read_places

    grid = country_grid()
    places = read_places(data_file("world/geonames-cities500.txt.gz"))
    want = np.asarray(places.country, dtype=object)
    cap = np.asarray([f == "PPLC" for f in places.fcode]) & np.isin(want, list(set(grid.cc.tolist())))
    got = grid.codes(places.lon[cap], places.lat[cap])
    same = (got == want[cap]).mean()
    assert cap.sum() > 180 and same > 0.97, (same, [(w, g) for w, g in zip(want[cap], got, strict=True) if w != g])


@pytest.mark.parametrize("which", ["andorra"])
def test_a_boundary_lies_in_one_country(which, request):
    """Andorra's extract holds none of its three countries whole (no admin_level 2 relation assembles), so
    every country comes from the grid or from the boundary around the point: every address and POI strictly
    inside one assembled boundary (shapely, the oracle's assembly) has that boundary's one country, and the
    border lakes and peaks outside Andorra's parishes are French or Spanish, as Nominatim's grid has them."""
    from tests.search.test_search_addresses import Extract

    ix = request.getfixturevalue("andorra").search_index
    extract = Extract(data_file("andorra/andorra.osm.pbf"))
    assert not any(level == 2 for level, _, _ in extract.admin)
    rows = [i for i in range(ix.n) if ix.cols["index"][i] in ("addresses", "pois")]
    lon = np.asarray([float(ix.lon[r]) for r in rows])
    lat = np.asarray([float(ix.lat[r]) for r in rows])
    cc = np.asarray([ix.address(r).get("country_code") for r in rows], dtype=object)
    assert (cc != None).all()  # noqa: E711
    checked = 0
    for _level, tags, geom in extract.admin:
        inside = shapely.contains_xy(geom, lon, lat)
        if inside.sum() >= 2:
            assert len(set(cc[inside].tolist())) == 1, (tags.get("name"), set(cc[inside].tolist()))
            checked += 1
    assert checked >= 6  # the parishes (Canillo's does not assemble: two of its ways are missing)
    outside = ~np.any([shapely.intersects_xy(g, lon, lat) for lv, _, g in extract.admin if lv == 7], axis=0)
    assert {"ad", "fr", "es"} <= set(cc[outside].tolist())
    assert (cc == "ad").mean() > 0.8


def test_a_build_without_the_grid_takes_geonames_and_says_so(monkeypatch, caplog):
    """The grid is derived at setup (./dev setup), not committed: a build where it is missing still gives
    Andorra's clipped extract countries (GeoNames' nearest place) and logs what it lacked."""
    from geoengine.search import countries
    from geoengine.search.documents import build_documents

    def missing():
        raise FileNotFoundError("data/search/country_grid.bin not found next to the geoengine package")

    monkeypatch.setattr(countries, "grid_path", missing)
    ds, info = build_documents(data_file("andorra/andorra.osm.pbf"), data_file("world/geonames-cities500.txt.gz"))
    assert info["countries_from_grid"] == "no data/search/country_grid.bin"
    assert "country_grid.bin is missing" in caplog.text
    assert sum(c is not None for c in ds.country) > 0.9 * len(ds.country)


def test_the_cached_grid_is_the_grid(tmp_path, monkeypatch):
    """country_grid() keeps the decompressed arrays in the cache folder after the first read and reads them
    from there: the same arrays, the same answers (a stale or broken cache file is read again from the
    xz file)."""
    from geoengine.search import countries

    monkeypatch.setenv("GEOENGINE_CACHE", str(tmp_path / "cache"))
    want = CountryGrid(countries.grid_path())
    first = country_grid()
    cache = countries._cache_path(countries.grid_path())
    assert cache is not None and cache.exists() and cache.parent.parent == tmp_path / "cache"
    second = country_grid()
    for got in (first, second):
        assert got.source == want.source and got.cc.dtype == want.cc.dtype and got.cc.tolist() == want.cc.tolist()
        for k in ("area", "poly_rings", "ring_ends", "xy", "box"):
            assert getattr(got, k).dtype == getattr(want, k).dtype and np.array_equal(getattr(got, k), getattr(want, k)), k
    rng = np.random.default_rng(7)
    lon, lat = rng.uniform(-10, 30, 5000), rng.uniform(35, 60, 5000)
    assert (second.codes(lon, lat) == want.codes(lon, lat)).all()
    cache.write_bytes(b"not a zip")
    assert country_grid().cc.tolist() == want.cc.tolist()
