"""The tiles build stage on the real Andorra extract (and the clipped Helsinki extract)."""

from __future__ import annotations

import json
import sqlite3

import pytest
import shapely

from geoengine.tiles import schema
from geoengine.tiles.features import collect
from geoengine.tiles.tiler import BUFFER, EXTENT, cut_tiles, tile_bounds, tile_range

from .tiles_helpers import ANDORRA_LA_VELLA, decode, lonlat_tile

# Kinds the @protomaps/basemaps 5.7 style filters on in the roads layer (src/base_layers.ts).
STYLE_ROAD_KINDS = {"highway", "major_road", "minor_road", "path", "other", "rail", "aeroway"}


@pytest.fixture(scope="module")
def mbtiles(andorra):
    path = andorra.path / "tiles" / "andorra.mbtiles"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    yield db
    db.close()


def _tile(db, z, x, y):
    row = db.execute("SELECT tile_data FROM tiles WHERE zoom_level=? AND tile_column=? AND tile_row=?",
                     (z, x, (1 << z) - 1 - y)).fetchone()
    return None if row is None else bytes(row[0])


def test_manifest_records_the_stage(andorra):
    st = andorra.bundle.stages["tiles"]
    assert st["outputs"] == ["tiles/andorra.mbtiles"]
    assert st["counts"]["tiles"] > 300
    assert st["counts"]["features_roads"] > 1000


def test_metadata_is_complete(mbtiles, andorra):
    md = dict(mbtiles.execute("SELECT name, value FROM metadata"))
    assert md["attribution"] == "© OpenStreetMap contributors"
    assert md["format"] == "pbf"
    assert (md["minzoom"], md["maxzoom"]) == ("0", "14")
    bounds = [float(v) for v in md["bounds"].split(",")]
    assert bounds == pytest.approx(andorra.bbox, abs=1e-5)
    lon, lat, zoom = (float(v) for v in md["center"].split(","))
    assert bounds[0] < lon < bounds[2] and bounds[1] < lat < bounds[3] and 0 <= zoom <= 14
    assert md["name"]
    layers = json.loads(md["json"])["vector_layers"]
    assert [lay["id"] for lay in layers] == list(schema.LAYERS)
    for lay in layers:
        assert {"kind", "min_zoom"} <= set(lay["fields"]), lay
    zooms = [z for (z,) in mbtiles.execute("SELECT DISTINCT zoom_level FROM tiles ORDER BY 1")]
    assert zooms == list(range(15))


def test_tiles_are_gzip_mvt(mbtiles):
    for (data,) in mbtiles.execute("SELECT tile_data FROM tiles LIMIT 20"):
        assert bytes(data[:2]) == b"\x1f\x8b"
        assert decode(bytes(data))


def test_named_roads_at_z14_in_andorra_la_vella(mbtiles):
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 14)
    t = decode(_tile(mbtiles, 14, x, y))
    roads = t["roads"]["features"]
    names = {f["properties"].get("name") for f in roads} - {None}
    assert len(names) >= 10
    assert "Avinguda Meritxell" in names  # the main shopping street of the capital
    kinds = {f["properties"]["kind"] for f in roads}
    assert {"major_road", "minor_road"} <= kinds <= STYLE_ROAD_KINDS
    for f in roads:
        assert f["geometry"]["type"] in ("LineString", "MultiLineString")
    assert "buildings" in t and "earth" in t


def test_places_at_low_zoom(mbtiles):
    for z in (2, 4, 6):
        x, y = lonlat_tile(*ANDORRA_LA_VELLA, z)
        t = decode(_tile(mbtiles, z, x, y))
        places = {f["properties"]["name"]: f["properties"] for f in t["places"]["features"]}
        assert "Andorra la Vella" in places, (z, list(places))
        capital = places["Andorra la Vella"]
        assert capital["kind"] == "locality" and capital["capital"] == "yes" and capital["min_zoom"] <= z
        assert "buildings" not in t and "pois" not in t


def test_water_in_the_valley(mbtiles):
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, 12)
    t = decode(_tile(mbtiles, 12, x, y))
    water = t["water"]["features"]
    rivers = [f for f in water if f["properties"]["kind"] == "river"]
    assert rivers and any(f["properties"].get("name", "").startswith("Valira") or "Valira" in f["properties"].get("name", "")
                          for f in rivers)
    assert any(f["geometry"]["type"] in ("Polygon", "MultiPolygon") for f in water)


def test_low_zoom_features_respect_min_zoom_and_extent(mbtiles):
    checked = 0
    for z, _x, _row, data in mbtiles.execute("SELECT * FROM tiles WHERE zoom_level < 14"):
        t = decode(bytes(data))
        for name, layer in t.items():
            assert name in schema.LAYERS
            for f in layer["features"]:
                props = f["properties"]
                assert "kind" in props and props["min_zoom"] <= z, (z, name, props)
                coords = shapely.get_coordinates(shapely.geometry.shape(f["geometry"]))
                assert coords.min() >= -BUFFER - 1 and coords.max() <= EXTENT + BUFFER + 1
                checked += 1
    assert checked > 1000


def test_more_detail_at_higher_zoom(mbtiles):
    """Over the whole extract, each zoom level carries more features (dropping by importance and size)."""
    def features(z):
        rows = mbtiles.execute("SELECT tile_data FROM tiles WHERE zoom_level = ?", (z,))
        return sum(len(v["features"]) for (d,) in rows for v in decode(bytes(d)).values())

    assert features(6) < features(10) < features(14)


def test_tiles_only_over_the_extract(mbtiles, andorra):
    for z in (10, 14):
        x0, y0, x1, y1 = tile_range(andorra.bbox, z)
        bad = mbtiles.execute(
            "SELECT COUNT(*) FROM tiles WHERE zoom_level=? AND NOT (tile_column BETWEEN ? AND ?"
            " AND (? - tile_row) BETWEEN ? AND ?)", (z, x0, x1, (1 << z) - 1, y0, y1)).fetchone()[0]
        assert bad == 0


def test_tile_range_and_bounds_agree():
    z = 14
    x, y = lonlat_tile(*ANDORRA_LA_VELLA, z)
    assert tile_range((*ANDORRA_LA_VELLA, *ANDORRA_LA_VELLA), z) == (x, y, x, y)
    minx, miny, maxx, maxy = tile_bounds(z, x, y)
    assert maxx - minx == pytest.approx(maxy - miny)
    assert tile_range((-180, -85.05, 180, 85.05), 3) == (0, 0, 7, 7)


def test_schema_classification():
    f = schema.line_feature({"highway": "motorway_link", "tunnel": "yes", "oneway": "yes", "name": "X"})
    p = schema.properties(f, {"name": "X"})
    assert (f.layer, p["kind"], p["kind_detail"]) == ("roads", "highway", "motorway")
    assert p["is_link"] is True and p["is_tunnel"] is True and p["oneway"] == "yes" and "is_bridge" not in p
    assert schema.line_feature({"highway": "service"}).kind == "minor_road"
    assert schema.line_feature({"highway": "pedestrian", "area": "yes"}) is None
    assert schema.line_feature({"railway": "rail"}).kind == "rail"
    assert schema.line_feature({"aerialway": "chair_lift"}).layer == "transit"
    assert schema.line_feature({"waterway": "river"}).kind == "river"
    assert schema.line_feature({"building": "yes"}) is None
    assert [a.layer for a in schema.area_features({"natural": "water", "water": "lake"})] == ["water"]
    assert schema.area_features({"natural": "water", "water": "lake"})[0].kind == "lake"
    kinds = {(a.layer, a.kind) for a in schema.area_features({"landuse": "forest"})}
    assert kinds == {("landuse", "forest"), ("landcover", "forest")}
    assert schema.area_features({"building": "yes", "height": "12 m"})[0].extra == (("height", 12.0),)
    assert schema.place_feature({"place": "city", "name": "C", "population": "2000000"}).min_zoom <= 5
    assert schema.place_feature({"place": "village"}) is None  # unnamed
    b = schema.boundary_feature({"admin_level": "2"})
    assert b.kind == "country" and schema.properties(b, {})["kind_detail"] == 2
    assert schema.poi_feature({"railway": "station"}).kind == "station"


def test_ways_without_line_keys_are_no_lines(shared_data_dir):
    """The collector skips ways without any of schema.LINE_KEYS unread: on every tagged way of a real
    extract, line_feature gives nothing for those."""
    import osmium

    seen = {"skipped": 0, "lines": 0}

    class Ways(osmium.SimpleHandler):
        def way(self, w):
            tags = dict(w.tags)
            if not tags:
                return
            if any(k in tags for k in schema.LINE_KEYS):
                seen["lines"] += schema.line_feature(tags) is not None
                return
            seen["skipped"] += 1
            assert schema.line_feature(tags) is None, tags

    Ways().apply_file(str(shared_data_dir / "andorra" / "andorra.osm.pbf"))
    assert seen["skipped"] > 500 and seen["lines"] > 1000


def test_clipped_extract_degrades_gracefully(shared_data_dir):
    """Helsinki's extract is clipped: ways reference nodes it lacks. They keep their located runs."""
    bbox = (24.9352, 60.1642, 24.9534, 60.1791)
    fs = collect(shared_data_dir / "helsinki" / "helsinki.osm.pbf", bbox)
    assert fs.partial_ways > 50
    counts = fs.counts()
    assert counts["roads"] > 1000 and counts["buildings"] > 500
    tiles = list(cut_tiles(fs, bbox, minzoom=14, maxzoom=14, processes=1))
    assert len(tiles) >= 4
    named = set()
    for *_, data in tiles:
        t = decode(data)
        named |= {f["properties"].get("name") for f in t.get("roads", {"features": []})["features"]}
    assert len(named - {None}) > 20


def test_landcover_only_at_low_zoom(mbtiles):
    def has_landcover(z):
        rows = mbtiles.execute("SELECT tile_data FROM tiles WHERE zoom_level = ?", (z,))
        return sum(len(decode(bytes(d)).get("landcover", {"features": []})["features"]) for (d,) in rows)

    assert has_landcover(6) > 0 and has_landcover(8) == 0 and has_landcover(14) == 0


def test_tiles_only_where_features_are():
    """An extract of two far-apart parts (like Nominatim's Liechtenstein + Alabama test set) gets tiles
    around its features, not a grid over the whole bounding box."""
    import numpy as np

    from geoengine.tiles.features import lonlat_to_merc
    from geoengine.tiles.tiler import tasks_for

    bbox = (-87.95, 32.18, 9.68, 47.53)
    pts = [(-86.6, 32.5), (9.52, 47.14)]  # Prattville AL, Vaduz
    xy = [lonlat_to_merc(lon, lat) for lon, lat in pts]
    bounds = np.array([[float(x) - 10, float(y) - 10, float(x) + 10, float(y) + 10] for x, y in xy])
    tasks = tasks_for(bbox, 0, 14, bounds, np.array([0, 12]))
    by_zoom = {}
    for z, tiles in tasks:
        by_zoom.setdefault(z, []).extend(tiles)
    assert len(by_zoom[14]) == 2 and len(by_zoom[11]) == 1  # Vaduz only from its min_zoom 12 on
    assert sorted(by_zoom[14]) == sorted(lonlat_tile(lon, lat, 14) for lon, lat in pts)
    # At z1 and z2 the box spans two tiles, one of them with a feature: features touch at least a quarter
    # of the box there, so its whole grid is made (its land drawn); from z3 on, only feature tiles.
    assert len(by_zoom[1]) == 2 and len(by_zoom[2]) == 2 and len(by_zoom[3]) == 1
    assert sum(len(t) for _, t in tasks) == 15 + 3 + 2


def test_coastline_splits_land_and_sea(shared_data_dir):
    """Monaco: the coastline (clipped by the extract, extended to the box's edge) leaves the
    Mediterranean out of `earth` and makes it an `ocean` polygon."""
    from geoengine.bundler.source import describe_extract
    from geoengine.tiles.features import lonlat_to_merc

    path = shared_data_dir / "monaco" / "monaco.osm.gz"
    bbox = describe_extract(path)["bbox"]
    fs = collect(path, bbox)
    earth = fs.geoms[fs.layer.index(schema.LAYERS.index("earth"))]
    (sea,) = [g for g, p in zip(fs.geoms, fs.props, strict=True) if p["kind"] == "ocean"]

    def at(lon, lat):
        x, y = lonlat_to_merc(lon, lat)
        return shapely.Point(float(x), float(y))

    for lon, lat in [(7.4200, 43.7314), (7.4180, 43.7400), (7.3900, 43.7400)]:  # Monaco-Ville, Moneghetti, Cap-d'Ail hills
        assert earth.contains(at(lon, lat)) and not sea.contains(at(lon, lat))
    for lon, lat in [(7.4500, 43.6500), (7.5000, 43.6000)]:  # open sea
        assert sea.contains(at(lon, lat)) and not earth.contains(at(lon, lat))
    assert earth.area < sea.area  # most of the box is sea


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "liechtenstein/valhalla-liechtenstein-latest.osm.pbf"])
def test_the_node_key_filter_drops_no_feature(rel):
    """The collector's C++ KeyFilter lets only nodes with a key of schema.NODE_KEYS reach Python: every
    tagged node of a real extract that node_features gives a feature has one, and some tagged nodes
    without one exist (so the filter drops something)."""
    import osmium

    from ..conftest import data_file

    seen = {"feature": 0, "dropped": 0}

    class Nodes(osmium.SimpleHandler):
        def node(self, n):
            tags = dict(n.tags)
            has_key = any(k in tags for k in schema.NODE_KEYS)
            if schema.node_features(tags):
                assert has_key, tags
                seen["feature"] += 1
            elif not has_key:
                seen["dropped"] += 1

    Nodes().apply_file(str(data_file(rel)), filters=[osmium.filter.EmptyTagFilter()])
    assert seen["feature"] > 400 and seen["dropped"] > 500, seen
