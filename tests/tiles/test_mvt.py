"""geoengine.tiles.mvt makes exactly mapbox-vector-tile's bytes: for every tile of real extracts (the
tile stage's own layers, cut with the encoder under test and the library side by side), and for the edge
cases of its rules (invalid polygons, parts that round away, holes, multipoints, property values)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import mapbox_vector_tile
import numpy as np
import pytest
import shapely
from mapbox_vector_tile.encoder import on_invalid_geometry_make_valid

from geoengine.tiles import mvt, tiler
from geoengine.tiles.spool import collect_spooled, cut_spooled

from ..conftest import data_file

OPTIONS = {"extents": 4096, "y_coord_down": True, "on_invalid_geometry": on_invalid_geometry_make_valid}


def reference(layers) -> bytes:
    return mapbox_vector_tile.encode(
        [{"name": name, "features": [{"geometry": g, "properties": p} for g, p in zip(geoms, props, strict=True)]}
         for name, geoms, _dims, props in layers], default_options=OPTIONS)


def layer(name, geoms, props=None):
    geoms = list(geoms)
    return (name, geoms, [int(shapely.get_dimensions(g)) for g in geoms], props or [{} for _ in geoms])


@pytest.mark.parametrize("rel, bbox", [
    ("liechtenstein/valhalla-liechtenstein-latest.osm.pbf", None),
    ("andorra/andorra.osm.pbf", None),
])
def test_every_tile_of_a_real_extract_is_byte_identical(rel, bbox, monkeypatch):
    from geoengine.bundler.pbfscan import scan_pbf

    osm = data_file(rel)
    bbox = bbox or tuple(scan_pbf(osm)["bbox"])
    seen = {"tiles": 0, "features": 0, "differ": []}
    geometry_buffer, frame_tile = mvt.geometry_buffer, mvt.frame_tile
    last = {}

    def record(geoms, dims, frame=None):  # a tile's geometries, or a whole batch's (the tiler's way)
        gbuf, goff, types = geometry_buffer(geoms, dims, frame)
        last.update(geoms=geoms, dims=dims, frame=frame, goff=goff)
        return gbuf, goff, types

    def both(names, starts, feat, types, gbuf, goff, table, flags=None):
        new = frame_tile(names, starts, feat, types, gbuf, goff, table, flags)
        if "props" not in tiler._STATE:
            return new  # mvt.warm, before the cut
        # this tile's geometries among the last geometry_buffer call's (goff is a slice of its offsets)
        i0 = (goff.ctypes.data - last["goff"].ctypes.data) // goff.itemsize
        geoms = last["geoms"][i0:i0 + len(feat)]
        dims = last["dims"][i0:i0 + len(feat)]
        frame = last["frame"]
        if frame is not None:  # Mercator geometries, moved into the tile's frame by the encoder
            x0, y1, k = frame
            geoms = mvt.to_tile(geoms, (np.broadcast_to(x0, (len(last["geoms"]),))[i0],
                                        np.broadcast_to(y1, (len(last["geoms"]),))[i0], k))
        props = tiler._STATE["props"]  # cut in this process (processes=1)
        layers = [(name, list(geoms[a:b]), list(dims[a:b]), [props[f] for f in feat[a:b].tolist()])
                  for name, a, b in zip(names, starts[:-1].tolist(), starts[1:].tolist(), strict=True)]
        seen["tiles"] += 1
        seen["features"] += len(geoms)
        if new != reference(layers):
            seen["differ"].append(list(names))
        return new

    monkeypatch.setattr(mvt, "geometry_buffer", record)
    monkeypatch.setattr(mvt, "frame_tile", both)
    with tempfile.TemporaryDirectory() as tmp:
        spool, parts = collect_spooled(osm, bbox, Path(tmp) / "spool", processes=1)
        n = sum(1 for _ in cut_spooled(spool, parts, bbox, processes=1))
    assert n == seen["tiles"] > 100 and seen["features"] > 5000
    assert not seen["differ"], f"{len(seen['differ'])} of {n} tiles differ, e.g. layers {seen['differ'][0]}"


def test_edge_cases_match_the_library():
    bowtie = shapely.Polygon([(0, 0), (10, 10), (10, 0), (0, 10), (0, 0)])  # invalid: make-valid path
    tiny = shapely.Polygon([(0.1, 0.1), (0.2, 0.1), (0.2, 0.2), (0.1, 0.1)])  # rounds to a point: dropped
    holed = shapely.Polygon([(0, 0), (0, 100), (100, 100), (100, 0)], [[(10, 10), (20, 10), (20, 20), (10, 20)]])
    cw = shapely.Polygon([(0, 0), (0, 50.4), (50.6, 50.4), (50.6, 0)])  # clockwise exterior: reversed
    multi = shapely.MultiPolygon([holed, shapely.Polygon([(200, 200), (300, 200), (300, 300)])])
    overlapping = shapely.MultiPolygon([shapely.box(0, 0, 10, 10), shapely.box(10.4, 0, 20, 10)])  # touch when rounded
    short = shapely.LineString([(5.1, 5.1), (5.2, 5.3)])  # no step after rounding: no feature
    lines = shapely.MultiLineString([[(0, 0), (0.3, 0.2)], [(1, 1), (40.5, 41.5), (40.6, 41.4), (-70, 3000)]])
    pts = shapely.MultiPoint([(1, 1), (1, 1), (4095.5, -63.5)])
    layers = [
        layer("water", [bowtie, tiny, holed, cw, multi, overlapping],
              [{"kind": "water"}, {}, {"kind": "lake", "name": "x"}, {"kind": "water", "height": 3.0},
               {"kind": "lake", "oneway": True}, {"n": 1}]),
        layer("roads", [short, lines, shapely.LineString([(0, 0), (4160, 4160)])],
              [{"kind": "path"}, {"kind": "path", "is_bridge": True, "n": -5}, {"kind": "major_road", "n": 1.0,
                                                                                   "b": 1, "t": True}]),
        layer("pois", [shapely.Point(12.5, 13.5), pts, shapely.Point(-1.4, 2.6)],
              [{"name": "é ü ß", "elevation": 2912, "big": 2 ** 40}, {"kind": "x", "bad": None, 3: "k"},
               {"f": float("1e-300")}]),
    ]
    assert mvt.encode_layers(layers) == reference(layers)


def test_a_tile_frame_moved_in_the_encoder_matches_moved_geometries():
    """encode_tile with a frame (Mercator geometries, moved into the tile while encoding) makes the bytes of
    the geometries moved first (mvt.to_tile, the arithmetic the cut used before), which are the library's:
    polygons certainly valid, checked by GEOS, and invalid (make-valid path), lines and points."""
    minx, miny, maxx, maxy = tiler.tile_bounds(14, 8600, 5750)
    k = mvt.EXTENT / (maxx - minx)
    frame = (minx, maxy, k)
    merc = lambda g: shapely.transform(g, lambda c: np.column_stack([minx + c[:, 0] / k, maxy - c[:, 1] / k]))  # noqa: E731
    tile = [shapely.Polygon([(0, 0), (10, 10), (10, 0), (0, 10), (0, 0)]),  # bowtie: invalid
            shapely.Polygon([(0, 0), (0, 100), (100, 100), (100, 0)], [[(10, 10), (20, 10), (20, 20), (10, 20)]]),
            shapely.MultiPolygon([shapely.box(0, 0, 10, 10), shapely.box(10.4, 0, 20, 10)]),  # touch when rounded
            shapely.Polygon([(-64, -64), (4160, -64), (4160, 4160), (-64, 4160)]),
            shapely.Polygon([(3.3 * i, 7.7 * (i % 3)) for i in range(80)]),  # > SIMPLE_MAX vertices: GEOS decides
            shapely.LineString([(0, 0), (0.3, 0.2), (40.5, 41.5), (-70, 3000)]),
            shapely.MultiPoint([(1, 1), (1, 1), (4095.5, -63.5)]), shapely.Point(12.5, 13.5)]
    geoms = np.empty(len(tile), dtype=object)
    geoms[:] = [merc(g) for g in tile]
    dims = shapely.get_dimensions(geoms)
    moved = shapely.transform(geoms, lambda c: np.column_stack([(c[:, 0] - minx) * k, (maxy - c[:, 1]) * k]))  # y down
    assert shapely.equals_exact(moved, mvt.to_tile(geoms, frame), tolerance=0).all()
    starts = np.array([0, 5, 6, len(tile)])
    props = [{"i": i} for i in range(len(tile))]
    args = (["water", "roads", "pois"], starts)
    framed = mvt.encode_tile(*args, geoms, dims, np.arange(len(tile)), mvt.TagTable(props), frame)
    assert framed == mvt.encode_tile(*args, moved, dims, np.arange(len(tile)), mvt.TagTable(props))
    assert framed == reference([layer(n, moved[a:b], props[a:b]) for n, a, b in
                                zip(args[0], starts[:-1].tolist(), starts[1:].tolist(), strict=True)])
    assert not np.array_equal(shapely.get_coordinates(moved), np.rint(shapely.get_coordinates(moved)))  # moved, not integers


def test_value_tables_per_layer_match_the_library():
    """Each layer has its own key and value tables, in order of first use; equal numbers (1, 1.0) are one
    entry encoded as the first met, booleans apart; a feature that draws nothing adds no entry."""
    sq = shapely.box(0, 0, 10, 10)
    gone = shapely.LineString([(5.1, 5.1), (5.2, 5.3)])  # no step after rounding: not drawn
    layers = [
        layer("a", [gone, sq, sq, sq, sq, sq], [{"z": "only here"}, {"n": 1.0, "k": "v"}, {"n": 1}, {"n": True},
                                                 {"m": 1, "k": 1.0}, {"k": "v", "n": False}]),
        layer("b", [sq, sq, gone], [{"n": 1}, {"n": 1.0, "m": True}, {"q": 2}]),
        layer("c", [gone], [{"n": 1}]),
    ]
    assert mvt.encode_layers(layers) == reference(layers)


def test_random_polygons_and_lines_match_the_library():
    rng = np.random.default_rng(7)
    geoms = []
    for _ in range(300):
        c = rng.uniform(-100, 4200, 2)
        n = int(rng.integers(3, 12))
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        r = rng.uniform(0.3, 300, n)
        ring = np.column_stack([c[0] + r * np.cos(ang), c[1] + r * np.sin(ang)])
        geoms.append(shapely.Polygon(ring[::-1] if rng.random() < 0.5 else ring))
        geoms.append(shapely.LineString(c + np.cumsum(rng.normal(0, 3, (n, 2)), axis=0)))
    polys = [g for g in geoms if g.geom_type == "Polygon"]
    lines = [g for g in geoms if g.geom_type == "LineString"]
    layers = [layer("landuse", polys, [{"i": i % 7} for i in range(len(polys))]),
              layer("roads", lines, [{"i": float(i % 5)} for i in range(len(lines))])]
    assert mvt.encode_layers(layers) == reference(layers)


def test_surely_valid_polygons_are_valid_for_geos():
    """The encoder skips GEOS's validity check for the polygons `_surely_valid` accepts: every one it
    accepts must be valid once rounded (random small rings on a coarse grid, so spikes, repeated
    vertices, self-touching and crossing rings are common), and it must accept most valid ones."""
    rng = np.random.default_rng(11)
    polys = []
    for _ in range(4000):
        n = int(rng.integers(3, 9))
        pts = rng.integers(0, 6, (n, 2)).astype(np.float64) + rng.uniform(-0.49, 0.49, (n, 2))
        polys.append(shapely.Polygon(np.vstack([pts, pts[:1]])))
    for k in range(300):  # convex ones (valid), some with repeated vertices
        ang = np.sort(rng.uniform(0, 2 * np.pi, 6))
        ring = np.column_stack([50 + 40 * np.cos(ang), 50 + 40 * np.sin(ang)])
        polys.append(shapely.Polygon(np.repeat(ring, 2, axis=0) if k % 3 == 0 else ring))
    polys.append(shapely.Polygon([(0, 0), (10, 0), (10, 10), (0, 10)], [[(2, 2), (3, 2), (3, 3)]]))  # a hole: GEOS
    geoms = np.array(polys, dtype=object)
    coords, offs = mvt._ragged(geoms, 2)
    sure = mvt._surely_valid(np.rint(np.ascontiguousarray(coords, dtype=np.float64)), *offs)
    valid = shapely.is_valid(shapely.transform(geoms, np.round))
    assert not (sure & ~valid).any(), [polys[i].wkt for i in np.flatnonzero(sure & ~valid)[:3]]
    assert (~valid).sum() > 500 and sure.sum() > 0.8 * valid[:-1].sum()
    assert not sure[-1]
