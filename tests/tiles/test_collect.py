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


class _WkbSink(F.FeatureSet):
    """A FeatureSet that keeps the WKB the collector hands the spool with each geometry (None: unknown)."""

    def add_many(self, geoms, layers, min_zooms, props, wkbs=None, objs=None) -> None:
        super().add_many(geoms, layers, min_zooms, props, wkbs, objs)
        self.wkbs = getattr(self, "wkbs", []) + list(wkbs if wkbs is not None else [None] * len(geoms))

    def check_wkbs(self) -> int:
        """The WKB handed over is what shapely writes of the geometry; how many were handed over."""
        known = [(w, g) for w, g in zip(self.wkbs, self.geoms, strict=True) if w is not None]
        assert [w for w, _ in known] == shapely.to_wkb(np.array([g for _, g in known], dtype=object)).tolist()
        return len(known)


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


class _EveryAreaClassified(F._Areas):
    """The areas stream reading every area's tags into a dict and asking the schema (the collector
    before areas' entries were remembered by tag set), and taking single polygons out of osmium's
    multipolygons after parsing them (before that was done on the bytes)."""

    def area(self, a):
        tags = F.read_tags(a)
        feats = F.schema.area_features(tags)
        poi = F.schema.poi_feature(tags, is_area=True) if tags.get("name") else None
        if not feats and poi is None:
            return
        try:
            src = self.factory.create_multipolygon(a)
        except (osmium.InvalidLocationError, RuntimeError):
            src = F._area_polygons(a)
            if src is None:
                return
        self._push(src, [F._entry(f, tags) for f in feats], None if poi is None else F._entry(poi, tags))

    def _unwrap(self, wkbs):
        return wkbs  # multipolygons of one polygon are taken apart in shapely (below), not as bytes

    def _fix(self, geoms, wkbs, meta):
        single = np.flatnonzero((shapely.get_type_id(geoms) == 6) & (shapely.get_num_geometries(geoms) == 1))
        geoms[single] = shapely.get_geometry(geoms[single], 0)
        for i in single.tolist():
            if wkbs[i] is not None:
                wkbs[i] = None  # written again from the polygon
        return F.make_areas_valid(geoms, wkbs)  # (the step after taking one-polygon areas apart: shared)


def _area_tags(path) -> list[dict]:
    out = []

    class Tags(osmium.SimpleHandler):
        def area(self, a):
            out.append(F.read_tags(a))

    Tags().apply_file(str(path), locations=True, idx=LOCATION_INDEX)
    return out


def _classified(tags: dict):
    poi = F.schema.poi_feature(tags, is_area=True) if tags.get("name") else None
    return F.schema.area_features(tags), poi, [F.schema.properties(f, tags) for f in F.schema.area_features(tags)], \
        None if poi is None else F.schema.properties(poi, tags)


@pytest.mark.parametrize("rel", EXTRACTS + ["liechtenstein/valhalla-liechtenstein-latest.osm.pbf"])
def test_area_features_read_only_area_keys(rel):
    """What the areas cache keys on: an area's features and properties from its tags with a key of
    schema.AREA_KEYS are those from all its tags."""
    tags = _area_tags(data_file(rel))
    assert len(tags) > 300
    n_extra = 0
    for t in tags:
        kept = {k: v for k, v in t.items() if k in F.schema.AREA_KEYS}
        n_extra += len(kept) < len(t)
        assert _classified(kept) == _classified(t), t
    assert n_extra > 30  # areas with keys the schema does not read occur


class _Reads(dict):
    """A tag dict that records the keys looked up in it."""

    def __init__(self, *a):
        super().__init__(*a)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)


def test_the_schema_looks_up_only_area_keys():
    """The keys the areas' classification looks up, on every area of the test extracts and on tag sets
    that take its deeper branches, are all in schema.AREA_KEYS (the only other reads are the
    `isdisjoint` tests against sets of AREA_KEYS)."""
    tag_sets = [t for rel in EXTRACTS for t in _area_tags(data_file(rel))]
    tag_sets += [{"name": "X", "natural": "peak", "ele": "1200"}, {"building": "yes", "building:levels": "3"},
                 {"building:part": "yes", "height": "9"}, {"natural": "water", "water": "lake", "name": "L"},
                 {"highway": "pedestrian", "area": "yes", "name": "P"}, {"shop": "bakery", "name": "B"},
                 {"railway": "station", "name": "S", "building": "train_station"}]
    read: set[str] = set()
    for t in tag_sets:
        rec = _Reads(t)
        _classified(rec)
        read |= rec.read
    assert read <= F.schema.AREA_KEYS, read - F.schema.AREA_KEYS
    assert {"name", "building", "height", "ele", "water", "area"} <= read


@pytest.mark.parametrize("rel", EXTRACTS)
def test_remembered_area_kinds_give_the_features_of_classifying_every_area(rel):
    path = data_file(rel)
    fast, plain = _WkbSink(), F.FeatureSet()
    collector = F._Areas(fast, {})
    collector.collect(path)
    _EveryAreaClassified(plain, {}).collect(path)
    assert sum(1 for lay in plain.layer if lay == F.LAYER_INDEX["buildings"]) > 100
    assert _rows(fast) == _rows(plain)
    assert fast.check_wkbs() > 0.9 * len(fast)  # and the polygons' WKB, cut out of osmium's, is right
    assert len(collector._kinds) > 10
    # the shortcut was taken: far fewer tag sets remembered than areas with a feature
    assert len(collector._kinds) * 5 < len(plain)


def test_area_kinds_stay_bounded(monkeypatch):
    path = data_file("liechtenstein/nominatim-apidb-test-data.osm.pbf")
    monkeypatch.setattr(F._Areas, "_KINDS_CAP", 3)
    fast, plain = F.FeatureSet(), F.FeatureSet()
    collector = F._Areas(fast, {})
    collector.collect(path)
    _EveryAreaClassified(plain, {}).collect(path)
    assert len(collector._kinds) == 3
    assert _rows(fast) == _rows(plain)


# nodes without a location (n98, n99: not in the file), repeated nodes, too few points
_ODD_WAYS = """n1 v1 x9.5 y47.1
n2 v1 x9.51 y47.11
n3 v1 x9.52 y47.1
w1 v1 Nn1,n2
w2 v1 Nn99,n1,n2
w3 v1 Nn1,n99,n2
w4 v1 Nn1,n1
w5 v1 Nn98,n99
w6 v1 Nn1,n2,n99
w7 v1 Nn1,n1,n2,n2,n3,n1
w8 v1 Nn99,n1
w9 v1 Nn1
w10 v1 Nn99,n98,n1,n2
"""


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "monaco/monaco.osm.gz", "odd-ways.opl"])
def test_lines_from_the_location_index_equal_osmiums(rel, tmp_path):
    """Boundary members that the way filter drops take their nodes' locations from the index in Python
    (`features._location`, `features._linestring`): on every way of real extracts and of a small file of
    odd ways (nodes missing first, inside and last, repeated nodes, too few points), the same line as
    osmium's create_linestring, or the same error."""
    path = data_file(rel) if "/" in rel else tmp_path / rel
    if "/" not in rel:
        path.write_text(_ODD_WAYS)
    fp = osmium.FileProcessor(str(path), osmium.osm.NODE | osmium.osm.WAY).with_locations(LOCATION_INDEX)
    store = fp.node_location_storage
    factory = osmium.geom.WKBFactory()
    outcomes = {"line": 0, "InvalidLocationError": 0, "RuntimeError": 0}
    for obj in fp:
        if not isinstance(obj, osmium.osm.Way):
            continue
        locs = [F._location(store, n.ref) for n in obj.nodes]
        assert locs == [n.location for n in obj.nodes]
        try:
            want = bytes.fromhex(factory.create_linestring(obj))
        except (osmium.InvalidLocationError, RuntimeError) as exc:
            kind = "InvalidLocationError" if isinstance(exc, osmium.InvalidLocationError) else "RuntimeError"
            with pytest.raises(osmium.InvalidLocationError if kind == "InvalidLocationError" else RuntimeError) as got:
                F._linestring(locs)
            assert not (kind == "RuntimeError" and isinstance(got.value, osmium.InvalidLocationError))
            outcomes[kind] += 1
            continue
        assert shapely.to_wkb(F._linestring(locs)) == want
        outcomes["line"] += 1
    if "/" in rel:
        assert outcomes["line"] > 1000, outcomes
    else:
        assert outcomes == {"line": 4, "InvalidLocationError": 2, "RuntimeError": 4}, outcomes


class _EveryWayClassified(F._PointsAndLines):
    """The points-and-lines stream asking the schema for every way (the collector before ways' entries
    were remembered by tag set)."""

    def way(self, w, level=None, store=None):
        if level is None:
            level = self.boundary_ways.get(w.id)
        tags = F.read_tags(w)
        coast = tags.get("natural") == "coastline"
        feat = F.schema.line_feature(tags)
        if feat is None and level is not None:
            feat = F.schema.boundary_feature(tags, level)
        elif feat is not None and feat.layer == "boundaries" and level is not None:
            feat = F.schema.boundary_feature(tags, min(level, F.schema.admin_level(tags) or level))
        if feat is None and not coast:
            return
        locs = None if store is None else [F._location(store, n.ref) for n in w.nodes]
        try:
            src = self.factory.create_linestring(w) if locs is None else F._linestring(locs)
        except (osmium.InvalidLocationError, RuntimeError):
            src = self._runs(w, locs)
            if src is None:
                return
        if feat is not None and feat.layer == "boundaries":
            tags = {}
        self._push(src, [F._entry(feat, tags)] if feat is not None else [], coast=coast)


@pytest.mark.parametrize("rel", EXTRACTS)
def test_remembered_way_kinds_give_the_features_of_classifying_every_way(rel):
    path = data_file(rel)
    levels = F.boundary_way_levels(path)
    fast, plain = F.FeatureSet(), F.FeatureSet()
    collector = F._PointsAndLines(fast, levels)
    collector.collect(path)
    _EveryWayClassified(plain, levels).collect(path)
    assert sum(1 for lay in plain.layer if lay == F.LAYER_INDEX["roads"]) > 100
    assert _rows(fast) == _rows(plain)
    assert shapely.to_wkb(np.array(fast.coastlines, dtype=object)).tolist() == \
        shapely.to_wkb(np.array(plain.coastlines, dtype=object)).tolist()
    assert 10 < len(collector._kinds) < len(plain) / 2  # the shortcut was taken


def test_the_schema_looks_up_only_way_read_keys():
    """The keys a way's classification looks up (line_feature, boundary levels, properties), on every way
    of the test extracts at no level and at a boundary level, are all in schema.WAY_READ_KEYS."""
    tag_sets = []

    class Tags(osmium.SimpleHandler):
        def way(self, w):
            tag_sets.append(F.read_tags(w))

    for rel in EXTRACTS:
        Tags().apply_file(str(data_file(rel)))
    tag_sets += [{"boundary": "administrative", "admin_level": "4", "name": "R"},
                 {"highway": "primary_link", "tunnel": "yes", "bridge": "no", "oneway": "yes", "ref": "A1"},
                 {"railway": "rail", "service": "siding"}, {"natural": "coastline"}]
    read: set[str] = set()
    for t in tag_sets:
        for level in (None, 2, 8):
            rec = _Reads(t)
            collector = F._PointsAndLines(F.FeatureSet(), {})
            collector._classify(rec, level, ())
            read |= rec.read
    assert read <= F.schema.WAY_READ_KEYS, read - F.schema.WAY_READ_KEYS
    assert {"highway", "tunnel", "ref", "admin_level", "natural", "name", "service"} <= read
