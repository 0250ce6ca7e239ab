"""Feature assembly from an OSM extract with pyosmium, in Web Mercator metres.

Ways become lines, closed ways and multipolygon relations become polygons through osmium's area
handler, tagged nodes become points. A way with nodes missing from a clipped extract keeps its runs of
two or more located nodes (as a multi-line); areas that cannot be closed are skipped by osmium.
Administrative boundary relations are read in a first, relations-only pass so their member ways are
emitted as boundary lines.

Features are collected in two streams, each one pass over the extract: points and lines, then areas
(`STREAMS`; `geoengine.tiles.spool` runs them in two processes). Callbacks only classify tags and take
osmium's WKB, made in C++; the WKB is projected as bytes and parsed and checked in vectorised batches.
Nodes without a key the schema reads (schema.NODE_KEYS) and ways without a line key never reach the
callbacks (osmium's KeyFilter, in C++); of the ways dropped, boundary relations' members come back
through a handler that only looks their id up.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np
import osmium
import shapely

from geoengine.bundler.locations import LOCATION_INDEX
from geoengine.osmtags import tag_dict
from geoengine.tiles import schema

EARTH_RADIUS = 6378137.0
WORLD = 2 * np.pi * EARTH_RADIUS  # width of the Web Mercator square in metres
MAX_LAT = 85.0511287798


def lonlat_to_merc(lon, lat):
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.clip(np.asarray(lat, dtype=np.float64), -MAX_LAT, MAX_LAT)
    x = np.radians(lon) * EARTH_RADIUS
    y = np.log(np.tan(np.pi / 4 + np.radians(lat) / 2)) * EARTH_RADIUS
    return x, y


@dataclass
class FeatureSet:
    """Parallel arrays: geometry (Mercator), layer index, min zoom, properties."""

    geoms: list = field(default_factory=list)
    layer: list = field(default_factory=list)
    min_zoom: list = field(default_factory=list)
    props: list = field(default_factory=list)
    skipped_ways: int = 0
    partial_ways: int = 0
    coastlines: list = field(default_factory=list)  # natural=coastline lines (land on their left)

    def add(self, geom, feat: schema.Feature, tags) -> None:
        self.geoms.append(geom)
        self.layer.append(schema.LAYERS.index(feat.layer))
        self.min_zoom.append(feat.min_zoom)
        self.props.append(schema.properties(feat, tags))

    def add_many(self, geoms, layers, min_zooms, props, wkbs=None, objs=None) -> None:
        self.geoms.extend(geoms.tolist() if isinstance(geoms, np.ndarray) else geoms)
        self.layer.extend(layers)
        self.min_zoom.extend(min_zooms)
        self.props.extend(props)

    def __len__(self) -> int:
        return len(self.geoms)

    def counts(self) -> dict[str, int]:
        out = {name: 0 for name in schema.LAYERS}
        for i in self.layer:
            out[schema.LAYERS[i]] += 1
        return out


class _BoundaryRelations(osmium.SimpleHandler):
    def __init__(self):
        super().__init__()
        self.way_level: dict[int, int] = {}
        self.kept: list = []  # (id, tags, members) of the relations a patch reads (see boundary_relations)

    def relation(self, r):
        tags = r.tags
        if tags.get("type") in ("multipolygon", "boundary") or tags.get("boundary") == "administrative":
            self.kept.append((r.id, dict(tags), [(m.type, m.ref, m.role) for m in r.members]))
        if tags.get("boundary") != "administrative":
            return
        level = schema.admin_level(tags)
        if level is None:
            return
        for m in r.members:
            if m.type == "w":
                old = self.way_level.get(m.ref)
                if old is None or level < old:
                    self.way_level[m.ref] = level


def boundary_way_levels(osm_path) -> dict[int, int]:
    """The lowest admin level of the boundary relations each way is a member of (a relations-only pass)."""
    return boundary_relations(osm_path)[0]


def boundary_relations(osm_path) -> tuple[dict[int, int], list]:
    """boundary_way_levels, and (id, tags, members (type, ref, role)) of every relation osmium may make an
    area of (type multipolygon or boundary) or that gives ways a boundary level: what a patch of the
    tile stage needs to make their features again (geoengine.tiles.kept). One relations-only pass."""
    rel = _BoundaryRelations()
    rel.apply_file(str(osm_path), filters=[osmium.filter.EntityFilter(osmium.osm.RELATION)])
    return rel.way_level, rel.kept


def read_tags(obj) -> dict[str, str]:
    """An osmium object's tags as a dict: osmtags.tag_dict without pyosmium's Python TagList and
    iterator wrappers (two Python calls a tag fewer), when the object exposes its C++ accessors."""
    d = getattr(obj, "_pyosmium_data", None)
    if d is None:
        return tag_dict(obj.tags)
    it = d.tags_begin()
    nxt = d.tags_next
    out = {}
    for _ in range(d.tags_size()):
        k, v = nxt(it)
        out[k] = v
    return out


def _ring(nodes) -> np.ndarray:
    return np.array([(n.lon, n.lat) for n in nodes], dtype=np.float64)


def _merc_coords(lonlat: np.ndarray) -> np.ndarray:
    x, y = lonlat_to_merc(lonlat[:, 0], lonlat[:, 1])
    return np.column_stack([x, y])


def _u32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Little-endian uint32 fields at byte offsets `at` of a uint8 buffer."""
    b = buf[at[:, None] + np.arange(4)].astype(np.int64)
    return b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)


def _merc_wkbs(wkbs: list[bytes]) -> list[bytes]:
    """osmium's WKB in lon/lat -> the same WKB in Mercator metres, projected as `_merc_coords` projects,
    so these are the bytes shapely.to_wkb writes of what shapely.transform makes. What osmium writes
    most (points, lines, areas of one polygon with one ring) is projected in place as bytes in one numpy
    pass; anything else goes through shapely."""
    n = len(wkbs)
    if n == 0:
        return []
    lens = np.fromiter(map(len, wkbs), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    joined = bytearray().join(wkbs)
    joined.extend(bytes(32))  # padding: the header fields are read past the end of short geometries
    buf = np.frombuffer(joined, dtype=np.uint8)  # writable, no copy
    order, kind, count = buf[starts], _u32(buf, starts + 1), _u32(buf, starts + 5)
    # (multi)polygon of 1 polygon: order, type 6, 1 | order, type 3, 1 ring | points, then the points
    ring = (kind == 6) & (count == 1) & (buf[starts + 9] == 1) & (_u32(buf, starts + 10) == 3) & \
        (_u32(buf, starts + 14) == 1)
    off = np.where(kind == 1, 5, np.where(kind == 2, 9, 22))
    pairs = np.where(kind == 1, 1, np.where(kind == 2, count, _u32(buf, starts + 18)))
    simple = (order == 1) & ((kind == 1) | (kind == 2) | ring) & (lens == off + 16 * pairs)
    # the bytes of every pair of those, in order: a mask from +1 at each run's start, -1 after its end
    first = (starts + off)[simple]
    edge = np.zeros(len(buf) + 1, dtype=np.int8)
    edge[first] = 1
    edge[first + 16 * pairs[simple]] = -1  # the next geometry's first byte: never a run's first
    coords = np.cumsum(edge[:-1], dtype=np.int8).view(bool)
    lonlat = buf[coords].view(np.float64).reshape(-1, 2)
    buf[coords] = np.ascontiguousarray(_merc_coords(lonlat)).view(np.uint8).ravel()
    data = buf.tobytes()
    out = [data[a:a + m] for a, m in zip(starts.tolist(), lens.tolist(), strict=True)]
    rest = np.flatnonzero(~simple).tolist()
    if rest:
        geoms = shapely.transform(shapely.from_wkb([wkbs[i] for i in rest]), _merc_coords)
        for i, w in zip(rest, shapely.to_wkb(geoms).tolist(), strict=True):
            out[i] = w
    return out


LAYER_INDEX = {name: i for i, name in enumerate(schema.LAYERS)}
# the object a feature comes from, as one int64: its OSM id << 2 | its type (OBJ_OTHER: the earth, the sea)
OBJ_NODE, OBJ_WAY, OBJ_RELATION, OBJ_OTHER = 0, 1, 2, 3
FLUSH = 4096  # objects per vectorised batch
_WAY_KEYS = (*schema.LINE_KEYS, "natural")  # natural=coastline


class _Collector(osmium.SimpleHandler):
    """Feature collection in batches. A callback only reads the tags (the schema's features and their
    properties) and takes osmium's WKB of the geometry in lon/lat, made in C++; every FLUSH objects the
    geometries are parsed, projected to Mercator and checked in vectorised calls and handed to the sink's
    `add_many` in callback order. Subclasses define the callbacks of one stream (points and lines, or
    areas), so each stream is one pass that can run in its own process (`geoengine.tiles.spool`)."""

    def __init__(self, sink, boundary_ways: dict[int, int]):
        super().__init__()
        self.sink = sink
        self.boundary_ways = boundary_ways
        self.factory = osmium.geom.WKBFactory()
        self._src: list = []  # per object: hex WKB (lon/lat) from osmium, or a shapely geometry (lon/lat)
        self._meta: list = []  # per object: ([(layer, min_zoom, props)], poi (layer, min_zoom, props) | None, coast)
        self._objs = array("q")  # per object: its code (OSM id << 2 | OBJ_NODE, OBJ_WAY or OBJ_RELATION)
        # the tags a feature-making callback read, per way (the ids, and an index into `tag_sets`): what a
        # patch needs to make an unchanged way's features again (geoengine.tiles.kept)
        self.way_ids = array("q")
        self.way_tag_set = array("q")
        self.tag_sets: dict = {}

    def _keep_tags(self, way_id: int, key) -> None:
        t = self.tag_sets.get(key)
        if t is None:
            t = self.tag_sets[key] = len(self.tag_sets)
        self.way_ids.append(way_id)
        self.way_tag_set.append(t)

    def _push(self, src, feats, poi=None, coast: bool = False, obj: int = -1) -> None:
        self._src.append(src)
        self._meta.append((feats, poi, coast))
        self._objs.append(obj)
        if len(self._src) >= FLUSH:
            self.flush()

    filters: tuple = ()  # osmium filters (C++) in front of the callbacks
    needs_boundaries = False  # reads boundary_ways (the admin level of boundary relations' member ways)

    def collect(self, osm_path) -> None:
        self.apply_file(str(osm_path), locations=True, idx=LOCATION_INDEX, filters=[f() for f in self.filters])
        self.flush()

    def _geometries(self, src: list) -> tuple[np.ndarray, list]:
        """Mercator geometries of a batch, and their WKB where it is known (None elsewhere): osmium's
        WKB is projected as bytes (`_merc_wkbs`) and parsed once, so the spool need not write it again."""
        geoms = np.empty(len(src), dtype=object)
        wkbs: list = [None] * len(src)
        is_hex = np.fromiter((isinstance(g, str) for g in src), dtype=bool, count=len(src))
        hexes = np.flatnonzero(is_hex).tolist()
        # GEOS's hex reader is about 8x slower than its binary one; bytes.fromhex costs little
        merc = self._unwrap(_merc_wkbs([bytes.fromhex(src[i]) for i in hexes]))
        if hexes:
            geoms[hexes] = shapely.from_wkb(merc)
            for i, b in zip(hexes, merc, strict=True):
                wkbs[i] = b
        other = np.flatnonzero(~is_hex)
        if len(other):
            geoms[other] = shapely.transform(np.array([src[i] for i in other.tolist()], dtype=object), _merc_coords)
        return geoms, wkbs

    def _unwrap(self, wkbs: list[bytes]) -> list[bytes]:
        return wkbs

    def _fix(self, geoms: np.ndarray, wkbs: list, meta: list) -> np.ndarray:
        return geoms

    def flush(self) -> None:
        if not self._src:
            return
        src, meta, objs = self._src, self._meta, self._objs
        self._src, self._meta, self._objs = [], [], array("q")
        geoms, wkbs = self._geometries(src)
        geoms = self._fix(geoms, wkbs, meta)
        out_g, out_l, out_z, out_p, out_w, out_o = [], [], [], [], [], []
        pois = _points_on_surface(geoms, meta)
        for i, (feats, poi, coast) in enumerate(meta):
            g = geoms[i]
            if g is None:
                continue
            if coast:
                self.sink.coastlines.extend(shapely.get_parts(g).tolist())
            w = wkbs[i]
            o = objs[i]
            for layer, mz, props in feats:
                out_g.append(g)
                out_l.append(layer)
                out_z.append(mz)
                out_p.append(props)
                out_w.append(w)
                out_o.append(o)
            if poi is not None:
                out_g.append(pois[i])
                out_l.append(poi[0])
                out_z.append(poi[1])
                out_p.append(poi[2])
                out_w.append(None)
                out_o.append(o)
        if out_g:
            arr = np.empty(len(out_g), dtype=object)
            arr[:] = out_g
            self.sink.add_many(arr, out_l, out_z, out_p, out_w, out_o)


def _entry(feat: schema.Feature, tags) -> tuple[int, int, dict]:
    return LAYER_INDEX[feat.layer], feat.min_zoom, schema.properties(feat, tags)


def _points_on_surface(geoms: np.ndarray, meta: list) -> dict[int, object]:
    idx = [i for i, m in enumerate(meta) if m[1] is not None and geoms[i] is not None]
    if not idx:
        return {}
    return dict(zip(idx, shapely.point_on_surface(geoms[idx]).tolist(), strict=True))


class _PointsAndLines(_Collector):
    """Tagged nodes as points; ways as lines (and coastlines, and boundary relations' member ways)."""

    needs_boundaries = True

    def __init__(self, sink, boundary_ways: dict[int, int]):
        super().__init__(sink, boundary_ways)
        self._idle_tags: set[tuple[str, str]] = set()  # one-tag nodes' (key, value) that make no feature
        self._kinds: dict[tuple, tuple] = {}  # ways: see _classify

    # Filtered in C++: only nodes with a key that schema.node_features reads (a place, a POI key, a house
    # number) reach Python (not untagged nodes, most of an extract, nor e.g. crossings or street lamps;
    # the others still give ways their locations), and only ways with a key of _WAY_KEYS (not two in
    # three ways of an extract: buildings, areas, multipolygon rings). The ways dropped reach
    # `_BoundaryMembers`, which only looks their id up among the boundary relations' member ways; both
    # are called in file order.
    filters = (lambda: osmium.filter.KeyFilter(*schema.NODE_KEYS).enable_for(osmium.osm.NODE),
               lambda: osmium.filter.KeyFilter(*_WAY_KEYS).enable_for(osmium.osm.WAY))

    def collect(self, osm_path) -> None:
        # The way filter stands in front of the node-location handler, so the ways it drops (two in three)
        # get no location lookups; the few of them that boundary relations hold take their locations from
        # the index in Python (`_BoundaryMembers`). Nodes pass it untouched, and the node filter stands
        # behind the handler, which must store every node's location.
        nodes, ways = (f() for f in self.filters)
        store = osmium.index.create_map(LOCATION_INDEX)
        lh = osmium.NodeLocationsForWays(store)
        lh.ignore_errors()
        with osmium.io.Reader(str(osm_path), osmium.osm.NODE | osmium.osm.WAY) as reader:
            it = osmium.OsmFileIterator(reader, ways, lh, nodes, self)
            it.set_filtered_handler(_BoundaryMembers(self, store))
            for _ in it:  # the callbacks do the work
                pass
        self.flush()

    _IDLE_CAP = 65536  # one-tag (key, value) pairs remembered as idle: free-text values must not grow it

    def node(self, n):
        d = getattr(n, "_pyosmium_data", None)
        if d is not None and d.tags_size() == 1:
            # Most nodes past the key filter have one tag and no feature (natural=tree): whether a tag
            # makes nothing is decided once (schema.node_features reads only the tags), then each such
            # node costs a C++ lookup and a set test, without a dict or the schema's walk.
            v = d.tags_get_value_by_key("natural", None)
            tag = ("natural", v) if v is not None else tuple(d.tags_next(d.tags_begin()))
            if tag in self._idle_tags:
                return
            tags = {tag[0]: tag[1]}
            feats = schema.node_features(tags)
            if not feats:
                if len(self._idle_tags) < self._IDLE_CAP:
                    self._idle_tags.add(tag)
                return
        else:
            tags = read_tags(n)
            feats = schema.node_features(tags)
        if feats:
            self._push(self.factory.create_point(n), [_entry(f, tags) for f in feats], obj=(n.id << 2) | OBJ_NODE)

    def way(self, w, level=None, store=None):
        """A way's line; `store` (a node-location index) when the way's nodes carry no locations."""
        wid = w._pyosmium_data.id()  # (w.id: a Python property around it)
        if level is None:
            level = self.boundary_ways.get(wid)
        tags = read_tags(w)
        key = (level, *[kv for kv in tags.items() if kv[0] in schema.WAY_READ_KEYS])
        self._keep_tags(wid, key[1:])
        hit = self._kinds.get(key)
        if hit is None:
            hit = self._classify(tags, level, key)
        entries, coast = hit
        if not entries and not coast:
            return
        locs = None if store is None else [_location(store, n.ref) for n in w.nodes]
        try:
            src = self.factory.create_linestring(w) if locs is None else _linestring(locs)
        except (osmium.InvalidLocationError, RuntimeError):
            src = self._runs(w, locs)  # nodes without a location (a clipped extract), or fewer than 2 points
            if src is None:
                return
        self._push(src, entries, coast=coast, obj=(wid << 2) | OBJ_WAY)

    _KINDS_CAP = 16384  # tag sets remembered (named ways' are not; refs, free text must not grow it)

    def _classify(self, tags: dict, level: int | None, key: tuple) -> tuple[list, bool]:
        """A way's entries (its line feature's, or none) and whether it is a coastline, remembered under
        `key` (its boundary level and its tags with a key of schema.WAY_READ_KEYS): roads repeat a few
        tag sets, so the schema's walk and the properties dict are made once per set and shared."""
        coast = tags.get("natural") == "coastline"
        feat = schema.line_feature(tags)
        if feat is None and level is not None:
            feat = schema.boundary_feature(tags, level)
        elif feat is not None and feat.layer == "boundaries" and level is not None:
            feat = schema.boundary_feature(tags, min(level, schema.admin_level(tags) or level))
        # boundary member ways carry the names of roads/rivers, not of the boundary
        entries = [] if feat is None else [_entry(feat, {} if feat.layer == "boundaries" else tags)]
        hit = (entries, coast)
        if not tags.get("name") and len(self._kinds) < self._KINDS_CAP:  # a name: few ways share it
            self._kinds[key] = hit
        return hit

    def _runs(self, w, locs=None):
        """Runs of two or more consecutive located nodes, as a (multi)line in lon/lat."""
        runs, cur = [], []
        missing = False
        for loc in (n.location for n in w.nodes) if locs is None else locs:
            if loc.valid():
                cur.append((loc.lon, loc.lat))
            else:
                missing = True
                if len(cur) >= 2:
                    runs.append(cur)
                cur = []
        if len(cur) >= 2:
            runs.append(cur)
        ids = getattr(self.sink, "way_flags", None)  # (a spool: which ways were counted, for a patch)
        if not runs:
            self.sink.skipped_ways += 1
            if ids is not None:
                ids.append((w.id << 1) | 1)
            return None
        if missing:
            self.sink.partial_ways += 1
            if ids is not None:
                ids.append(w.id << 1)
        lines = [shapely.linestrings(np.asarray(r, dtype=np.float64)) for r in runs]
        return lines[0] if len(lines) == 1 else shapely.multilinestrings(lines)


def _location(store, ref: int) -> osmium.osm.Location:
    """A node's location from the index, or an invalid one (as osmium leaves a node it has not seen)."""
    try:
        return store.get(ref)
    except KeyError:
        return osmium.osm.Location()


def _linestring(locs: list) -> shapely.LineString:
    """What osmium's create_linestring makes of a way whose nodes have these locations (lon/lat): repeated
    consecutive locations once; InvalidLocationError at a node without a location after the first
    kept one (osmium compares each location with the last one kept, which starts invalid, so leading
    nodes without a location are passed over); RuntimeError for fewer than 2 points."""
    pts, last = [], osmium.osm.Location()
    for loc in locs:
        if loc != last:
            last = loc
            if not loc.valid():
                raise osmium.InvalidLocationError("invalid location")
            pts.append((loc.lon, loc.lat))
    if len(pts) < 2:
        raise RuntimeError("need at least two points for linestring")
    return shapely.linestrings(np.asarray(pts, dtype=np.float64))


class _BoundaryMembers:
    """The handler for ways without a key of _WAY_KEYS: boundary relations' member ways are lines, their
    nodes' locations read from the index (the way filter stands in front of osmium's location handler)."""

    def __init__(self, collector: _PointsAndLines, store):
        self.levels = collector.boundary_ways
        self.collector = collector
        self.store = store

    def way(self, w):
        level = self.levels.get(w._pyosmium_data.id())  # two in three ways of an extract: no wrapper call
        if level is not None:
            self.collector.way(w, level, self.store)


class _Areas(_Collector):
    """Closed ways and multipolygon relations as polygons (osmium's area assembly), and named areas'
    POIs at a point on their surface."""

    _KINDS_CAP = 16384  # tag sets remembered (named areas' are not; heights, free text must not grow it)

    def __init__(self, sink, boundary_ways: dict[int, int]):
        super().__init__(sink, boundary_ways)
        # an area's tags with a key of schema.AREA_KEYS (or its one tag) -> its entries (layer, min zoom,
        # properties) and its POI's: most areas repeat a few tag sets (building=yes: 8 in 10 areas of
        # Liechtenstein have one tag), so the schema's walk, the Feature tuples and the properties dicts
        # are made once per tag set; the dicts are then shared, so a spool batch pickles each once
        self._kinds: dict[tuple, tuple] = {}

    def area(self, a):
        d = getattr(a, "_pyosmium_data", None)
        aid = d.id() if d is not None else a.id  # 2 * the way's id, or 2 * the relation's + 1
        if d is not None and d.tags_size() == 1:
            key = d.tags_next(d.tags_begin())  # (key, value): no dict
            hit = self._kinds.get(key)
            if hit is None:
                hit = self._classify({key[0]: key[1]}, key)
            kept = (key,)
        else:
            tags = read_tags(a)
            key = tuple([kv for kv in tags.items() if kv[0] in schema.AREA_KEYS])
            hit = self._kinds.get(key)
            if hit is None:
                hit = self._classify(tags, key)
            kept = key
        if not aid & 1:
            self._keep_tags(aid >> 1, kept)
        feats, poi = hit
        if not feats and poi is None:
            return
        try:
            src = self.factory.create_multipolygon(a)
        except (osmium.InvalidLocationError, RuntimeError):
            src = _area_polygons(a)
            if src is None:
                return
        self._push(src, feats, poi, obj=((aid >> 1) << 2) | (OBJ_RELATION if aid & 1 else OBJ_WAY))

    def _classify(self, tags: dict, key: tuple) -> tuple[list, tuple | None]:
        """An area's entries and its POI's entry (or None) from its tags, remembered under `key`."""
        name = tags.get("name")
        poi = schema.poi_feature(tags, is_area=True) if name else None
        hit = ([_entry(f, tags) for f in schema.area_features(tags)], None if poi is None else _entry(poi, tags))
        if not name and len(self._kinds) < self._KINDS_CAP:  # a name is nearly always one area's
            self._kinds[key] = hit
        return hit

    def _unwrap(self, wkbs: list[bytes]) -> list[bytes]:
        """A multipolygon of one polygon (most areas) becomes that polygon, as bytes before it is parsed:
        the polygon's WKB follows the multipolygon's order, type and count (osmium writes little-endian)."""
        return [w[9:] if w[:9] == _ONE_POLYGON else w for w in wkbs]

    def _fix(self, geoms: np.ndarray, wkbs: list, meta: list) -> np.ndarray:
        # one polygon stays a Polygon (osmium's WKB: unwrapped as bytes; others: here); an invalid one
        # (rings touching after projection) is made valid
        other = np.flatnonzero(np.fromiter((w is None for w in wkbs), dtype=bool, count=len(wkbs)))
        single = other[(shapely.get_type_id(geoms[other]) == 6) & (shapely.get_num_geometries(geoms[other]) == 1)]
        if len(single):
            geoms[single] = shapely.get_geometry(geoms[single], 0)
        return make_areas_valid(geoms, wkbs)


def make_areas_valid(geoms: np.ndarray, wkbs: list) -> np.ndarray:
    """`geoms` with each invalid area made valid in place (its polygonal parts; None when nothing is left),
    and its WKB in `wkbs` set to None (to be written again from the new geometry)."""
    for i in np.flatnonzero(~shapely.is_valid(geoms)).tolist():
        g = shapely.make_valid(geoms[i])
        g = shapely.union_all([p for p in shapely.get_parts(g) if p.geom_type in ("Polygon", "MultiPolygon")])
        geoms[i] = None if g.is_empty else g
        wkbs[i] = None
    return geoms


def _area_polygons(a):
    """An area osmium cannot write as WKB, from its rings (rings of fewer than 4 points left out)."""
    polys = []
    for outer in a.outer_rings():
        shell = _ring(outer)
        holes = [_ring(inner) for inner in a.inner_rings(outer)]
        if len(shell) < 4:
            continue
        polys.append(shapely.Polygon(shell, [h for h in holes if len(h) >= 4]))
    if not polys:
        return None
    return polys[0] if len(polys) == 1 else shapely.MultiPolygon(polys)


_ONE_POLYGON = bytes([1, 6, 0, 0, 0, 1, 0, 0, 0])  # little-endian, multipolygon, 1 polygon
STREAMS = (_PointsAndLines, _Areas)  # collection order: every point and line, then every area


def split_land_sea(coastlines: list, box) -> tuple[object, object] | None:
    """(land, sea) polygons of `box` cut by coastlines (OSM: land on the left of a coastline way), or
    None when the coastlines do not divide the box (then the whole box stays land)."""
    merged = shapely.line_merge(shapely.union_all(coastlines))
    # A clipped extract leaves coastlines ending inside the box: extend each open end straight to the
    # nearest point of the box's edge so that the coastline divides the box.
    edge = box.boundary
    extended = []
    for g in shapely.get_parts(merged):
        c = shapely.get_coordinates(g)
        if len(c) < 2:
            continue
        if not g.is_closed:
            head, tail = shapely.Point(c[0]), shapely.Point(c[-1])
            if head.distance(edge) > 1e-6 and box.contains(head):
                c = np.vstack([shapely.get_coordinates(edge.interpolate(edge.project(head))), c])
            if tail.distance(edge) > 1e-6 and box.contains(tail):
                c = np.vstack([c, shapely.get_coordinates(edge.interpolate(edge.project(tail)))])
        extended.append(shapely.linestrings(c))
    if not extended:
        return None
    merged = shapely.line_merge(shapely.union_all(extended))
    cut = shapely.intersection(merged, box)
    if cut.is_empty:
        return None
    faces = [f for f in shapely.get_parts(shapely.polygonize([shapely.union(cut, box.boundary)]))
             if f.area > 0]
    if len(faces) < 2:
        return None
    lines = [g for g in shapely.get_parts(merged) if g.length > 0]
    land, sea = [], []
    for face in faces:
        p = shapely.point_on_surface(face)
        line = min(lines, key=lambda g: g.distance(p))
        d = line.project(p)
        a = line.interpolate(max(d - 1.0, 0.0))
        b = line.interpolate(min(d + 1.0, line.length))
        q = line.interpolate(d)
        cross = (b.x - a.x) * (p.y - q.y) - (b.y - a.y) * (p.x - q.x)
        (land if cross > 0 else sea).append(face)
    if not land or not sea:
        return None
    return shapely.union_all(land), shapely.union_all(sea)


def collect(osm_path, bbox=None) -> FeatureSet:
    """Read the extract and return its features. `bbox` (lon/lat) adds the `earth` polygon: the box,
    less the sea when coastlines divide it (the sea then becomes an `ocean` polygon in `water`)."""
    way_level = boundary_way_levels(osm_path)
    fs = FeatureSet()
    box = None
    if bbox is not None:
        x0, y0 = lonlat_to_merc(bbox[0], bbox[1])
        x1, y1 = lonlat_to_merc(bbox[2], bbox[3])
        box = shapely.box(float(x0), float(y0), float(x1), float(y1))
        fs.add(box, schema.Feature("earth", "earth", 0), {})
    for stream in STREAMS:
        stream(fs, way_level).collect(osm_path)
    if box is not None:
        clip_to_box(fs, box)
    if box is not None and fs.coastlines:
        split = split_land_sea(fs.coastlines, box)
        if split is not None:
            land, sea = split
            fs.geoms[0] = land
            fs.add(sea, schema.Feature("water", "ocean", 0, "ocean"), {})
    return fs


def clip_to_box(fs: FeatureSet, box) -> None:
    """Clip every feature to the extract's box (the land the `earth` layer draws), in place, and drop
    those left empty. Relation members and ways reach past the extract's bounds (Andorra's reach 41.7N):
    unclipped, forest and rivers would be drawn past the land onto the background."""
    if not fs.geoms:
        return
    geoms = np.array(fs.geoms, dtype=object)
    x0, y0, x1, y1 = box.bounds
    inside = shapely.contains_properly(box, geoms)  # most features: left as they are
    out = np.flatnonzero(~inside)
    if len(out) == 0:
        return
    dims = shapely.get_dimensions(geoms[out])
    clipped = shapely.clip_by_rect(geoms[out], x0, y0, x1, y1)
    keep = np.ones(len(geoms), dtype=bool)
    keep[out] = ~shapely.is_empty(clipped)
    # Only features crossing the box's edge get here; a polygon along the edge may leave a line too.
    for i in np.flatnonzero(keep[out] & (shapely.get_type_id(clipped) == 7)).tolist():
        parts = [p for p in shapely.get_parts(clipped[i]) if shapely.get_dimensions(p) == dims[i]]
        if not parts:
            keep[out[i]] = False
        elif dims[i] == 2:
            clipped[i] = shapely.union_all(parts)
        elif dims[i] == 1:
            clipped[i] = shapely.multilinestrings([q for p in parts for q in shapely.get_parts(p)])
        else:
            clipped[i] = shapely.multipoints(parts)
    geoms[out] = clipped
    idx = np.flatnonzero(keep)
    fs.geoms = geoms[idx].tolist()
    fs.layer = [fs.layer[i] for i in idx.tolist()]
    fs.min_zoom = [fs.min_zoom[i] for i in idx.tolist()]
    fs.props = [fs.props[i] for i in idx.tolist()]
