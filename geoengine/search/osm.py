"""Search documents from an OSM extract (pyosmium): places, POIs, named streets, addresses, and the
administrative boundaries used to build display names.

Ways get the mean of their node locations as `location`; relations (multipolygons, boundaries) go
through osmium's area assembler and get the centroid of the assembled polygon. Boundary relations the
assembler leaves out (a member missing from a clipped extract) are built from the closed rings of their
member ways present, and closed ways tagged boundary=administrative are boundaries too, as osm2pgsql
reads them for Nominatim. Street ways are
returned one per way with their geometry; `documents.py` merges them per street per locality.
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass

import numpy as np
import osmium
import shapely

from geoengine.bundler.locations import LOCATION_INDEX
from geoengine.osmtags import tag_dict
from geoengine.search.docset import DocSet, TextColumn
from geoengine.search.parents import rank30

PLACE_IMPORTANCE = {
    "country": 0.9, "state": 0.75, "region": 0.7, "province": 0.7, "county": 0.6, "city": 0.7,
    "municipality": 0.55, "borough": 0.5, "town": 0.55, "village": 0.45, "suburb": 0.4, "quarter": 0.35,
    "island": 0.4, "hamlet": 0.3, "neighbourhood": 0.3, "locality": 0.2, "isolated_dwelling": 0.2,
    "farm": 0.15, "islet": 0.2, "square": 0.25, "city_block": 0.15, "plot": 0.1,
}
LOCALITY_PLACES = ("city", "town", "village", "hamlet", "suburb", "municipality", "borough")
POI_KEYS = ("amenity", "shop", "tourism", "leisure", "historic", "office", "craft", "healthcare",
            "sport", "emergency", "club", "aerialway", "aeroway", "man_made", "natural", "waterway",
            "public_transport", "railway", "building", "landuse")
POI_KEY_SET = frozenset(POI_KEYS)
# keys that make a POI only with one of these values (otherwise they are too generic)
POI_VALUES = {
    "public_transport": {"station"},
    "railway": {"station", "halt", "tram_stop"},
    "aeroway": {"aerodrome", "heliport", "terminal"},
    "aerialway": {"station"},
    "natural": {"peak", "volcano", "saddle", "glacier", "water", "spring", "cave_entrance", "lake", "wood", "valley"},
    "waterway": {"waterfall", "river", "dam"},
    "man_made": {"tower", "lighthouse", "bridge", "dam", "observatory"},
    "building": {"church", "cathedral", "chapel", "hotel", "museum", "school", "hospital", "castle", "stadium", "train_station"},
    "landuse": {"cemetery", "winter_sports", "recreation_ground"},
}
STREET_HIGHWAYS = {
    "motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential", "living_street",
    "pedestrian", "service", "road", "track", "footway", "path", "cycleway", "steps", "motorway_link",
    "trunk_link", "primary_link", "secondary_link", "tertiary_link", "bridleway",
}
STREET_IMPORTANCE = {"motorway": 0.3, "trunk": 0.3, "primary": 0.28, "secondary": 0.25, "tertiary": 0.22}
OSM_TYPES = {"n": "node", "w": "way", "r": "relation"}
# tags kept for the full place details (/search/detail), besides every name and addr:* tag
DETAIL_TAGS = ("opening_hours", "phone", "contact:phone", "mobile", "contact:mobile", "website", "contact:website", "url",
               "email", "contact:email", "wheelchair", "cuisine", "operator", "brand", "ele", "population", "wikipedia",
               "wikidata", "fee", "access", "capacity", "stars", "internet_access", "level", "description", "denomination",
               "religion", "diet:vegetarian", "diet:vegan", "takeaway", "delivery", "outdoor_seating", "smoking",
               "fuel:diesel", "fuel:octane_95", "healthcare", "dispensing", "emergency", "surface", "maxspeed", "lanes",
               "oneway", "ref", "start_date", "heritage")
NAME_KEYS_EXTRA = ("alt_name", "old_name", "short_name", "official_name", "loc_name", "int_name", "reg_name")
NAME_KEY_SET = frozenset(("name", *NAME_KEYS_EXTRA))
NAME_PREFIXES = ("name:", *(e + ":" for e in NAME_KEYS_EXTRA))  # name:xx, alt_name:xx, ...


def is_name_key(k: str) -> bool:
    """name, name:xx, alt_name, alt_name:xx, ... (one set lookup and one startswith of a tuple)."""
    return k in NAME_KEY_SET or k.startswith(NAME_PREFIXES)


@dataclass(slots=True)
class OsmDoc:
    id: str
    index: str  # places | pois | streets | addresses
    doc_type: str  # place | poi
    name: str
    name_en: str | None
    names: list[str]  # every name variant used for matching
    place_class: str | None
    category: str | None
    importance: float
    lat: float
    lon: float
    osm_type: str  # n | w | r
    categories: list[str] | tuple = ()  # preset ids (geoengine.search.categories)
    detail: str = "{}"  # JSON of names, address, tags for /search/detail


DETAIL_ORDER = {k: i for i, k in enumerate(DETAIL_TAGS)}


def detail_of(tags: dict) -> dict:
    """Names (name, name:xx, alt_name, ...), address parts (addr:*) and the useful tags of an object."""
    names, address, keep = _scan(tags)
    return {"names": names, "address": address, "tags": keep}


def _scan(tags: dict) -> tuple[dict, dict, dict]:
    """(names, address parts, kept tags) of `detail_of` in one pass over the tags: names and address parts
    in the tags' order, kept tags in DETAIL_TAGS' order."""
    names, address, keep = {}, {}, []
    for k, v in tags.items():
        if k in NAME_KEY_SET or k.startswith(NAME_PREFIXES):
            names[k] = v
        elif k.startswith("addr:"):
            address[k[5:]] = v
        elif k in DETAIL_ORDER:
            keep.append(k)
    if len(keep) > 1:
        keep.sort(key=DETAIL_ORDER.__getitem__)
    return names, address, {k: tags[k] for k in keep}


def _variants(names: dict) -> list[str]:
    """`name_variants` of the names `_scan` found (every `;`-separated part once, in order)."""
    out: list[str] = []
    for v in names.values():
        for part in v.split(";") if ";" in v else (v,):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


_MATCHER = None


def categories_of(tags: dict) -> list[str]:
    """The search categories (iD preset ids) of a POI's tags."""
    global _MATCHER
    if _MATCHER is None:
        from geoengine.search.categories import TagMatcher

        _MATCHER = TagMatcher(POI_KEYS)
    return _MATCHER(tags)


@dataclass
class Boundary:
    name: str
    admin_level: int  # 0 for a postal_code boundary
    geom: object  # shapely geometry
    country_code: str | None = None  # ISO 3166-1 alpha-2 of an admin_level 2 boundary
    osm_id: int = 0  # the relation (or, osm_type "w", the closed way)
    names: dict | None = None  # name and name:xx
    place: str | None = None  # its own place=* tag
    postcode: str | None = None  # a postal_code boundary's code
    row: int = -1  # its document's row (-1: none; while reading, -2 - k: the k-th area document, _Handler.adocs)
    osm_type: str = "r"  # "w": a closed way tagged as the boundary (Autaugaville in Nominatim's test extract)
    country_hint: str | None = None  # the country its tags name (ISO3166-1/-2, is_in:country_code), upper case


def makes_records(tags: dict) -> bool:
    """Whether a relation's tags may make a record of the read (a boundary, or an area `area` keeps): those
    whose member ways' node refs are kept for updates (search/records.py)."""
    return (tags.get("boundary") in ("administrative", "postal_code") or "name" in tags or "addr:housenumber" in tags
            or not POI_KEY_SET.isdisjoint(tags))


def country_hint(tags: dict) -> str | None:
    """The ISO 3166-1 alpha-2 code of the country a boundary's tags name: its own ISO3166-1 code, the prefix
    of its ISO3166-2 code (ES-CT: ES), else is_in:country_code / country_code / addr:country."""
    for key in ("ISO3166-1:alpha2", "ISO3166-1", "ISO3166-2", "ref:ISO-3166-2", "is_in:country_code", "country_code",
                "addr:country"):
        v = (tags.get(key) or "").strip()
        if key.endswith("-2"):
            v = v.split("-", 1)[0] if "-" in v else ""
        if len(v) == 2 and v.isascii() and v.isalpha():
            return v.upper()
    return None


def name_variants(tags: dict) -> list[str]:
    return _variants({k: v for k, v in tags.items() if is_name_key(k)})


def _wiki_bonus(tags: dict) -> float:
    return 0.05 * (("wikipedia" in tags) + ("wikidata" in tags))


def _population_bonus(tags: dict) -> float:
    try:
        pop = float(str(tags.get("population", "")).replace(",", "").replace(" ", ""))
    except ValueError:
        return 0.0
    return min(0.15, 0.03 * max(0.0, np.log10(pop + 1) - 2)) if pop > 0 else 0.0


def classify(tags: dict) -> tuple[str, str, str | None, str | None, float] | None:
    """(index, doc_type, place_class, category, importance) of a named object, or None."""
    place = tags.get("place")
    if place and place in PLACE_IMPORTANCE:
        imp = PLACE_IMPORTANCE[place] + _wiki_bonus(tags) + _population_bonus(tags)
        return "places", "place", place, None, min(imp, 1.0)
    present = POI_KEY_SET.intersection(tags)
    if not present:
        return None
    for key in POI_KEYS if len(present) > 1 else present:  # (in POI_KEYS' order)
        val = tags.get(key)
        if not val or val in ("no", "yes") and key not in ("historic", "tourism", "office", "craft", "club", "shop"):
            continue
        allowed = POI_VALUES.get(key)
        if allowed is not None and val not in allowed:
            continue
        imp = 0.15 + _wiki_bonus(tags)
        if key == "tourism" and val in ("attraction", "museum", "viewpoint"):
            imp += 0.05
        if key in ("aeroway", "railway", "public_transport", "natural"):
            imp += 0.05
        return "pois", "poi", key, val, min(imp, 1.0)
    return None


# "addr:postcode", "postal_code": objects that carry a postcode and make no document (a residential landuse)
# still place their postcode's centre, as in Nominatim's location_postcodes
DOC_KEYS = ("name", "ref", "addr:housenumber", "addr:interpolation", "addr:postcode", "postal_code", *POI_KEYS)
# Nominatim's address label of a boundary=administrative by admin_level (ADMIN_LABELS of rank // 2)
ADMIN_KEYS = {2: "country", 3: "region", 4: "state", 5: "state_district", 6: "county", 7: "municipality", 8: "city",
              9: "city_district", 10: "suburb", 11: "neighbourhood", 12: "city_block"}
ADMIN_IMPORTANCE = {2: 0.9, 3: 0.7, 4: 0.75, 5: 0.55, 6: 0.6, 7: 0.5, 8: 0.5, 9: 0.4, 10: 0.35, 11: 0.3, 12: 0.25}


def address_fields(tags: dict) -> dict:
    """The addr:* fields every document keeps as columns (None when absent)."""
    return {"housenumber": tags.get("addr:housenumber"), "street": tags.get("addr:street"),
            "addr_place": tags.get("addr:place"), "postcode": own_postcode(tags)}


def own_postcode(tags: dict) -> str | None:
    """An object's own postcode: addr:postcode, else postal_code (a place node's, as Nominatim reads it)."""
    return tags.get("addr:postcode") or tags.get("postal_code")


def osm_tag(tags: dict, index: str, place_class: str | None, category: str | None, osm_type: str) -> str:
    """`key=value` of the tag that makes the document (Nominatim's class and type)."""
    if index == "places":
        return f"place={place_class}"
    if index == "pois":
        return f"{place_class}={category}"
    b = tags.get("building")
    return f"building={b}" if osm_type != "n" and b else "place=house"
  # a node or way without any of these is no document


# json.dumps with these options builds an encoder a call; one encoder writes the same text. Its `encode`
# makes a C encoder a call again: the C encoder it makes (no circular-reference markers) is made once here
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_C_ENCODER = (json.encoder.c_make_encoder(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
              if json.encoder.c_make_encoder is not None else None)


def _json(d) -> str:
    if _C_ENCODER is None or isinstance(d, str):
        return _ENCODER.encode(d)
    return "".join(_C_ENCODER(d, 0))


def _only_tag(d, likely: str) -> tuple[str, str]:
    """(key, value) of the one tag of pyosmium's C++ object `d`: one lookup when its key is `likely`, else
    the tag iterator (whose Tag is a Python namedtuple made a call)."""
    v = d.tags_get_value_by_key(likely, None)
    return (likely, v) if v is not None else tuple(d.tags_next(d.tags_begin()))


def _tags_of(obj) -> dict[str, str]:
    """dict(obj.tags) of a pyosmium object, read from its C++ object (`_pyosmium_data`, pyosmium 4): the
    Python TagList and TagIterator wrappers around it cost two Python calls a tag; else geoengine's tag_dict."""
    try:
        d = obj._pyosmium_data
    except AttributeError:
        return tag_dict(obj.tags)
    nxt, it = d.tags_next, d.tags_begin()
    out = {}
    for _ in range(d.tags_size()):
        k, v = nxt(it)
        out[k] = v
    return out


def mean_xy(arr: np.ndarray) -> np.ndarray:
    """arr.mean(axis=0) of a (k, 2) array, the same sum and division without np.mean's Python overhead."""
    return np.add.reduce(arr, 0) / len(arr)


def mean_1d(col: np.ndarray) -> float:
    """float(col.mean()) of a 1-d array (a strided column), the same pairwise sum and division."""
    return float(np.add.reduce(col)) / len(col)


_WKB = osmium.geom.WKBFactory()
_ALL_NODES = osmium.geom.use_nodes.ALL


def way_xy(w) -> np.ndarray:
    """(k, 2) float64 lon/lat of a way's nodes that have a location, in way order, repeated nodes kept:
    libosmium writes them as a WKB linestring (little-endian header of 9 bytes, then the coordinates), about
    3x cheaper than reading each node from Python; a way with a node without location (a clipped extract) or
    of one node (no linestring) is read node by node."""
    try:
        wkb = bytes.fromhex(_WKB.create_linestring(w, use_nodes=_ALL_NODES))
    except Exception:  # osmium.InvalidLocationError, a geometry error of fewer than two nodes
        wkb = b""
    if wkb[:5] == b"\x01\x02\x00\x00\x00":
        return np.frombuffer(wkb, np.float64, offset=9).reshape(-1, 2)
    return np.asarray([(nd.lon, nd.lat) for nd in w.nodes if nd.location.valid()], np.float64).reshape(-1, 2)


class _Handler:
    """The documents of an extract. A way's node locations are read only when it makes a document; a
    document's detail is kept as its JSON text (a dict per document costs several times its text)."""

    def __init__(self, part: str | None = None):
        # None: the whole extract; "nodes": the node documents and the named street ways (the forked reader of
        # read_osm); "rest": every other way, the areas and relations (read_osm's own process)
        self.part = part
        self.docs = DocSet()  # the documents of nodes and ways (not streets), in file order
        # the documents of assembled areas (relations, closed boundary ways): after the read they follow the way
        # documents, closed ways' then relations', each by id (`finish_areas`). libosmium hands areas out in
        # buffers flushed by their size (buildings' areas fill them), so the order they come in depends on
        # every area of the extract; sorted, a document's row follows from its own object (search/records.py)
        self.adocs = DocSet()
        self.ashape_row = array("q")  # the area documents' shapes (`_shape`), rows of adocs
        self.ashape_closed = array("b")
        self.ashape_box = array("d")
        self.ashape_len = array("d")
        self.unassembled_ids: list[int] = []  # the boundary relations `unassembled_boundaries` built
        # kept for `geoengine update` (search/records.py): the tags and node refs of every tagged way this
        # process's `way` handles (ways that make a record, or may after a change); the relations the area
        # assembler or `relation` reads (multipolygons, boundaries): tags and members; the node refs of
        # their member ways (`member_way`)
        self.keep_ways: str | None = None  # where the kept ways go: `{keep_ways}-{part}.osm.pbf` (read_osm)
        self.ways_out = None  # its osmium writer during the main pass
        self.kept_files: list[str] = []  # the names of the files written
        self.wrec_id = array("q")  # the ways that make a record (their tags alone decide)
        self.rel_id = array("q")
        self.rel_tags = TextColumn()
        self.rel_ends = array("q", [0])
        self.rel_rec = array("b")  # 1: its tags may make a record (`makes_records`)
        self.rel_mtype = array("b")  # 0 node, 1 way, 2 relation
        self.rel_mref = array("q")
        self.rel_mrole: list[str] = []
        self.tracked_members: set[int] = set()  # member way ids of those relations that may make a record
        self.streets = StreetWays()
        self.boundaries: list[Boundary] = []
        self.wkb = osmium.geom.WKBFactory()
        self.interpolations = InterpolationWays()
        self.labels: dict[int, int] = {}  # boundary relation -> its label (else admin_centre) node
        # the nodes with a house number (for the ends of interpolation lines): node id, document row
        self.addr_node_id = array("q")
        self.addr_node_row = array("q")
        # boundary relations (first pass) and their member ways' geometries, for those the area assembler
        # does not assemble (a member missing from a clipped extract): relation id -> (tags, [(way id, role)])
        self.boundary_rels: dict[int, tuple[dict, list[tuple[int, str]]]] = {}
        self.boundary_members: set[int] = set()
        self.member_xy: dict[int, np.ndarray] = {}  # member way id -> (k, 2) lon/lat (only ways with every node)
        self.assembled: set[int] = set()  # boundary relations the area assembler made
        self.boundary_way_row: dict[int, int] = {}  # a closed boundary way that is a document itself -> its row
        # the postcodes of objects that make no document (lon, lat, code): centres of Nominatim's postcodes
        self.pc_xy = array("d")
        self.pc_code: list[str] = []
        self.pc_kind = array("b")  # the object each came from: 0 node, 1 way; its id
        self.pc_id = array("q")
        # the shape of the way and relation documents Nominatim ranks below 30 (parks, water, rivers): row,
        # closed (an area), bounding box, length in degrees (their postcode follows their geometry)
        self.shape_row = array("q")
        self.shape_closed = array("b")
        self.shape_box = array("d")
        self.shape_len = array("d")
        # the bounding box of every way document (Nominatim measures from an object's envelope)
        self.box_row = array("q")
        self.box = array("d")
        self.idle_tags: dict[tuple[str, str], bool] = {}  # single tags that make nothing (_idle)

    def _doc(self, tags: dict, osm_type: str, osm_id: int) -> dict | None:
        """The fields of the document of a named object or address but its location; None when it is neither."""
        cls = classify(tags)
        if cls is not None:
            names, address, keep = _scan(tags)
            variants = _variants(names)
            # no `name` but name:xx / alt_name: the first of those is the name (an "unnamed" river tagged name:ca)
            name = tags.get("name") or (variants[0] if variants and cls[0] == "pois" else None)
            index, doc_type, place_class, category, imp = cls
            cats = categories_of(tags) if index == "pois" else []
            # an unnamed POI is a document when it has a search category (found by category + street/locality)
            if name or cats:
                return dict(
                    id=f"osm:{OSM_TYPES[osm_type]}:{osm_id}",
                    index=index, doc_type=doc_type, name=name, name_en=tags.get("name:en"),
                    names=variants, place_class=place_class, category=_intern(category),
                    importance=imp if name else imp - 0.05, source="osm", kind=osm_type,
                    categories=cats, detail=_json({"names": names, "address": address, "tags": keep}),
                    osm_tag=_intern(osm_tag(tags, index, place_class, category, osm_type)), **address_fields(tags),
                )
        hn = tags.get("addr:housenumber")
        if hn:
            # every object with a house number is an address; its street (addr:street, addr:place or the
            # nearest street) and name ("<street> <number>") are settled once the streets are read
            street = tags.get("addr:street") or tags.get("addr:place")
            label = f"{street} {hn}" if street else None
            return dict(
                id=f"osm:{OSM_TYPES[osm_type]}:{osm_id}",
                index="addresses", doc_type="place", name=label, name_en=None, names=[label] if label else [],
                place_class="address", category="house", importance=0.05, source="osm", kind=osm_type,
                detail=_json(detail_of(tags)), osm_tag=_intern(osm_tag(tags, "addresses", None, None, osm_type)),
                **address_fields(tags),
            )
        return None

    def _emit(self, tags: dict, osm_type: str, osm_id: int, lat: float, lon: float, docs: DocSet | None = None) -> int:
        """The row of the new document (in `docs`, default self.docs), or -1."""
        doc = self._doc(tags, osm_type, osm_id)
        if doc is None:
            return -1
        return (self.docs if docs is None else docs).add(**doc, lat=lat, lon=lon)

    def _shape(self, row: int, closed: bool, box, length: float, area: bool = False) -> None:
        """The shape of document `row` (of adocs when `area`)."""
        if area:
            self.ashape_row.append(row)
            self.ashape_closed.append(closed)
            self.ashape_box.extend(float(v) for v in box)
            self.ashape_len.append(length)
            return
        self.shape_row.append(row)
        self.shape_closed.append(closed)
        self.shape_box.extend(float(v) for v in box)
        self.shape_len.append(length)

    def _postcode_sample(self, code: str, lon: float, lat: float, kind: int = 0, oid: int = 0) -> None:
        self.pc_code.append(code)
        self.pc_xy.append(lon)
        self.pc_xy.append(lat)
        self.pc_kind.append(kind)
        self.pc_id.append(oid)

    def _record_way(self, w, tags: dict) -> None:
        """A way that makes a record: its id, and the way itself (tags, node refs) written to the kept ways
        (search/records.py), unless `member_way` wrote it."""
        wid = w._pyosmium_data.id()
        self.wrec_id.append(wid)
        if self.ways_out is not None and (self.part == "rest" or wid not in self.tracked_members):
            self.ways_out.add_way(w)

    def relation(self, r):
        """First pass: the label (else admin_centre) node of each administrative boundary (Nominatim links
        the boundary to that place node), and the members of every administrative or postal boundary."""
        kind = r.tags.get("boundary")
        if kind in ("administrative", "postal_code") or r.tags.get("type") in ("multipolygon", "boundary"):
            # (what the area assembler reads, and more): kept for updates, and the node refs of the member ways
            # of those that may make a record
            tags = tag_dict(r.tags)
            rec = makes_records(tags)
            self.rel_id.append(r.id)
            self.rel_tags.append(_json(tags))
            self.rel_rec.append(rec)
            for m in r.members:
                t = "nwr".find(m.type)
                self.rel_mtype.append(t)
                self.rel_mref.append(m.ref)
                self.rel_mrole.append(_intern(m.role))  # (a few roles: one string each)
                if t == 1 and rec:
                    self.tracked_members.add(m.ref)
            self.rel_ends.append(len(self.rel_mref))
        if kind == "postal_code" or (kind == "administrative" and "name" in r.tags
                                     and r.tags.get("admin_level", "").isdigit()):
            members = [(m.ref, m.role) for m in r.members if m.type == "w"]
            self.boundary_rels[r.id] = (tag_dict(r.tags), members)
            self.boundary_members.update(ref for ref, _ in members)
        if kind != "administrative":
            return
        best = None
        for m in r.members:
            if m.type == "n" and m.role in ("label", "admin_centre") and (best is None or m.role == "label"):
                best = (m.ref, m.role)
        if best is not None:
            self.labels[r.id] = best[0]

    def node(self, n):
        d = n._pyosmium_data  # the C++ object (pyosmium 4): its tags without the Python wrappers
        size = d.tags_size()
        if not size:
            return
        loc = d.location()
        if not loc.valid():
            return
        tags = self._busy_tag(d, "natural") if size == 1 else _tags_of(n)  # (natural=tree: most nodes of one tag)
        if tags is None:
            return
        row = self._emit(tags, "n", d.id(), loc.lat, loc.lon)
        if row < 0 and own_postcode(tags):
            self._postcode_sample(own_postcode(tags), loc.lon, loc.lat, 0, d.id())
        if row >= 0 and "addr:housenumber" in tags:
            self.addr_node_id.append(d.id())
            self.addr_node_row.append(row)

    def member_way(self, w):
        """Every way (before the document filter): the geometry of a member of a boundary relation, tagged
        or not (untagged members are common: Deatsville's outer ring)."""
        wid = w._pyosmium_data.id()
        if wid not in self.tracked_members:
            return
        if self.ways_out is not None:  # (kept for updates: search/records.py)
            self.ways_out.add_way(w)
        if wid in self.boundary_members:
            xy = way_xy(w)
            if len(xy) == len(w.nodes) and len(xy) >= 2:
                self.member_xy[w.id] = xy

    def _busy_tag(self, d, likely: str) -> dict | None:
        """The one tag of C++ object `d` as a dict (its key tried as `likely` first), or None when that tag
        makes nothing (`_idle`)."""
        tag = _only_tag(d, likely)
        idle = self.idle_tags.get(tag)
        if idle or idle is None and self._idle({tag[0]: tag[1]}):
            return None
        return {tag[0]: tag[1]}

    def _idle(self, tags: dict) -> bool:
        """Whether a node or way of this one tag makes nothing (building=yes, natural=tree: most of what passes
        the key filter): no document, interpolation or postcode. Decided once per tag."""
        (key, val), = tags.items()
        idle = self.idle_tags.get((key, val))
        if idle is None:
            idle = key != "addr:interpolation" and self._doc(tags, "n", 0) is None and not own_postcode(tags)
            if key in POI_KEY_SET:  # values of few kinds (not a name)
                self.idle_tags[(key, val)] = idle
        return idle

    def way(self, w):
        d = w._pyosmium_data
        if self.part == "rest" and self._street_way(d):
            return  # (the forked reader's: read_osm)
        tags = self._busy_tag(d, "building") if d.tags_size() == 1 else _tags_of(w)  # (building=yes: most ways of one tag)
        if tags is None:
            return
        if "addr:interpolation" in tags:
            if self.part == "nodes":
                return
            self._record_way(w, tags)
            nodes = [(nd.ref, nd.lon, nd.lat) for nd in w.nodes if nd.location.valid()]
            if len(nodes) >= 2:
                self.interpolations.add(w.id, tags, nodes)
            return
        hw = tags.get("highway")
        # a road with only a `ref` (CG-2 in Andorra) is a named street too: Nominatim names roads by their ref
        street = hw in STREET_HIGHWAYS and ("name" in tags or "ref" in tags) and "place" not in tags
        if self.part is not None and street != (self.part == "nodes"):
            return  # (the other process's way)
        wid = d.id()
        doc = None if street else self._doc(tags, "w", wid)
        if not street and doc is None:
            code = own_postcode(tags) if tags.get("boundary") != "postal_code" else None
            if code or tags.get("boundary") == "administrative":  # (a closed one is an area: `area`)
                self._record_way(w, tags)
            if code:  # no document, but a postcode: its centre
                pts = way_xy(w)
                if len(pts):
                    arr = pts[:-1] if len(pts) > 2 and d.is_closed() else pts
                    self._postcode_sample(code, *(float(v) for v in mean_xy(arr)), 1, wid)
            return  # (most buildings) no document: its node locations are never read
        self._record_way(w, tags)  # (a way of no record keeps none: its tags alone decide)
        arr = way_xy(w)
        if not len(arr):
            return
        if street:
            self.streets.add(wid, tags, hw, arr)
            return
        closed = d.is_closed()
        lon, lat = mean_xy(arr[:-1]) if len(arr) > 2 and closed else mean_xy(arr)
        row = self.docs.add(**doc, lat=float(lat), lon=float(lon))
        box = (*np.minimum.reduce(arr, 0).tolist(), *np.maximum.reduce(arr, 0).tolist())  # arr.min(axis=0), ...
        self.box_row.append(row)
        self.box.extend(box)
        if tags.get("boundary") == "administrative":
            self.boundary_way_row[wid] = row
        if not rank30(doc["osm_tag"]):
            self._shape(row, closed and len(arr) > 3, box, float(np.hypot(*np.diff(arr, axis=0).T).sum()))

    @staticmethod
    def _street_way(d) -> bool:
        """Whether C++ way `d` is a named street way (the test of `way`, on its tags without a dict)."""
        get = d.tags_get_value_by_key
        return (get("highway", None) in STREET_HIGHWAYS and (get("name", None) is not None or get("ref", None) is not None)
                and get("place", None) is None and get("addr:interpolation", None) is None)

    def area(self, a):
        d = a._pyosmium_data
        if d.from_way() and d.tags_get_value_by_key("boundary", None) != "administrative":
            return  # (a closed way: a building, most of the areas)
        t = a.tags
        if a.from_way():
            # a closed way tagged as an administrative boundary (Nominatim and osm2pgsql read it as one)
            if not (t.get("boundary") == "administrative" and "name" in t and t.get("admin_level", "").isdigit()
                    and int(t.get("admin_level")) in ADMIN_KEYS):
                return
        elif ("name" not in t and "addr:housenumber" not in t and not any(k in t for k in POI_KEYS)
                and t.get("boundary") != "postal_code"):
            return
        tags = tag_dict(t)
        try:
            geom = shapely.from_wkb(self.wkb.create_multipolygon(a))
        except Exception:  # broken or incomplete multipolygon in a clipped extract
            return
        if geom.is_empty:
            return
        if not a.from_way() and tags.get("boundary") in ("administrative", "postal_code"):
            self.assembled.add(a.orig_id())
        self._area(tags, geom, "w" if a.from_way() else "r", a.orig_id())

    def _area(self, tags: dict, geom, osm_type: str, osm_id: int) -> None:
        """The boundary, place or POI of an assembled area."""
        c = geom.centroid if geom.contains(geom.centroid) else geom.representative_point()
        level = tags.get("admin_level", "")
        if tags.get("boundary") == "administrative" and level.isdigit() and int(level) in ADMIN_KEYS and "name" in tags:
            level = int(level)
            cc = tags.get("ISO3166-1:alpha2") or tags.get("ISO3166-1") or tags.get("country_code")
            b = Boundary(tags["name"], level, geom, cc.upper() if cc and len(cc) == 2 else None, osm_id,
                         {k: v for k, v in tags.items() if k == "name" or k.startswith("name:")}, tags.get("place"),
                         osm_type=osm_type, country_hint=country_hint(tags))
            if osm_type == "w" and ("place" in tags or classify(tags) is not None):
                pass  # the way's own document (`way`) is its row: linked after the read (read_osm)
            elif "place" in tags or classify(tags) is not None:
                b.row = -2 - self._emit(tags, osm_type, osm_id, c.y, c.x, self.adocs)  # (-1 stays -1)
            else:  # a named boundary is a place document (a country, county, municipality) of its admin level
                key = ADMIN_KEYS[level]
                b.row = -2 - self.adocs.add(
                    id=f"osm:{OSM_TYPES[osm_type]}:{osm_id}", index="places", doc_type="place", name=tags["name"],
                    name_en=tags.get("name:en"), names=name_variants(tags), place_class=key, category=None,
                    importance=min(1.0, ADMIN_IMPORTANCE[level] + _wiki_bonus(tags)), source="osm", kind=osm_type,
                    detail=_json(detail_of(tags)), osm_tag="boundary=administrative", lat=c.y, lon=c.x,
                    **address_fields(tags))
            self.boundaries.append(b)
            return
        if tags.get("boundary") == "postal_code":
            code = tags.get("postal_code") or tags.get("addr:postcode") or tags.get("ref") or tags.get("name")
            if code:
                self.boundaries.append(Boundary(code, 0, geom, osm_id=osm_id, postcode=code))
            return
        if "place" in tags or "addr:housenumber" in tags or classify(tags) is not None:
            row = self._emit(tags, osm_type, osm_id, c.y, c.x, self.adocs)
            if row >= 0 and not rank30(self.adocs.osm_tag[row]):
                self._shape(row, True, geom.bounds, 0.0, area=True)

    def unassembled_boundaries(self) -> int:
        """The boundary relations the area assembler left out (a member way missing from a clipped extract),
        assembled as osm2pgsql does for Nominatim: the rings that the member ways present close (outer and
        inner by role; a ring left open is dropped, and a relation without a closed outer ring is no
        boundary). Returns how many were added."""
        added = 0
        for rid, (tags, members) in self.boundary_rels.items():
            if rid in self.assembled:
                continue
            geom = member_polygon(members, self.member_xy)
            if geom is not None:
                self._area(tags, geom, "r", rid)
                self.unassembled_ids.append(rid)
                added += 1
        self.member_xy.clear()
        return added

    def finish_areas(self) -> None:
        """After the read: the area documents after the others, closed ways' then relations', each by id (see
        `adocs`), their rows in the boundaries and shapes; the boundaries in the same order (closed ways',
        then relations', by id); a closed boundary way that is a document itself linked to its row."""
        from geoengine.search.docset import extend_docs, take_docs

        n, ad = len(self.docs), self.adocs
        self.n_plain = n  # the documents before the area documents
        inv = np.zeros(0, np.int64)
        if len(ad):
            keys = [(k != "w", int(i.rsplit(":", 1)[1])) for k, i in zip(ad.kind, ad.id, strict=True)]
            order = sorted(range(len(ad)), key=keys.__getitem__)
            inv = np.empty(len(ad), np.int64)
            inv[order] = np.arange(len(ad))
            extend_docs(self.docs, take_docs(ad, order))
        self.adocs = DocSet()
        for b in self.boundaries:
            if b.row <= -2:
                b.row = n + int(inv[-2 - b.row])
            elif b.osm_type == "w" and b.row < 0:
                b.row = self.boundary_way_row.get(b.osm_id, -1)
        self.boundaries.sort(key=lambda b: (b.osm_type != "w", b.osm_id))
        if len(self.ashape_row):
            rows = np.concatenate([np.frombuffer(self.shape_row, np.int64),
                                   n + inv[np.frombuffer(self.ashape_row, np.int64)]])
            closed = np.concatenate([np.frombuffer(self.shape_closed, np.int8), np.frombuffer(self.ashape_closed, np.int8)])
            box = np.concatenate([np.frombuffer(self.shape_box, np.float64), np.frombuffer(self.ashape_box, np.float64)])
            length = np.concatenate([np.frombuffer(self.shape_len, np.float64), np.frombuffer(self.ashape_len, np.float64)])
            o = np.argsort(rows, kind="stable")
            self.shape_row, self.shape_closed = _typed("q", rows[o]), _typed("b", closed[o])
            self.shape_box, self.shape_len = _typed("d", box.reshape(-1, 4)[o]), _typed("d", length[o])
        for name in ("ashape_row", "ashape_closed", "ashape_box", "ashape_len"):
            del getattr(self, name)[:]


def _typed(code: str, values: np.ndarray) -> array:
    out = array(code)
    out.frombytes(np.ascontiguousarray(values).tobytes())
    return out


def member_polygon(members: list[tuple[int, str]], member_xy: dict[int, np.ndarray]):
    """The (multi)polygon of a relation's member ways present in `member_xy`: the closed rings their lines
    form (shapely's polygonize), outer members' rings minus inner members' rings; None without an outer ring."""
    def rings(role_inner: bool):
        lines = [shapely.LineString(member_xy[ref]) for ref, role in members
                 if ref in member_xy and (role == "inner") == role_inner]
        if not lines:
            return None
        polys = shapely.get_parts(shapely.polygonize(lines))
        return shapely.union_all(polys) if len(polys) else None

    outer = rings(False)
    if outer is None or outer.is_empty:
        return None
    inner = rings(True)
    geom = outer.difference(inner) if inner is not None and not inner.is_empty else outer
    return None if geom.is_empty else geom


class InterpolationWays:
    """The addr:interpolation ways of an extract as columns: way k has id `id[k]`, its tags' type, street,
    postcode, and nodes `node_id[ends[k]:ends[k + 1]]` at `xy` (lon, lat) in way order."""

    def __init__(self):
        self.id = array("q")
        self.kind: list[str] = []
        self.street: list[str | None] = []
        self.addr_place: list[str | None] = []
        self.postcode: list[str | None] = []
        self.ends = array("q", [0])
        self.node_id = array("q")
        self.xy = array("d")

    def __len__(self) -> int:
        return len(self.id)

    def add(self, way_id: int, tags: dict, nodes: list[tuple[int, float, float]]) -> None:
        self.id.append(way_id)
        self.kind.append(_intern(tags["addr:interpolation"]))
        self.street.append(tags.get("addr:street"))
        self.addr_place.append(tags.get("addr:place"))
        self.postcode.append(tags.get("addr:postcode"))
        for ref, lon, lat in nodes:
            self.node_id.append(ref)
            self.xy.append(lon)
            self.xy.append(lat)
        self.ends.append(len(self.node_id))


# the tags that give a street way a postcode, first first (Nominatim's ADDRESS_TAGS postcode: TIGER's zips
# give the streets of the United States theirs)
POSTCODE_TAGS = ("postal_code", "postcode", "addr:postcode", "tiger:zip_left", "tiger:zip_right")


class StreetWays:
    """The named street ways of an extract as columns (an object per way cost about 450 bytes more):
    way k has id `id[k]`, name `name[k]`, ..., vertices `vertices()[ends[k]:ends[k + 1]]` (lon, lat)."""

    def __init__(self):
        self.id = array("q")
        self.lat = array("d")  # the mean of the way's vertices
        self.lon = array("d")
        self.importance = array("d")
        self.ends = array("q", [0])
        self.xy = array("d")
        self.name: list[str] = []
        self.name_en: list[str | None] = []
        self.names: list[list[str] | None] = []  # the name variants; None when they are [name]
        self.category: list[str] = []  # the highway value
        self.detail = TextColumn()  # JSON of names, address, tags
        self.postcode: list[str | None] = []  # Nominatim's postcode tags: addr:postcode, ..., tiger:zip_left

    def __len__(self) -> int:
        return len(self.id)

    def add(self, way_id: int, tags: dict, hw: str, arr: np.ndarray) -> None:
        name = tags.get("name") or tags["ref"]
        names, address, keep = _scan(tags)
        variants = _variants(names) or [name]
        self.id.append(way_id)
        self.lat.append(mean_1d(arr[:, 1]))
        self.lon.append(mean_1d(arr[:, 0]))
        self.importance.append(STREET_IMPORTANCE.get(hw, 0.18) + _wiki_bonus(tags))
        self.xy.frombytes(arr.tobytes())
        self.ends.append(len(self.xy) // 2)
        self.name.append(name)
        self.name_en.append(tags.get("name:en"))
        self.names.append(None if variants == [name] else variants)
        self.category.append(_intern(hw))
        self.detail.append(_json({"names": names, "address": address, "tags": keep}))
        # the first of POSTCODE_TAGS with a value
        self.postcode.append(tags.get("postal_code") or tags.get("postcode") or tags.get("addr:postcode")
                             or tags.get("tiger:zip_left") or tags.get("tiger:zip_right") or None)

    def variants(self, k: int) -> list[str]:
        return self.names[k] or [self.name[k]]

    def vertices(self) -> np.ndarray:
        """(n, 2) lon/lat of every way's vertices, way after way (a view)."""
        return np.frombuffer(self.xy, np.float64).reshape(-1, 2) if len(self.xy) else np.zeros((0, 2))


_INTERNED: dict[str, str] = {}


def _intern(s: str | None) -> str | None:
    """One string object per tag value of few distinct values (category, highway)."""
    return s if s is None else _INTERNED.setdefault(s, s)


class _Callbacks:
    """A pyosmium handler of the given callbacks (pyosmium calls a handler's `node`, `way`, ... by name)."""

    def __init__(self, **methods):
        for name, fn in methods.items():
            setattr(self, name, fn)




# decoded blocks a reader keeps ahead of its handlers (libosmium's default is 20 of each queue): the Python
# handlers are the slow end, so the queues stay full; 4 held 36 MB less at 64 Liechtensteins, as fast
READER_QUEUE = "4"


def _reader(path: str, entities, pool) -> osmium.io.Reader:
    """An osmium reader with short queues (libosmium reads their sizes from the environment when it opens)."""
    names = ("OSMIUM_MAX_INPUT_QUEUE_SIZE", "OSMIUM_MAX_OSMDATA_QUEUE_SIZE")
    saved = {k: os.environ.get(k) for k in names}
    for k in names:
        os.environ.setdefault(k, READER_QUEUE)
    try:
        return osmium.io.Reader(path, entities, thread_pool=pool)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


# the reader's columns the forked reader hands back besides its documents and streets
CHILD_COLUMNS = ["addr_node_id", "addr_node_row", "pc_xy", "pc_code", "pc_kind", "pc_id", "wrec_id", "kept_files"]
STREET_COLUMNS = ["id", "lat", "lon", "importance", "ends", "xy", "name", "name_en", "names", "category", "detail",
                  "postcode"]


def read_processes() -> int:
    """How many processes read the extract: 2 (the node documents and named street ways in a forked child,
    the rest in this process) when there is a second core, else 1; GEOENGINE_SEARCH_READ_PROCESSES=1 keeps
    one."""
    env = os.environ.get("GEOENGINE_SEARCH_READ_PROCESSES", "").strip()
    if env:
        try:
            return max(1, min(2, int(env)))
        except ValueError:
            raise ValueError(f"GEOENGINE_SEARCH_READ_PROCESSES is '{env}'; use 1 or 2") from None
    return 2 if (os.cpu_count() or 1) > 1 and hasattr(os, "fork") else 1


def read_osm(path, processes: int | None = None, keep_ways: str | None = None) -> tuple[DocSet, StreetWays, list[Boundary], _Handler]:
    """(documents but streets, named street ways, administrative and postal boundaries, the reader with the
    interpolation ways, boundary labels and address nodes) of an OSM file.

    With two `processes` (default: `read_processes()`), after the relations are read a forked child reads
    the node documents, the named street ways and the geometries of the boundaries' member ways while this
    process reads the other ways and the areas, each with its own node-location index. The child's columns
    come back as bytes and arrays (docset.pack_columns), and its documents go first: a file's nodes come
    before its ways, so the documents keep the one-process order and every byte of the index."""
    h = _Handler(None if (processes or read_processes()) < 2 else "rest")
    h.keep_ways = keep_ways
    area = osmium.area.AreaManager()
    pool = osmium.io.ThreadPool()
    with _reader(str(path), osmium.osm.RELATION, pool) as rd:
        # every multipolygon, even those that make no document: the assembler hands out the finished areas
        # when a member way comes, so tracking fewer relations would change the order of the documents
        osmium.apply(rd, area.first_pass_handler(), _Callbacks(relation=h.relation))
    del pool, rd  # (its threads end: none runs when the reader forks)
    if h.part is None:
        _main_pass(path, h, area, osmium.io.ThreadPool())
        h.unassembled = h.unassembled_boundaries()
        h.finish_areas()
        return h.docs, h.streets, h.boundaries, h
    import multiprocessing as mp
    import pickle
    import tempfile

    fd, state = tempfile.mkstemp(prefix="geoengine-search-read-", suffix=".state")
    os.close(fd)
    child = mp.get_context("fork").Process(target=_read_child, args=(str(path), state, os.getpid(), h.boundary_members,
                                                                            h.tracked_members, keep_ways),
                                           daemon=True)
    child.start()
    try:
        try:
            _main_pass(path, h, area, osmium.io.ThreadPool())
        except BaseException:
            child.kill()
            raise
        finally:
            del area
            child.join()
        if child.exitcode != 0:
            detail = ""
            try:
                with open(state, "rb") as fh:
                    got = pickle.load(fh)
                detail = f": {got[1]}" if isinstance(got, tuple) and got[:1] == ("error",) else ""
            except Exception:  # noqa: BLE001 - nothing written (killed, out of memory): the exit code says it
                pass
            raise RuntimeError(f"reading the node documents and street ways of {path} failed in the forked reader "
                               f"(pid {child.pid}, exit code {child.exitcode}){detail}")
        with open(state, "rb") as fh:
            packed = pickle.load(fh)
    finally:
        os.unlink(state)
    return _merge_parts(h, packed)


def _main_pass(path, h: _Handler, area, pool) -> None:
    """The nodes and ways of `path` (after the relations' pass), as `h.part` says: the whole file (None), the
    node documents, named street ways and boundary member ways ("nodes"), or the other ways and the areas
    ("rest"). Every node gives ways their locations (osmium's index); only nodes and ways with a document key
    reach Python, and the boundary member ways before the filter (untagged ones are common. osmium's
    IdFilter would pass only those, but its dense id set takes 512 kB per 4 million ids it spans: GBs at 16
    copies)."""
    if h.keep_ways is not None:
        _open_kept(h)
    try:
        _main_pass_ways(path, h, area, pool)
    finally:
        if h.ways_out is not None:
            h.ways_out.close()
            h.ways_out = None


KEPT_FORMAT = "pbf,pbf_compression=none,add_metadata=false"  # (decoded without zlib by records.kept_refs)


def _open_kept(h: _Handler) -> None:
    """The writer of the ways this process keeps for updates (search/records.py): an uncompressed PBF."""
    path = f"{h.keep_ways}-{h.part or 'all'}.osm.pbf"
    if os.path.exists(path):
        os.unlink(path)
    h.ways_out = osmium.SimpleWriter(osmium.io.File(path, KEPT_FORMAT))
    h.kept_files.append(os.path.basename(path))


def _main_pass_ways(path, h: _Handler, area, pool) -> None:
    lh = osmium.NodeLocationsForWays(osmium.index.create_map(LOCATION_INDEX))
    lh.ignore_errors()
    members = [_Callbacks(way=h.member_way)] if h.tracked_members and h.part != "rest" else []
    if h.part == "nodes":
        with _reader(str(path), osmium.osm.NODE | osmium.osm.WAY, pool) as rd:
            # nodes of a document key; ways with a highway and a name or ref (the street ways)
            osmium.apply(rd, lh, *members, osmium.filter.KeyFilter(*DOC_KEYS).enable_for(osmium.osm.NODE),
                         osmium.filter.KeyFilter("highway").enable_for(osmium.osm.WAY),
                         osmium.filter.KeyFilter("name", "ref").enable_for(osmium.osm.WAY),
                         _Callbacks(node=h.node, way=h.way))
        return
    main = _Callbacks(way=h.way, area=h.area) if h.part == "rest" else _Callbacks(node=h.node, way=h.way, area=h.area)
    with _reader(str(path), osmium.osm.OBJECT, pool) as rd:
        osmium.apply(rd, lh, area.second_pass_handler(main), *members,
                     osmium.filter.KeyFilter(*DOC_KEYS).enable_for(osmium.osm.NODE | osmium.osm.WAY), main)



def _read_child(path: str, state: str, parent: int, boundary_members: set[int], tracked: set[int],
                keep_ways: str | None = None) -> None:  # pragma: no cover - forked
    """The node documents, named street ways and boundary member ways of `path` (read_osm's child), left in
    `state` as bytes and arrays, or ("error", message): the parent raises it."""
    import pickle

    from geoengine.bundler.isolate import die_with
    from geoengine.search.docset import pack_columns, row_columns

    die_with(parent)
    try:
        h = _Handler("nodes")
        h.boundary_members = boundary_members
        h.tracked_members = tracked
        h.keep_ways = keep_ways
        _main_pass(path, h, None, osmium.io.ThreadPool())
        out = pack_columns(h.docs, row_columns())
        pack_columns(h.streets, STREET_COLUMNS, out, "street.")
        pack_columns(h, CHILD_COLUMNS, out, "h.")
        ids = np.fromiter(h.member_xy, np.int64, len(h.member_xy))
        xy = [h.member_xy[k] for k in ids.tolist()]
        out["member"] = (ids, np.cumsum([0] + [len(a) for a in xy]),
                         np.concatenate(xy) if xy else np.zeros((0, 2)))
        code = 0
    except BaseException as exc:  # noqa: BLE001 - handed to the parent as a message
        out, code = ("error", f"{type(exc).__name__}: {exc}"), 1
    try:
        with open(state, "wb") as fh:
            pickle.dump(out, fh, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001 - e.g. the disk is full: the exit code tells the parent
        os._exit(2)
    os._exit(code)


def _merge_parts(h: _Handler, packed: dict) -> tuple[DocSet, StreetWays, list[Boundary], _Handler]:
    """The child's node documents, then this process's (their rows moved past the child's), then the
    boundaries the area assembler left out (from the child's member ways)."""
    from geoengine.search.docset import extend_docs, row_columns, unpack_columns

    docs = unpack_columns(DocSet(), row_columns(), packed)
    n = len(docs)
    extend_docs(docs, h.docs)
    h.docs = docs
    h.streets = unpack_columns(StreetWays(), STREET_COLUMNS, packed, "street.")
    mine = {k: getattr(h, k) for k in CHILD_COLUMNS}
    unpack_columns(h, CHILD_COLUMNS, packed, "h.")
    for k in ("pc_xy", "pc_code", "pc_kind", "pc_id", "wrec_id", "kept_files"):
        getattr(h, k).extend(mine[k])
    for col in (h.box_row, h.shape_row):
        moved = np.frombuffer(col, np.int64) + n
        del col[:]
        col.frombytes(moved.tobytes())
    for b in h.boundaries:
        if b.row >= 0:
            b.row += n
    h.boundary_way_row = {k: v + n for k, v in h.boundary_way_row.items()}
    ids, ends, xy = packed["member"]
    h.member_xy = {k: xy[ends[i]:ends[i + 1]] for i, k in enumerate(ids.tolist())}
    h.part = None
    h.unassembled = h.unassembled_boundaries()
    h.finish_areas()
    return h.docs, h.streets, h.boundaries, h
