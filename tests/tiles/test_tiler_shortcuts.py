"""The cut's shortcuts (issue 29, third pass) against the plain shapely computation they replace, on the
features of real extracts cut into real tiles:

- a simplified feature strictly inside a tile's clipping box is kept as it is: GEOS's `clip_by_rect`
  returns it vertex for vertex (WKB-identical);
- the box test that replaced the STRtree queries (`tiler._touching`) selects what the STRtree selects;
- `mvt._ragged` (coordinates read from the geometries themselves) gives `mvt._ragged_parts`'s arrays
  (every geometry taken apart), and `simplify._ordered_components` and `simplify.floors` give what taking
  the geometries apart gives, on the extract's features and on their pieces clipped to tiles (multi-parts,
  holes);
- `mvt.geometry_buffer` with one frame per geometry (a batch of tiles in one call) writes each tile's bytes
  as one call per tile does.
"""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geoengine.bundler.source import describe_extract
from geoengine.tiles import mvt, simplify
from geoengine.tiles import tiler as T
from geoengine.tiles.features import collect

from ..conftest import data_file

EXTRACTS = ["andorra/andorra.osm.pbf", "liechtenstein/nominatim-apidb-test-data.osm.pbf"]


@pytest.fixture(scope="module", params=EXTRACTS)
def features(request):
    path = data_file(request.param)
    bbox = describe_extract(path)["bbox"]
    fs = collect(path, bbox)
    geoms = np.array(fs.geoms, dtype=object)
    return geoms, bbox


def _tiles(geoms: np.ndarray, bbox, z: int, most: int = 60):
    """Up to `most` tiles at zoom z over the extract's box where there are points (so other features
    too: a long line or a big polygon alone touches many more tiles), spread over it."""
    x0, y0, x1, y1 = T.tile_range(bbox, z)
    ids = T._feature_tiles(shapely.bounds(geoms[shapely.get_dimensions(geoms) == 0]), z, (x0, y0, x1, y1))
    ids = ids[:: max(1, len(ids) // most)]
    return list(zip((ids >> 32).tolist(), (ids & 0xFFFFFFFF).tolist(), strict=True))


def _clipped_pieces(geoms: np.ndarray, bbox, z: int) -> tuple[np.ndarray, list]:
    """Every feature simplified at zoom z's tolerance and clipped to tiles of zoom z with the buffer (no
    collections, no empties), and the tiles' frames, per piece."""
    size = T.WORLD / (1 << z)
    buf = size * T.BUFFER / T.EXTENT
    simp = shapely.simplify(geoms, size / T.EXTENT, preserve_topology=True)
    pieces, frames = [], []
    for x, y in _tiles(geoms, bbox, z):
        minx, miny, maxx, maxy = T.tile_bounds(z, x, y)
        c = shapely.clip_by_rect(simp, minx - buf, miny - buf, maxx + buf, maxy + buf)
        c = c[~shapely.is_empty(c) & (shapely.get_type_id(c) != 7)]
        pieces.append(c)
        frames.append((minx, maxy, T.EXTENT / size, len(c)))
    return np.concatenate(pieces), frames


@pytest.mark.parametrize("z", [10, 12, 14])
def test_a_feature_inside_the_clip_box_is_what_clip_by_rect_returns(features, z):
    geoms, bbox = features
    size = T.WORLD / (1 << z)
    buf = size * T.BUFFER / T.EXTENT
    simp = shapely.simplify(geoms, size / T.EXTENT, preserve_topology=True)
    sb = shapely.bounds(simp)
    tree = shapely.STRtree(simp)
    checked = 0
    for x, y in _tiles(geoms, bbox, z):
        minx, miny, maxx, maxy = T.tile_bounds(z, x, y)
        r = (minx - buf, miny - buf, maxx + buf, maxy + buf)
        sel = T._touching(sb, *r)
        assert np.array_equal(sel, np.sort(tree.query(shapely.box(*r))))
        b = sb[sel]
        inside = sel[(b[:, 0] > r[0]) & (b[:, 1] > r[1]) & (b[:, 2] < r[2]) & (b[:, 3] < r[3])]
        clipped = shapely.clip_by_rect(simp[inside], *r)
        assert (shapely.to_wkb(clipped) == shapely.to_wkb(simp[inside])).all()
        checked += len(inside)
    assert checked > 100


@pytest.mark.parametrize("z", [11, 14])
def test_ragged_coordinates_equal_taking_the_geometries_apart(features, z):
    geoms, bbox = features
    pieces, _ = _clipped_pieces(geoms, bbox, z)
    types = set(shapely.get_type_id(pieces).tolist())
    for arr in (geoms, pieces):
        dims = shapely.get_dimensions(arr)
        for dim in (0, 1, 2):
            sub = arr[dims == dim]
            for part in (sub, sub[::7], sub[:1]):
                a, b = mvt._ragged(part, dim), mvt._ragged_parts(part, dim)
                assert np.array_equal(a[0], b[0])
                assert len(a[1]) == len(b[1]) and all(np.array_equal(p, q) for p, q in zip(a[1], b[1], strict=True))
        lines_polys = arr[dims >= 1]
        tid = shapely.get_type_id(lines_polys)
        a = simplify._ordered_components(lines_polys, tid)
        b = simplify._ordered_components_parts(lines_polys)
        assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
        # floors: the fast path against the one that takes the geometries apart (forced by a collection)
        coll = np.array([shapely.GeometryCollection([shapely.LineString([(0, 0), (5, 1), (9, 0)])])], dtype=object)
        for stop in (0.0, T.WORLD / (1 << T.MAXZOOM) / T.EXTENT * 0.5):
            fast = simplify.floors(arr, dims, stop)
            slow = simplify.floors(np.concatenate([arr, coll]), np.concatenate([dims, [1]]), stop)[:-1]
            assert np.array_equal(fast, slow)
    # the pieces hold what the shortcuts must handle: multi-lines, multi-polygons and holes
    assert {5, 6} <= types or z == 14
    assert (shapely.get_num_interior_rings(geoms[shapely.get_type_id(geoms) == 3]) > 0).any()


def test_a_batch_of_tiles_encodes_as_tile_by_tile(features):
    geoms, bbox = features
    pieces, frames = _clipped_pieces(geoms, bbox, 13)
    dims = shapely.get_dimensions(pieces)
    counts = [n for *_, n in frames]
    k = frames[0][2]
    x0 = np.repeat([f[0] for f in frames], counts)
    y1 = np.repeat([f[1] for f in frames], counts)
    gbuf, goff, types = mvt.geometry_buffer(pieces, dims, (x0, y1, k))
    a = 0
    for minx, maxy, kk, n in frames:
        one_buf, one_off, one_types = mvt.geometry_buffer(pieces[a:a + n], dims[a:a + n], (minx, maxy, kk))
        assert np.array_equal(types[a:a + n], one_types)
        assert gbuf[goff[a]:goff[a + n]].tobytes() == one_buf.tobytes()
        assert np.array_equal(goff[a:a + n + 1] - goff[a], one_off)
        a += n
    assert a == len(pieces) > 1000 and (types == 3).sum() > 100
