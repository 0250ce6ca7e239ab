"""The collector's shortcuts give the features a plain reading gives: ways filtered in C++ with boundary
relations' member ways handed back, and osmium's WKB projected as bytes."""

from __future__ import annotations

import numpy as np
import osmium
import pytest
import shapely

from geoengine.bundler.locations import LOCATION_INDEX
from geoengine.tiles import features as F

from ..conftest import data_file

EXTRACTS = ["andorra/andorra.osm.pbf", "liechtenstein/nominatim-apidb-test-data.osm.pbf", "monaco/monaco.osm.gz"]


class _EveryWay(F._PointsAndLines):
    """The points-and-lines stream reading every way in Python and skipping those without a line key
    that no boundary relation holds (the collector before ways were filtered in C++)."""

    def collect(self, osm_path) -> None:
        self.apply_file(str(osm_path), locations=True, idx=LOCATION_INDEX, filters=[self.filters[0]()])
        self.flush()

    def way(self, w):
        level = self.boundary_ways.get(w.id)
        if level is None and not any(k in w.tags for k in F._WAY_KEYS):
            return
        super().way(w, level)


class _EveryNodeTagRead(F._PointsAndLines):
    """The points-and-lines stream reading every node's tags into a dict and asking the schema (the
    collector before one-tag nodes' idleness was decided once per tag)."""

    def node(self, n):
        tags = F.read_tags(n)
        feats = F.schema.node_features(tags)
        if feats:
            self._push(self.factory.create_point(n), [F._entry(f, tags) for f in feats])


def _rows(fs: F.FeatureSet) -> list:
    return list(zip(shapely.to_wkb(np.array(fs.geoms, dtype=object)).tolist(), fs.layer, fs.min_zoom, fs.props,
                    strict=True))


def _keyless_members(path) -> int:
    levels = F.boundary_way_levels(path)
    n = [0]

    class Ways(osmium.SimpleHandler):
        def way(self, w):
            if w.id in levels and not any(k in w.tags for k in F._WAY_KEYS):
                n[0] += 1

    Ways().apply_file(str(path))
    return n[0]


@pytest.mark.parametrize("rel", EXTRACTS)
def test_filtered_ways_give_the_features_of_reading_every_way(rel):
    path = data_file(rel)
    levels = F.boundary_way_levels(path)
    fast, plain = F.FeatureSet(), F.FeatureSet()
    F._PointsAndLines(fast, levels).collect(path)
    _EveryWay(plain, levels).collect(path)
    assert len(plain) > 100
    assert _rows(fast) == _rows(plain)
    assert shapely.to_wkb(np.array(fast.coastlines, dtype=object)).tolist() == \
        shapely.to_wkb(np.array(plain.coastlines, dtype=object)).tolist()
    assert (fast.skipped_ways, fast.partial_ways) == (plain.skipped_ways, plain.partial_ways)


def test_andorra_has_boundary_member_ways_without_a_line_key():
    """The case the handler of filtered ways is for must occur in the data of the test above."""
    path = data_file("andorra/andorra.osm.pbf")
    assert _keyless_members(path) >= 5
    fs = F.FeatureSet()
    F._PointsAndLines(fs, F.boundary_way_levels(path)).collect(path)
    boundaries = F.LAYER_INDEX["boundaries"]
    assert sum(1 for lay in fs.layer if lay == boundaries) >= _keyless_members(path)


def _osmium_wkbs(path) -> list[bytes]:
    factory = osmium.geom.WKBFactory()
    out = []

    class Geometries(osmium.SimpleHandler):
        def node(self, n):
            if n.tags:
                out.append(bytes.fromhex(factory.create_point(n)))

        def way(self, w):
            try:
                out.append(bytes.fromhex(factory.create_linestring(w)))
            except (osmium.InvalidLocationError, RuntimeError):
                pass

        def area(self, a):
            try:
                out.append(bytes.fromhex(factory.create_multipolygon(a)))
            except (osmium.InvalidLocationError, RuntimeError):
                pass

    Geometries().apply_file(str(path), locations=True, idx=LOCATION_INDEX)
    return out


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "liechtenstein/valhalla-liechtenstein-latest.osm.pbf"])
def test_wkb_projected_as_bytes_equals_shapely_transform(rel):
    raw = _osmium_wkbs(data_file(rel))
    types = {int.from_bytes(b[1:5], "little") for b in raw}
    assert {1, 2, 6} <= types  # points, lines, multipolygons
    areas = shapely.from_wkb([b for b in raw if b[1] == 6])
    assert (shapely.get_num_interior_rings(shapely.get_geometry(areas, 0)) > 0).any()  # holes
    if "liechtenstein" in rel:
        assert (shapely.get_num_geometries(areas) > 1).any()  # several polygons
    merc = F._merc_wkbs(raw)
    want = shapely.to_wkb(shapely.transform(shapely.from_wkb(raw), F._merc_coords)).tolist()
    assert merc == want


def test_wkb_projection_of_other_geometries_goes_through_shapely():
    """Geometries osmium does not write (or writes rarely: holes, several polygons) still come out as
    shapely.transform + to_wkb makes them, between ones projected as bytes."""
    geoms = [shapely.Point(9.5, 47.1), shapely.GeometryCollection([shapely.Point(1, 2)]),
             shapely.Polygon([(9, 47), (10, 47), (10, 48), (9, 47)], [[(9.6, 47.1), (9.9, 47.1), (9.9, 47.5), (9.6, 47.1)]]),
             shapely.LineString([(9, 47), (9.5, 47.5)]), shapely.MultiPoint([(1, 2), (3, 4)])]
    raw = shapely.to_wkb(geoms).tolist() + [shapely.to_wkb(shapely.Point(9.5, 47.1), byte_order=0)]  # big-endian
    want = shapely.to_wkb(shapely.transform(shapely.from_wkb(raw), F._merc_coords)).tolist()
    assert F._merc_wkbs(raw) == want
    assert F._merc_wkbs([]) == []


@pytest.mark.parametrize("rel", EXTRACTS)
def test_one_tag_idle_nodes_give_the_features_of_reading_every_node(rel):
    path = data_file(rel)
    levels = F.boundary_way_levels(path)
    fast, plain = F.FeatureSet(), F.FeatureSet()
    collector = F._PointsAndLines(fast, levels)
    collector.collect(path)
    _EveryNodeTagRead(plain, levels).collect(path)
    assert sum(1 for lay in plain.layer if lay == F.LAYER_INDEX["pois"]) > 10
    assert _rows(fast) == _rows(plain)
    # the shortcut was taken (natural=tree, the common one-tag node that makes nothing) and only for tags
    # the schema turns into nothing
    assert collector._idle_tags
    if "monaco" not in rel:
        assert ("natural", "tree") in collector._idle_tags
    assert all(not F.schema.node_features({k: v}) for k, v in collector._idle_tags)


def test_idle_tags_stay_bounded(monkeypatch):
    """One-tag values are free text (a shop's kind, a house number): the remembered set has a cap."""
    path = data_file("liechtenstein/nominatim-apidb-test-data.osm.pbf")
    monkeypatch.setattr(F._PointsAndLines, "_IDLE_CAP", 1)
    fast, plain = F.FeatureSet(), F.FeatureSet()
    collector = F._PointsAndLines(fast, {})
    collector.collect(path)
    _EveryNodeTagRead(plain, {}).collect(path)
    assert len(collector._idle_tags) == 1
    assert _rows(fast) == _rows(plain)
