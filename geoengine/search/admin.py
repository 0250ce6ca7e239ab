"""The administrative hierarchy of every search document, computed at build time (Nominatim's rules).

Each document gets, per level of `ADMIN_LEVELS`, the id of the administrative unit it lies in (-1: none):

- `boundary=administrative` relations (assembled by osmium's area handler) by point-in-polygon
  (shapely `intersects_xy` per polygon on the points of its bounding box): admin_level 2 country, 3-4 state (3 alone: "region"), 5-6 county, 7 municipality,
  8 city, 9-10 suburb, 11-12 neighbourhood; per level the deepest boundary wins. A boundary is linked to
  its place node (the relation's `label` member, else its `admin_centre`, else a place node inside it
  with the same name), as Nominatim links them: the unit then carries the node's place type as its
  address key (Vaduz: `town`), the node's names and the node's document row;
- where no boundary fills the city, suburb or neighbourhood level: the nearest place node
  (city/town/village, suburb/borough/hamlet, quarter/neighbourhood) within Nominatim's radius for its
  rank (`reverse_place_diameter`: city 0.16, town 0.08, village and suburb 0.04, hamlet and neighbourhood
  0.02 degrees; at the city level, distances of cities count x0.25 and towns x0.5), that lies inside the
  deepest boundary around the document (Nominatim ignores place nodes outside it);
- postcode: the document's own `addr:postcode`, else the `boundary=postal_code` around it, else the
  postcode whose centre (the mean of the objects carrying it, per country) is nearest within 5 km
  (Nominatim's default postcode extent).

A place document only takes parents above its own level (a village is not inside a neighbouring hamlet).
"""

from __future__ import annotations

import json

import numpy as np
import shapely

from geoengine.search.text import normalise

ADMIN_LEVELS = ("country", "state", "county", "municipality", "city", "suburb", "neighbourhood", "postcode")
COUNTRY, STATE, COUNTY, MUNICIPALITY, CITY, SUBURB, NEIGHBOURHOOD, POSTCODE = range(8)
# boundary admin_level -> level index
SLOT_OF_ADMIN = {2: COUNTRY, 3: STATE, 4: STATE, 5: COUNTY, 6: COUNTY, 7: MUNICIPALITY, 8: CITY, 9: SUBURB, 10: SUBURB,
                 11: NEIGHBOURHOOD, 12: NEIGHBOURHOOD}
# place=* value -> level index (place nodes as parents, and the level of a place document itself)
PLACE_SLOT = {"country": COUNTRY, "state": STATE, "province": STATE, "region": STATE, "county": COUNTY,
              "municipality": MUNICIPALITY, "city": CITY, "town": CITY, "village": CITY, "suburb": SUBURB,
              "borough": SUBURB, "hamlet": SUBURB, "quarter": NEIGHBOURHOOD, "neighbourhood": NEIGHBOURHOOD}
GUESS_SLOTS = (CITY, SUBURB, NEIGHBOURHOOD)  # levels a place node fills where no boundary does
# Nominatim's reverse_place_diameter(rank_search) in degrees, by place type
PLACE_RADIUS_DEG = {"city": 0.16, "town": 0.08, "borough": 0.08, "village": 0.04, "suburb": 0.04, "hamlet": 0.02,
                    "quarter": 0.02, "neighbourhood": 0.02}
# Nominatim orders the candidates of address rank 16 by distance x 0.25 (cities), x 0.5 (towns)
PLACE_WEIGHT = {"city": 0.25, "town": 0.5}
POSTCODE_EXTENT_KM = 5.0
KM_PER_DEG = 111.2
CHUNK = 65_536  # documents per place-node query (bounds the neighbour arrays)
GUESS_K = 8  # nearest place nodes examined per document and level


class Units:
    """The administrative units of a bundle as columns: unit u has level `slot[u]` (index into
    ADMIN_LEVELS), address key `key[u]` (country, state, county, municipality, city/town/village, suburb,
    hamlet, neighbourhood, postcode, ...), names `names[u]` ({"name": ..., "name:xx": ...}) and the row of its
    own document `row[u]` (-1: none)."""

    def __init__(self):
        self.slot: list[int] = []
        self.key: list[str] = []
        self.names: list[dict] = []
        self.row: list[int] = []
        self.cc: list[str | None] = []  # a country's ISO 3166-1 alpha-2 code

    def __len__(self) -> int:
        return len(self.slot)

    def add(self, slot: int, key: str, names: dict, row: int, cc: str | None = None) -> int:
        self.cc.append(cc)
        self.slot.append(slot)
        self.key.append(key)
        self.names.append(names)
        self.row.append(int(row))
        return len(self.slot) - 1


def _names_of(detail: str | None, fallback: str | None) -> dict:
    """name and name:xx of a document's detail JSON."""
    names = {}
    if detail:
        names = {k: v for k, v in json.loads(detail).get("names", {}).items() if k == "name" or k.startswith("name:")}
    if fallback and "name" not in names:
        names["name"] = fallback
    return names


def build_hierarchy(ds, boundaries, labels: dict[int, int], n_osm: int) -> tuple[np.ndarray, Units]:
    """(admin (n, 8) int32 unit ids, units) of every document of `ds` (its first `n_osm` rows are OSM)."""
    from scipy.spatial import cKDTree  # build time only: serving imports this module for its address helpers

    n = len(ds)
    lat = np.asarray(ds.lat, np.float64)
    lon = np.asarray(ds.lon, np.float64)
    admin = np.full((n, len(ADMIN_LEVELS)), -1, np.int32)
    units = Units()
    place_rows = [i for i in range(n_osm) if ds.index[i] == "places" and ds.kind[i] != "r" and ds.place_class[i] in PLACE_SLOT]
    by_name: dict[str, list[int]] = {}
    node_row: dict[int, int] = {}
    for i in place_rows:
        for v in {normalise(x) for x in [ds.name[i], ds.name_en[i], *ds.names[i]] if x}:
            by_name.setdefault(v, []).append(i)
        if ds.kind[i] == "n":
            node_row[int(ds.id[i].rsplit(":", 1)[1])] = i

    # 1. boundaries, linked to their place node
    polys, poly_unit, poly_slot, poly_level = [], [], [], []
    linked: set[int] = set()
    for b in boundaries:
        if b.admin_level == 0:  # postal_code
            u = units.add(POSTCODE, "postcode", {"name": b.postcode}, -1)
            slot = POSTCODE
        else:
            slot = SLOT_OF_ADMIN[b.admin_level]
            link = node_row.get(labels.get(b.osm_id, -1))
            if link is None or not shapely.contains_xy(b.geom, lon[link], lat[link]):
                link = None
                cands = {r for v in {normalise(x) for x in (b.names or {}).values() if x} for r in by_name.get(v, ())}
                cands = [r for r in sorted(cands) if PLACE_SLOT[ds.place_class[r]] == slot]
                inside = [r for r in cands if shapely.contains_xy(b.geom, lon[r], lat[r])]
                link = inside[0] if inside else None
            from geoengine.search.osm import ADMIN_KEYS

            key = b.place if b.place in PLACE_SLOT and PLACE_SLOT[b.place] == slot else ADMIN_KEYS[b.admin_level]
            names = dict(b.names or {"name": b.name})
            row = b.row
            if link is not None:
                pc = ds.place_class[link]
                if PLACE_SLOT.get(pc) == slot:  # the node is this unit (else it may still be a parent below it)
                    key = pc
                    linked.add(link)
                for k, v in _names_of(ds.detail[link], ds.name[link]).items():
                    names.setdefault(k, v)
                row = link
            u = units.add(slot, key, names, row, b.country_code)
        polys.append(b.geom)
        poly_unit.append(u)
        poly_slot.append(slot)
        poly_level.append(b.admin_level)
    if polys:
        # each polygon against the points of its bounding box (points sorted by longitude): contains_xy
        # prepares the polygon, ~50x faster than an STRtree query of point geometries against raw polygons
        area = shapely.area(np.asarray(polys, dtype=object))
        pu, ps, pl = np.asarray(poly_unit, np.int32), np.asarray(poly_slot, np.int64), np.asarray(poly_level, np.int64)
        by_lon = np.argsort(lon, kind="stable")
        slon = lon[by_lon]
        pair_pt, pair_poly = [], []
        for k, g in enumerate(polys):
            x0, y0, x1, y1 = g.bounds
            cand = by_lon[np.searchsorted(slon, x0, "left"):np.searchsorted(slon, x1, "right")]
            cand = cand[(lat[cand] >= y0) & (lat[cand] <= y1)]
            if len(cand):
                inside = cand[shapely.intersects_xy(g, lon[cand], lat[cand])]
                pair_pt.append(inside)
                pair_poly.append(np.full(len(inside), k, np.int64))
        del by_lon, slon
        if pair_pt:
            pt, poly = np.concatenate(pair_pt), np.concatenate(pair_poly)
            del pair_pt, pair_poly
            # per (document, level): the deepest boundary (highest admin_level), then the smallest
            order = np.lexsort((area[poly], -pl[poly], ps[poly], pt))
            pt, poly = pt[order], poly[order]
            first = np.ones(len(pt), bool)
            first[1:] = (pt[1:] != pt[:-1]) | (ps[poly[1:]] != ps[poly[:-1]])
            admin[pt[first], ps[poly[first]]] = pu[poly[first]]
            del pt, poly, order, first

    # 2. place nodes where no boundary fills the level, inside the deepest boundary around the document
    polygon_admin = admin[:, :POSTCODE].copy() if place_rows else None
    guess_unit: dict[int, int] = {}
    for slot in GUESS_SLOTS:
        cand = np.asarray([r for r in place_rows if PLACE_SLOT[ds.place_class[r]] == slot and r not in linked], np.int64)
        need = np.flatnonzero(admin[:, slot] < 0)
        if not len(cand) or not len(need):
            continue
        radius = np.asarray([PLACE_RADIUS_DEG.get(ds.place_class[r], 0.02) for r in cand.tolist()])
        weight = np.asarray([PLACE_WEIGHT.get(ds.place_class[r], 1.0) for r in cand.tolist()])
        tree = cKDTree(np.column_stack([lon[cand], lat[cand]]))
        k = min(GUESS_K, len(cand))
        # the deepest boundary level above this one around each document: a candidate must lie inside it
        above = polygon_admin[:, :slot]
        deep = np.where((above >= 0).any(axis=1), slot - 1 - np.argmax((above >= 0)[:, ::-1], axis=1), -1)
        for a in range(0, len(need), CHUNK):
            rows = need[a:a + CHUNK]
            dist, idx = tree.query(np.column_stack([lon[rows], lat[rows]]), k=k, distance_upper_bound=float(radius.max()))
            dist, idx = dist.reshape(len(rows), k), idx.reshape(len(rows), k)
            ok = np.isfinite(dist)
            idx_c = np.where(ok, idx, 0)
            ok &= dist <= radius[idx_c]
            d_rows = deep[rows]
            has_deep = d_rows >= 0
            own_deep = np.where(has_deep, polygon_admin[rows, np.maximum(d_rows, 0)], -1)
            cand_deep = polygon_admin[cand[idx_c], np.maximum(d_rows, 0)[:, None]]
            ok &= ~has_deep[:, None] | (cand_deep == own_deep[:, None])
            score = np.where(ok, dist * weight[idx_c], np.inf)
            best = np.argmin(score, axis=1)
            hit = np.isfinite(score[np.arange(len(rows)), best])
            chosen = idx_c[np.arange(len(rows)), best][hit]
            for j in np.unique(chosen).tolist():  # a unit for each place node that is someone's parent
                c = int(cand[j])
                if c not in guess_unit:
                    guess_unit[c] = units.add(slot, ds.place_class[c], _names_of(ds.detail[c], ds.name[c]), c)
            cand_unit = np.asarray([guess_unit.get(int(c), -1) for c in cand.tolist()], np.int32)
            admin[rows[hit], slot] = cand_unit[chosen]
    # a place document only has parents above its own level, and is its own unit at its level
    for r in place_rows:
        own = PLACE_SLOT[ds.place_class[r]]
        admin[r, own + 1:POSTCODE] = -1
        if r in guess_unit and units.slot[guess_unit[r]] == own:
            admin[r, own] = guess_unit[r]
    for r in range(n_osm, n):  # GeoNames places likewise
        own = PLACE_SLOT.get(ds.place_class[r])
        if own is not None:
            admin[r, own + 1:POSTCODE] = -1
    for b in boundaries:
        if b.admin_level and 0 <= b.row < n:
            admin[b.row, SLOT_OF_ADMIN[b.admin_level] + 1:POSTCODE] = -1

    # 3. postcodes: own addr:postcode, else the postal_code boundary (step 1), else the nearest postcode centre
    code_unit: dict[tuple[str, int], int] = {}
    own = [(i, p.strip()) for i, p in enumerate(ds.postcode[:n]) if p and p.strip()]
    sums: dict[int, list[float]] = {}
    for i, p in own:
        key = (p, int(admin[i, COUNTRY]))
        u = code_unit.get(key)
        if u is None:
            u = code_unit[key] = units.add(POSTCODE, "postcode", {"name": p}, -1)
            sums[u] = [0.0, 0.0, 0]
        admin[i, POSTCODE] = u
        s = sums[u]
        s[0] += lat[i]
        s[1] += lon[i]
        s[2] += 1
    need = np.flatnonzero(admin[:n_osm, POSTCODE] < 0)
    if sums and len(need):
        cu = np.asarray(list(sums), np.int32)
        cen = np.asarray([[s[0] / s[2], s[1] / s[2]] for s in sums.values()])
        lat0 = float(np.mean(cen[:, 0]))

        def xy(la, lo):
            return np.column_stack([lo * KM_PER_DEG * np.cos(np.radians(lat0)), la * KM_PER_DEG])

        dist, idx = cKDTree(xy(cen[:, 0], cen[:, 1])).query(xy(lat[need], lon[need]), distance_upper_bound=POSTCODE_EXTENT_KM)
        hit = np.isfinite(dist)
        admin[need[hit], POSTCODE] = cu[idx[hit]]
    return admin, units


DISPLAY_SLOTS = (NEIGHBOURHOOD, SUBURB, CITY, MUNICIPALITY, COUNTY, STATE)  # deepest first


def make_address(*, own: tuple[str, str] | None = None, housenumber=None, road=None, place=None,
                 parents: list[tuple[str, str]] = (), postcode=None, country=None, country_code=None) -> dict:
    """Nominatim's address object: the object itself for a POI ({"amenity": name}), house_number, road, the
    parents deepest first (neighbourhood, suburb, village/town/city, municipality, county, state), postcode,
    country, country_code (lower case, as Nominatim writes it)."""
    out: dict = {}
    if own and own[1]:
        out[own[0]] = own[1]
    if housenumber:
        out["house_number"] = housenumber
    if road:
        out["road"] = road
    if place:
        out.setdefault("place", place)
    for key, name in parents:
        if name:
            out.setdefault(key, name)
    if postcode:
        out["postcode"] = postcode
    if country:
        out.setdefault("country", country)
    if country_code:
        out["country_code"] = country_code.lower()
    return out


def make_display(name: str | None, address: dict, skip: str | None = None) -> str:
    """Name, then the address in its order (house number, road, ..., postcode, country), without repeats."""
    parts = [name] if name else []
    for key, val in address.items():
        if key in ("country_code", skip) or not val or val in parts:
            continue
        parts.append(val)
    return ", ".join(parts)


def unit_name(names: dict, lang: str | None) -> str | None:
    """A unit's name in `lang` (name:xx) when it has one, else its name."""
    if lang:
        for code in lang.split(","):
            code = code.split(";")[0].strip().lower()
            if code and names.get(f"name:{code}"):
                return names[f"name:{code}"]
    return names.get("name")
