"""OSM tags -> the Protomaps basemap layer schema.

Layers and the attributes the `@protomaps/basemaps` 5.7 MapLibre style filters on (checked against
that package's `src/base_layers.ts`, not from memory):

- `earth`     polygons (`$type == Polygon`), kind `earth`.
- `landcover` kind grassland | barren | urban_area | farmland | glacier | scrub | forest (drawn below z7).
- `landuse`   kind park, cemetery, protected_area, nature_reserve, national_park, forest, wood, scrub,
              grassland, grass, glacier, sand, military, allotments, village_green, playground, hospital,
              industrial, school, university, college, beach, zoo, aerodrome, runway, taxiway,
              pedestrian, dam, pier, ... (other landuse values pass through as their tag value).
- `water`     polygons (any kind; labels for kind lake | water; `ocean` from coastlines), lines kind
              river | stream | canal | ditch.
- `roads`     kind highway | major_road | minor_road (kind_detail `service`) | path | other | rail |
              aeroway (kind_detail runway | taxiway); flags `is_link`, `is_tunnel`, `is_bridge` (present
              only when true, the style tests `has`), `oneway` "yes", `ref`.
- `transit`   aerialways and ferries (kind aerialway | ferry); the 5.7 style draws rail from `roads`.
- `buildings` kind building | building_part, `height`; address points kind `address` + `addr_housenumber`.
- `pois`      kind = the tag value (restaurant, cafe, peak, station, bus_stop, museum, ...); `min_zoom`
              is compared with the zoom by the style.
- `places`    kind country | region | locality | macrohood | neighbourhood; `kind_detail` = place tag;
              `population`, `population_rank`, `capital` "yes", `sort_key`.
- `boundaries` kind country | region | county | locality, `kind_detail` = admin_level as a number
              (the style tests `<= 2`).

Every feature carries `kind`, `min_zoom` and, when named, `name` (+ `name:en` etc. when tagged).
"""

from __future__ import annotations

from typing import NamedTuple

LAYERS = ("earth", "landcover", "landuse", "water", "roads", "transit", "buildings", "pois", "places", "boundaries")

# Field types for the MBTiles `json` metadata (vector_layers).
LAYER_FIELDS: dict[str, dict[str, str]] = {
    "earth": {"kind": "String", "min_zoom": "Number"},
    "landcover": {"kind": "String", "kind_detail": "String", "min_zoom": "Number"},
    "landuse": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String"},
    "water": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String"},
    "roads": {
        "kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String", "ref": "String",
        "is_link": "Boolean", "is_tunnel": "Boolean", "is_bridge": "Boolean", "oneway": "String",
    },
    "transit": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String"},
    "buildings": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "height": "Number",
                  "name": "String", "addr_housenumber": "String"},
    "pois": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String", "elevation": "Number"},
    "places": {"kind": "String", "kind_detail": "String", "min_zoom": "Number", "name": "String",
               "population": "Number", "population_rank": "Number", "capital": "String", "sort_key": "Number"},
    "boundaries": {"kind": "String", "kind_detail": "Number", "min_zoom": "Number", "name": "String"},
}

LAYER_DESCRIPTIONS = {
    "earth": "Land area of the extract",
    "landcover": "Coarse natural cover for low zooms",
    "landuse": "Land use and leisure areas",
    "water": "Water areas and waterways",
    "roads": "Roads, paths, railways and runways",
    "transit": "Aerialways and ferries",
    "buildings": "Buildings and address points",
    "pois": "Points of interest",
    "places": "Populated places and neighbourhoods",
    "boundaries": "Administrative boundaries",
}

NAME_KEYS = ("name", "name:en", "name:ca", "name:fr", "name:es", "name:de")


class Feature(NamedTuple):  # a NamedTuple: built once per feature, several times cheaper than a frozen dataclass
    layer: str
    kind: str
    min_zoom: int
    kind_detail: str | None = None
    extra: tuple = ()  # ((key, value), ...)


def _names(tags) -> dict:
    out = {}
    for k in NAME_KEYS:
        v = tags.get(k)
        if v:
            out[k] = v
    return out


_NAME_KEYSET = frozenset(NAME_KEYS)


def properties(f: Feature, tags) -> dict:
    props = {"kind": f.kind, "min_zoom": f.min_zoom}
    if f.kind_detail is not None:
        props["kind_detail"] = f.kind_detail
    if not _NAME_KEYSET.isdisjoint(tags):  # most features have no name: one pass over their few keys
        props.update(_names(tags))
    for k, v in f.extra:
        if v is not None:
            props[k] = v
    return props


def _number(s) -> float | None:
    if not s:
        return None
    s = s.strip().split()[0].replace(",", ".").rstrip("m")
    try:
        v = float(s)
    except ValueError:
        return None
    return v if v == v and abs(v) < 1e6 else None


# ---------------------------------------------------------------------------------------- roads
_ROADS = {
    # highway value: (kind, min_zoom)
    "motorway": ("highway", 3), "trunk": ("major_road", 6), "primary": ("major_road", 7),
    "secondary": ("major_road", 9), "tertiary": ("major_road", 10),
    "motorway_link": ("highway", 11), "trunk_link": ("major_road", 11), "primary_link": ("major_road", 11),
    "secondary_link": ("major_road", 12), "tertiary_link": ("major_road", 12),
    "residential": ("minor_road", 12), "unclassified": ("minor_road", 12), "road": ("minor_road", 12),
    "living_street": ("minor_road", 12), "service": ("minor_road", 13),
    "pedestrian": ("path", 13), "footway": ("path", 14), "path": ("path", 13), "cycleway": ("path", 13),
    "track": ("path", 13), "steps": ("path", 14), "bridleway": ("path", 14), "corridor": ("path", 14),
    "raceway": ("other", 12), "busway": ("other", 12), "construction": ("other", 14),
}
_RAIL = {"rail": 8, "narrow_gauge": 10, "light_rail": 11, "tram": 12, "subway": 11, "funicular": 12,
         "monorail": 12, "preserved": 12}
_AERIALWAY = {"cable_car": 11, "gondola": 11, "chair_lift": 12, "mixed_lift": 12, "drag_lift": 13,
              "t-bar": 13, "j-bar": 13, "platter": 13, "rope_tow": 14, "magic_carpet": 14, "zip_line": 14}


def _road_flags(tags) -> tuple:
    extra = []
    hw = tags.get("highway", "")
    if hw.endswith("_link"):
        extra.append(("is_link", True))
    if tags.get("tunnel") not in (None, "no"):
        extra.append(("is_tunnel", True))
    if tags.get("bridge") not in (None, "no"):
        extra.append(("is_bridge", True))
    if tags.get("oneway") in ("yes", "1", "true"):
        extra.append(("oneway", "yes"))
    if tags.get("ref"):
        extra.append(("ref", tags.get("ref")))
    return tuple(extra)


# Every key line_feature reads first: a way with none of them is no line (collectors skip it unread).
LINE_KEYS = ("highway", "railway", "aeroway", "waterway", "aerialway", "route", "man_made", "boundary")


def line_feature(tags) -> Feature | None:
    """Classify an open way (or a closed way that is not an area). None for tags without any of
    LINE_KEYS."""
    hw = tags.get("highway")
    if hw in _ROADS and tags.get("area") != "yes":
        kind, mz = _ROADS[hw]
        return Feature("roads", kind, mz, hw.removesuffix("_link"), _road_flags(tags))
    rw = tags.get("railway")
    if rw in _RAIL:
        mz = _RAIL[rw]
        if tags.get("service") in ("siding", "yard", "spur", "crossover"):
            mz = 13
        return Feature("roads", "rail", mz, rw, _road_flags(tags))
    aw = tags.get("aeroway")
    if aw in ("runway", "taxiway"):
        return Feature("roads", "aeroway", 10 if aw == "runway" else 13, aw)
    ww = tags.get("waterway")
    if ww in ("river", "stream", "canal", "ditch", "drain"):
        mz = {"river": 9, "canal": 9, "stream": 12}.get(ww, 13)
        return Feature("water", ww, mz, ww)
    al = tags.get("aerialway")
    if al in _AERIALWAY:
        return Feature("transit", "aerialway", _AERIALWAY[al], al)
    if tags.get("route") == "ferry":
        return Feature("transit", "ferry", 10, "ferry")
    if tags.get("man_made") == "pier":
        return Feature("roads", "path", 13, "pier")
    if tags.get("boundary") == "administrative":
        return boundary_feature(tags)
    return None


# -------------------------------------------------------------------------------------- areas
_LANDUSE_KIND = {
    ("leisure", "park"): "park", ("landuse", "cemetery"): "cemetery", ("amenity", "grave_yard"): "cemetery",
    ("boundary", "national_park"): "national_park", ("boundary", "protected_area"): "protected_area",
    ("leisure", "nature_reserve"): "nature_reserve", ("landuse", "forest"): "forest", ("natural", "wood"): "wood",
    ("natural", "scrub"): "scrub", ("natural", "grassland"): "grassland", ("landuse", "grass"): "grass",
    ("landuse", "meadow"): "grassland", ("natural", "heath"): "scrub", ("natural", "glacier"): "glacier",
    ("natural", "sand"): "sand", ("landuse", "military"): "military", ("leisure", "golf_course"): "golf_course",
    ("landuse", "allotments"): "allotments", ("landuse", "village_green"): "village_green",
    ("leisure", "playground"): "playground", ("amenity", "hospital"): "hospital",
    ("landuse", "industrial"): "industrial", ("amenity", "school"): "school",
    ("amenity", "university"): "university", ("amenity", "college"): "college", ("natural", "beach"): "beach",
    ("tourism", "zoo"): "zoo", ("aeroway", "aerodrome"): "aerodrome", ("aeroway", "runway"): "runway",
    ("aeroway", "taxiway"): "taxiway", ("highway", "pedestrian"): "pedestrian", ("waterway", "dam"): "dam",
    ("man_made", "pier"): "pier", ("landuse", "residential"): "residential", ("landuse", "commercial"): "commercial",
    ("landuse", "retail"): "retail", ("landuse", "farmland"): "farmland", ("landuse", "farmyard"): "farmyard",
    ("landuse", "orchard"): "orchard", ("landuse", "vineyard"): "vineyard", ("landuse", "railway"): "railway",
    ("landuse", "brownfield"): "brownfield", ("landuse", "construction"): "construction",
    ("landuse", "garages"): "garages", ("landuse", "quarry"): "quarry", ("leisure", "pitch"): "pitch",
    ("leisure", "sports_centre"): "sports_centre", ("leisure", "stadium"): "stadium",
    ("leisure", "garden"): "garden", ("landuse", "recreation_ground"): "recreation_ground",
    ("natural", "bare_rock"): "bare_rock", ("natural", "scree"): "scree", ("amenity", "parking"): "parking",
}
_LANDUSE_KEYS = ("leisure", "landuse", "amenity", "boundary", "natural", "tourism", "aeroway", "highway",
                 "waterway", "man_made")
_LANDCOVER = {
    "forest": "forest", "wood": "forest", "grassland": "grassland", "grass": "grassland", "scrub": "scrub",
    "glacier": "glacier", "bare_rock": "barren", "scree": "barren", "sand": "barren", "farmland": "farmland",
    "orchard": "farmland", "vineyard": "farmland", "residential": "urban_area", "industrial": "urban_area",
    "commercial": "urban_area", "retail": "urban_area",
}
# in order: the first that matches decides (a tuple: a set's order follows the interpreter's hash seed, which
# made an area tagged both natural=water and waterway=riverbank differ between two builds of one extract)
_WATER_AREA = (("natural", "water"), ("waterway", "riverbank"), ("landuse", "reservoir"), ("landuse", "basin"),
               ("waterway", "dock"), ("leisure", "swimming_pool"))


_WATER_AREA_KEYS = frozenset(k for k, _ in _WATER_AREA)
_LANDUSE_KEYSET = frozenset(_LANDUSE_KEYS)


def area_features(tags) -> list[Feature]:
    """Classify an area (closed way or multipolygon). An area may go to several layers."""
    out: list[Feature] = []
    keys = tags.keys()
    # most areas are buildings: the water and landuse tables are read only when one of their keys is there
    for key, value in (_WATER_AREA if not keys.isdisjoint(_WATER_AREA_KEYS) else ()):
        if tags.get(key) == value:
            detail = tags.get("water") or value
            kind = "lake" if detail in ("lake", "reservoir") else "water"
            mz = 14 if value == "swimming_pool" else 6
            out.append(Feature("water", kind, mz, detail))
            break
    if tags.get("building") and tags.get("building") != "no":
        h = _number(tags.get("height"))
        if h is None and _number(tags.get("building:levels")) is not None:
            h = round(_number(tags.get("building:levels")) * 3.0, 1)
        out.append(Feature("buildings", "building", 14, tags.get("building"), (("height", h),)))
    elif tags.get("building:part") and tags.get("building:part") != "no":
        out.append(Feature("buildings", "building_part", 14, tags.get("building:part"),
                           (("height", _number(tags.get("height"))),)))
    for key in (_LANDUSE_KEYS if not keys.isdisjoint(_LANDUSE_KEYSET) else ()):
        value = tags.get(key)
        kind = _LANDUSE_KIND.get((key, value)) if value else None
        if kind == "pedestrian" and tags.get("area") != "yes":
            continue
        if kind:
            mz = 7 if kind in ("national_park", "protected_area", "forest", "wood", "glacier", "military") else 10
            out.append(Feature("landuse", kind, mz, value))
            cover = _LANDCOVER.get(kind)
            if cover:
                out.append(Feature("landcover", cover, 0, kind))
            break
    return out


# ----------------------------------------------------------------------------------- boundaries
_ADMIN = {2: ("country", 0), 3: ("region", 4), 4: ("region", 4), 5: ("county", 8), 6: ("county", 8),
          7: ("locality", 10), 8: ("locality", 10)}


def admin_level(tags) -> int | None:
    try:
        level = int(tags.get("admin_level", ""))
    except ValueError:
        return None
    return level if level in _ADMIN else None


def boundary_feature(tags, level: int | None = None) -> Feature | None:
    level = level if level is not None else admin_level(tags)
    if level is None:
        return None
    kind, mz = _ADMIN[level]
    return Feature("boundaries", kind, mz, None, (("kind_detail", level),))


# --------------------------------------------------------------------------------------- places
def population_rank(pop: int) -> int:
    for rank, lim in ((17, 10_000_000), (15, 1_000_000), (13, 500_000), (12, 200_000), (11, 100_000),
                      (10, 50_000), (9, 20_000), (8, 10_000), (7, 5_000), (6, 2_000), (5, 1_000), (4, 200),
                      (3, 50), (2, 1)):
        if pop >= lim:
            return rank
    return 1


_PLACE = {  # place value: (kind, min_zoom)
    "country": ("country", 0), "state": ("region", 4), "province": ("region", 4), "region": ("region", 6),
    "city": ("locality", 4), "town": ("locality", 7), "village": ("locality", 10), "hamlet": ("locality", 12),
    "isolated_dwelling": ("locality", 13), "locality": ("locality", 13), "suburb": ("macrohood", 11),
    "quarter": ("macrohood", 12), "neighbourhood": ("neighbourhood", 13),
}


def place_feature(tags) -> Feature | None:
    place = tags.get("place")
    if place not in _PLACE or not tags.get("name"):
        return None
    kind, mz = _PLACE[place]
    pop = None
    raw = tags.get("population")
    if raw:
        try:
            pop = int(float(raw.replace(",", "").replace(" ", "")))
        except ValueError:
            pop = None
    capital = tags.get("capital") in ("yes", "2") or tags.get("admin_level") == "2" and kind == "locality"
    if kind == "locality":
        if capital:
            mz = min(mz, 2)
        if pop:
            mz = min(mz, 5 if pop >= 1_000_000 else 6 if pop >= 100_000 else 8 if pop >= 20_000 else mz)
    rank = population_rank(pop or 0)
    extra = [("population", pop), ("population_rank", rank), ("sort_key", mz * 100 - rank)]
    if capital:
        extra.append(("capital", "yes"))
    return Feature("places", kind, mz, place, tuple(extra))


# ----------------------------------------------------------------------------------------- pois
_POI = {  # (key, value): min_zoom
    ("amenity", "restaurant"): 15, ("amenity", "fast_food"): 15, ("amenity", "cafe"): 15, ("amenity", "bar"): 15,
    ("amenity", "pub"): 15, ("amenity", "school"): 15, ("amenity", "library"): 15, ("amenity", "toilets"): 16,
    ("amenity", "drinking_water"): 16, ("amenity", "post_office"): 15, ("amenity", "townhall"): 14,
    ("amenity", "bench"): 17, ("amenity", "hospital"): 13, ("amenity", "pharmacy"): 15, ("amenity", "bank"): 15,
    ("amenity", "fuel"): 15, ("amenity", "place_of_worship"): 15, ("amenity", "police"): 15,
    ("amenity", "theatre"): 15, ("amenity", "cinema"): 15, ("amenity", "university"): 14,
    ("amenity", "parking"): 16,
    ("shop", "supermarket"): 15, ("shop", "convenience"): 16, ("shop", "books"): 16, ("shop", "beauty"): 16,
    ("shop", "electronics"): 16, ("shop", "clothes"): 16, ("shop", "bakery"): 16,
    ("tourism", "attraction"): 14, ("tourism", "museum"): 14, ("tourism", "artwork"): 16, ("tourism", "zoo"): 13,
    ("tourism", "hotel"): 15, ("tourism", "alpine_hut"): 14, ("tourism", "viewpoint"): 15,
    ("leisure", "park"): 14, ("leisure", "marina"): 14, ("leisure", "stadium"): 14, ("leisure", "garden"): 15,
    ("natural", "peak"): 12, ("natural", "beach"): 14, ("railway", "station"): 12, ("highway", "bus_stop"): 16,
    ("amenity", "ferry_terminal"): 13, ("aeroway", "aerodrome"): 10, ("amenity", "bus_station"): 14,
}
_POI_KIND = {"railway=station": "station", "amenity=ferry_terminal": "ferry_terminal"}
_POI_KEYS = ("amenity", "shop", "tourism", "leisure", "natural", "railway", "highway", "aeroway")


def poi_feature(tags, is_area: bool = False) -> Feature | None:
    for key in _POI_KEYS:
        value = tags.get(key)
        if not value:
            continue
        mz = _POI.get((key, value))
        if mz is None:
            if key == "shop":
                mz = 16
            else:
                continue
        if is_area and not tags.get("name"):
            return None
        kind = _POI_KIND.get(f"{key}={value}", value)
        extra = ()
        if kind == "peak":
            ele = _number(tags.get("ele"))
            extra = (("elevation", ele),)
            if not tags.get("name"):
                mz = 14
        return Feature("pois", kind, mz, f"{key}={value}" if kind != value else key, extra)
    return None


NODE_KEYS = ("place", *_POI_KEYS, "addr:housenumber")  # a node without any of them has no feature

# Every key that line_feature, boundary_feature, admin_level and properties read, and `natural` (coastlines):
# a way's line feature and its properties depend only on its tags with these keys and its boundary level
# (features._PointsAndLines caches them by those; tests/tiles/test_collect.py checks it).
WAY_READ_KEYS = frozenset((*LINE_KEYS, "area", "tunnel", "bridge", "oneway", "ref", "service", "admin_level",
                           "natural", *NAME_KEYS))

# Every key that area_features, poi_feature(is_area=True) and properties read: an area's features and
# their properties depend only on its tags with these keys (features._Areas caches them by those tags;
# tests/tiles/test_collect.py checks this on every area of the test extracts).
AREA_KEYS = frozenset((*(k for k, _ in _WATER_AREA), "water", "building", "building:part", "height",
                       "building:levels", *_LANDUSE_KEYS, "area", *_POI_KEYS, "ele", *NAME_KEYS))


def node_features(tags) -> list[Feature]:
    out = []
    p = place_feature(tags)
    if p:
        out.append(p)
        return out
    poi = poi_feature(tags)
    if poi:
        out.append(poi)
    elif tags.get("addr:housenumber"):
        out.append(Feature("buildings", "address", 14, None, (("addr_housenumber", tags.get("addr:housenumber")),)))
    return out
