"""What the geocoding dialects (Nominatim's and Photon's APIs) derive from the engine's places, beside
their wire formats: Nominatim's address rank, label (`addresstype`), bounding box around a point,
importance estimate, order of address parts and deduplication of a result list, the OSM id of a
search index row; Photon's layer of a place and its osm_tag filters.

Computation on the typed `Place` results of `Engine.geocode/reverse/lookup` (issue 27: the dialects
never compute; geoengine/dialects/nominatim.py and photon.py write the documents). The rules are
Nominatim 5's and Photon's, cited per function; docs/geocoding.md lists what differs.
"""

from __future__ import annotations

from geoengine.geo import haversine_m

# Nominatim's address keys, most specific first (the order of its `address` objects).
ADDRESS_ORDER = ("house_number", "house_name", "road", "hamlet", "croft", "isolated_dwelling", "neighbourhood",
                 "allotments", "quarter", "city_block", "residential", "farm", "farmyard", "industrial",
                 "commercial", "retail", "suburb", "city_district", "district", "borough", "subdivision",
                 "village", "town", "city", "municipality", "county", "state_district", "state", "region",
                 "province", "postcode", "country", "country_code")
_ORDER = {k: i for i, k in enumerate(ADDRESS_ORDER)}

# Nominatim's box around a point object, by class and type (degrees; 0.00005 for the rest)
NODE_EXTENT = {
    ("place", "continent"): 25, ("place", "country"): 7, ("place", "state"): 2.6, ("place", "province"): 2.6,
    ("place", "region"): 1.0, ("place", "county"): 0.7, ("place", "city"): 0.16, ("place", "municipality"): 0.16,
    ("place", "island"): 0.32, ("place", "postcode"): 0.16, ("place", "town"): 0.04, ("place", "village"): 0.02,
    ("place", "hamlet"): 0.02, ("place", "district"): 0.02, ("place", "borough"): 0.02, ("place", "suburb"): 0.02,
    ("place", "locality"): 0.01, ("place", "neighbourhood"): 0.01, ("place", "quarter"): 0.01,
    ("place", "city_block"): 0.01, ("landuse", "farm"): 0.01, ("place", "farm"): 0.01, ("place", "airport"): 0.015,
    ("aeroway", "aerodrome"): 0.015, ("railway", "station"): 0.005,
}
ADMIN_LABELS = {1: "continent", 2: "country", 3: "region", 4: "state", 5: "state_district", 6: "county",
                7: "municipality", 8: "city", 9: "city_district", 10: "suburb", 11: "neighbourhood", 12: "city_block"}
# GeocodeJSON's type of an address rank (Nominatim's GEOCODEJSON_RANKS)
GEOCODEJSON_RANKS = {3: "locality", 4: "country", **dict.fromkeys(range(5, 10), "state"),
                     **dict.fromkeys(range(10, 13), "county"), **dict.fromkeys(range(13, 17), "city"),
                     **dict.fromkeys(range(17, 22), "district"), **dict.fromkeys(range(22, 25), "locality"),
                     **dict.fromkeys(range(25, 28), "street"), 28: "house"}


# -- Nominatim -------------------------------------------------------------------------------------
def address_rank(place) -> int:
    """The address rank Nominatim would give the place (for labels and GeocodeJSON types): house
    numbers 30, streets 26-27, else its place rank."""
    if getattr(place, "housenumber", None):
        return 30
    return int(place.place_rank or 30)


def label_tag(place) -> str:
    """Nominatim's `addresstype` (classtypes.get_label_tag)."""
    cat, typ = place.category or "", place.type or ""
    rank = address_rank(place)
    extratags = place.extratags or {}
    if (cat, typ) in (("place", "postcode"), ("boundary", "postal_code")):
        label = "postcode"
    elif rank < 26 and "place" in extratags:
        label = extratags["place"]
    elif rank < 26 and "linked_place" in extratags:
        label = extratags["linked_place"]
    elif (cat, typ) == ("boundary", "administrative"):
        label = ADMIN_LABELS.get(rank // 2, "administrative")
    elif rank < 26:
        label = typ if typ != "yes" else cat
    elif rank < 28:
        label = "road"
    elif cat == "place" and typ in ("house_number", "house_name", "country_code"):
        label = typ
    else:
        label = cat
    return label.lower().replace(" ", "_")


def bbox_of(place) -> tuple[float, float, float, float]:
    """(min_lat, max_lat, min_lon, max_lon): the place's own box for ways and relations, else
    Nominatim's box around the point."""
    bb = place.boundingbox
    if bb is not None and place.osm_type != "node" and bb[0] != bb[1] and bb[2] != bb[3]:
        return tuple(float(v) for v in bb)
    cat = (place.category, place.type)
    if cat == ("place", "postcode"):
        d = 0.05 - 0.012 * ((place.place_rank or 25) - 21)
    else:
        d = NODE_EXTENT.get(cat, 0.00005)
    return place.lat - d, place.lat + d, place.lon - d, place.lon + d


def ordered_address(place) -> dict:
    """The place's address parts in Nominatim's order, most specific first (unknown keys before postcode)."""
    addr = place.address or {}
    return dict(sorted(addr.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER) - 2.5)))


def importance(place) -> float:
    """The place's importance, else Nominatim's estimate from its rank (0.40001 - rank / 75)."""
    imp = place.importance
    if imp is None:
        return 0.40001 - (place.place_rank or 30) / 75.0
    return float(imp)


def dedupe_places(places, limit: int) -> list:
    """Nominatim's deduplicate_results: one result per OSM object and per (osm type, class, display
    name, rank)."""
    seen_ids, seen_class, out = set(), set(), []
    for p in places:
        ident = (p.osm_type, p.osm_id) if p.osm_id is not None else ("row", p.place_id)
        cls = (p.osm_type, p.category, p.type, p.display_name, p.place_rank)
        if ident not in seen_ids and cls not in seen_class:
            out.append(p)
        seen_ids.add(ident)
        seen_class.add(cls)
        if len(out) >= limit:
            break
    return out


def osm_ref_of_place_id(engine, place_id: int) -> str | None:
    """The OSM id (N123, W456) of a place_id (a row of the bundle's search index), for engine.lookup."""
    ids = engine.search_index.cols["id"]
    if not 0 <= place_id < len(ids):
        return None
    source, _, rest = ids[place_id].partition(":")
    kind, _, num = rest.partition(":")
    letter = {"node": "N", "way": "W", "street": "W", "relation": "R"}.get(kind)
    return f"{letter}{num}" if source == "osm" and letter and num.isdecimal() else None


# -- Photon ----------------------------------------------------------------------------------------
_LAYERS = ((29, "house"), (26, "street"), (22, "locality"), (17, "district"), (13, "city"), (10, "county"),
           (5, "state"), (4, "country"))  # (lowest address rank, Photon's type)


def layer_of(place) -> str:
    """Photon's layer (type) (AddressType.fromRank) of a place's address rank."""
    if getattr(place, "housenumber", None):
        return "house"
    rank = int(place.place_rank or 30)
    for floor, layer in _LAYERS:
        if rank >= floor:
            return layer
    return "other"


def filtered_places(places: list, layers, tags, within: tuple[float, float, float] | None = None) -> list:
    """The places of the asked layers that pass the osm_tag filters (and lie `within` (lat, lon, metres):
    Photon's reverse radius)."""
    if layers:
        places = [pl for pl in places if layer_of(pl) in layers]
    if tags:
        places = [pl for pl in places if tag_match(pl, tags)]
    if within is not None:
        lat, lon, metres = within
        places = [pl for pl in places if float(haversine_m(lat, lon, pl.lat, pl.lon)) <= metres]
    return places


def tag_match(place, tags: list[str]) -> bool:
    """Photon's osm_tag filters on one place: every include must hold (any include of the list), no
    exclude may."""
    key, value = place.category or "", place.type or ""
    includes, excluded = [], False
    for f in tags:
        k, _, v = f.partition(":")
        neg_k, neg_v = k.startswith("!"), v.startswith("!")
        k, v = k.lstrip("!"), v.lstrip("!")
        hit = (not k or k == key) and (not v or v == value)
        if neg_k or (neg_v and not k):
            excluded |= hit
        elif neg_v:  # key:!value: the key, not that value
            includes.append(k == key and v != value)
        else:
            includes.append(hit)
    return not excluded and (not includes or any(includes))
