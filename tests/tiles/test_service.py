"""engine.tiles: sources (MBTiles and PMTiles), validation, the byte-budget cache."""

from __future__ import annotations

import shutil

import pytest

import geoengine
from geoengine.config import Settings
from geoengine.errors import InvalidRequest, NotFound
from geoengine.tiles.service import TileService
from geoengine.tiles.sources import discover

from .tiles_helpers import ANDORRA_LA_VELLA, decode, lonlat_tile


def test_get_returns_stored_gzip_bytes(andorra, andorra_source):
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 13)
    data = andorra.tiles.get(andorra_source, 13, x, y)
    assert data[:2] == b"\x1f\x8b"
    assert "roads" in decode(data)


def test_valid_coordinate_without_tile_is_none(andorra, andorra_source):
    assert andorra.tiles.get(andorra_source, 14, 0, 0) is None
    assert andorra.tiles.get(andorra_source, 18, 132184, 96806) is None  # beyond maxzoom: clients overzoom


@pytest.mark.parametrize(("z", "x", "y", "field"), [
    (23, 0, 0, "z"), (-1, 0, 0, "z"), (2, 4, 0, "x"), (2, 0, 4, "y"), (0, -1, 0, "x"), (3, 0, -2, "y"),
])
def test_bad_coordinates(andorra, andorra_source, z, x, y, field):
    with pytest.raises(InvalidRequest) as exc:
        andorra.tiles.get(andorra_source, z, x, y)
    assert [e.field for e in exc.value.errors] == [field]


def test_unknown_source(andorra):
    with pytest.raises(NotFound):
        andorra.tiles.get("nowhere", 0, 0, 0)
    with pytest.raises(NotFound):
        andorra.tiles.clear("nowhere")
    with pytest.raises(NotFound):
        andorra.tiles.tilejson("nowhere", "http://h")


def test_cache_hits_and_clear(andorra, andorra_source):
    tiles = andorra.tiles
    tiles.clear(andorra_source)
    assert len(tiles.cache) == 0
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 12)
    hits = tiles.cache.hits
    a = tiles.get(andorra_source, 12, x, y)
    b = tiles.get(andorra_source, 12, x, y)
    tiles.get(andorra_source, 14, 0, 0)  # empty coordinates are cached too
    assert a == b and tiles.cache.hits == hits + 1
    assert len(tiles.cache) == 2 and tiles.cache.bytes >= len(a)
    assert tiles.clear(andorra_source) == 2
    assert tiles.clear(andorra_source) == 0
    assert len(tiles.cache) == 0 and tiles.cache.bytes == 0


def test_cache_respects_byte_budget(andorra):
    src = discover([andorra.path / "tiles"])
    x0, y0, x1, y1 = 8250, 6040, 8270, 6060
    sizes = []
    for x in range(x0, x1):
        d = src["andorra"].get(14, x, 6050)
        if d:
            sizes.append(len(d))
    budget = sum(sizes) // 3
    service = TileService(src, budget)
    for x in range(x0, x1):
        for y in range(y0, y1):
            service.get("andorra", 14, x, y)
    assert 0 < service.cache.bytes <= budget
    # Least recently used go first: the last tile read is still cached, the first is not.
    assert ("andorra", 14, x1 - 1, y1 - 1) in service.cache._d
    assert ("andorra", 14, x0, y0) not in service.cache._d
    off = TileService(src, 0)
    off.get("andorra", 14, x0, y0)
    assert len(off.cache) == 0


def test_pmtiles_and_extra_folder(andorra, tmp_path, settings):
    from pmtiles.convert import mbtiles_to_pmtiles

    extra = tmp_path / "extra"
    extra.mkdir()
    mbtiles_to_pmtiles(str(andorra.path / "tiles" / "andorra.mbtiles"), str(extra / "andorra_pm.pmtiles"), 14)
    shutil.copy(andorra.path / "tiles" / "andorra.mbtiles", extra / "copy.mbtiles")
    (extra / "andorra.mbtiles").write_bytes(b"")  # shadowed by the bundle's source of that id
    (extra / "notes.txt").write_text("not an archive")
    s = Settings(home=settings.home, tiles_dir=extra, gateway_host=settings.gateway_host)
    eng = geoengine.open(andorra.path, settings=s)
    ids = [src.id for src in eng.tiles.sources()]
    assert ids == ["andorra", "andorra_pm", "copy"]
    pm = eng.tiles.source("andorra_pm").info
    mb = eng.tiles.source("andorra").info
    assert (pm.minzoom, pm.maxzoom, pm.format) == (0, 14, "pbf")
    assert pm.bounds == pytest.approx(mb.bounds, abs=1e-6)
    assert [lay["id"] for lay in pm.vector_layers] == [lay["id"] for lay in mb.vector_layers]
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 14)
    assert eng.tiles.get("andorra_pm", 14, x, y) == eng.tiles.get("andorra", 14, x, y) == eng.tiles.get("copy", 14, x, y)
    assert eng.tiles.get("andorra_pm", 14, 0, 0) is None


def test_tilejson_document(andorra, andorra_source):
    doc = andorra.tiles.tilejson(andorra_source, "https://maps.example.org/api/")
    assert doc["tilejson"] == "3.0.0" and doc["scheme"] == "xyz" and doc["format"] == "pbf"
    assert doc["tiles"] == ["https://maps.example.org/api/tiles/andorra/{z}/{x}/{y}"]
    assert doc["attribution"] == "© OpenStreetMap contributors"
    assert len(doc["bounds"]) == 4 and len(doc["center"]) == 3
    assert doc["minzoom"] == 0 and doc["maxzoom"] == 14
    assert len(doc["vector_layers"]) == 10
