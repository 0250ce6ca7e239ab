"""Address documents, the administrative hierarchy, the address object and reverse by zoom, on the real
Nominatim test extract (Liechtenstein, 3,740 objects with house numbers, 210 administrative boundaries,
an interpolation line) and Andorra. The oracles are computed here from the extract itself, apart from the
build: osmium's area assembler and shapely for containment and distances."""

from __future__ import annotations

import math

import numpy as np
import osmium
import pytest
import shapely
import shapely.ops

from geoengine.search.addresses import interpolated_numbers
from geoengine.search.admin import ADMIN_LEVELS, CITY, COUNTRY, COUNTY, MUNICIPALITY, POSTCODE, postcode_fits
from geoengine.search.text import normalise
from tests.conftest import data_file

NOMINATIM = "liechtenstein/nominatim-apidb-test-data.osm.pbf"
LIECHTENSTEIN = "liechtenstein/valhalla-liechtenstein-latest.osm.pbf"
SETTLEMENT_BOX_M = {"city": 15_000, "town": 4_000, "village": 2_000}


@pytest.fixture(scope="module")
def nominatim_index(tmp_path_factory):
    """The search index of the Nominatim test extract (the search stage alone: documents + index)."""
    from geoengine.search.documents import build_documents
    from geoengine.search.index import SearchIndex
    from geoengine.search.write import write_index

    out = tmp_path_factory.mktemp("nominatim-search")
    ds, _ = build_documents(data_file(NOMINATIM))
    write_index(out, ds)
    return SearchIndex(out)


class Extract:
    """What the oracles read from an extract: administrative and postal boundaries (osmium's areas), named
    highways as lines, the interpolation ways, and objects with a postcode."""

    def __init__(self, path):
        self.admin: list[tuple[int, dict, object]] = []  # (admin_level, tags, polygon)
        self.postal: list[tuple[str, object]] = []
        self.streets: list[tuple[str, object]] = []
        self.interpolations: list[tuple[int, str, object, list[int]]] = []
        self.postcode_points: list[tuple[str, float, float]] = []
        self.settlements: list[tuple[str, str, float, float]] = []  # (name, place, lon, lat) of place nodes
        self.street_zips: dict[str, list[tuple[str, object]]] = {}  # street name -> (postcode, line) of its ways
        self.roads: list[tuple[object, str | None]] = []  # (line, postcode tag) of every road with a name or a ref
        self.carriers: list[tuple[str, float, float]] = []  # (postcode, lon, lat) of every object carrying one
        self.by_street: set[str] = set()  # "n12" / "w34": objects whose own tags name their street
        self.place_codes: dict[str, str] = {}  # place node name -> its own postcode (postal_code, addr:postcode)
        wkb = osmium.geom.WKBFactory()
        assembled, relations, lines = set(), {}, {}
        for o in osmium.FileProcessor(str(path)).with_areas().with_locations():
            tags = dict(o.tags)
            if o.is_area():
                if o.from_way() and tags.get("boundary") != "administrative":
                    continue
                try:
                    geom = shapely.from_wkb(wkb.create_multipolygon(o))
                except Exception:
                    continue
                if not o.from_way():
                    assembled.add(o.orig_id())
                if tags.get("boundary") == "administrative" and tags.get("admin_level", "").isdigit() and "name" in tags:
                    self.admin.append((int(tags["admin_level"]), tags, geom))
                elif tags.get("boundary") == "postal_code" and tags.get("postal_code"):
                    self.postal.append((tags["postal_code"], geom))
            elif o.is_relation():
                if tags.get("boundary") == "administrative" and tags.get("admin_level", "").isdigit() and "name" in tags:
                    relations[o.id] = (tags, [(m.ref, m.role) for m in o.members if m.type == "w"])
            elif o.is_way():
                try:
                    line = shapely.from_wkb(wkb.create_linestring(o))
                except Exception:
                    continue
                lines[o.id] = line
                if "highway" in tags and "name" in tags and "place" not in tags:
                    self.streets.append((tags["name"], line))
                    zip_ = next((tags[k] for k in ("postal_code", "postcode", "addr:postcode", "tiger:zip_left",
                                                   "tiger:zip_right") if tags.get(k)), None)
                    if zip_:
                        self.street_zips.setdefault(tags["name"], []).append((zip_, line))
                if "addr:interpolation" in tags:
                    self.interpolations.append((o.id, tags["addr:interpolation"], line, [n.ref for n in o.nodes]))
                if "highway" in tags and ("name" in tags or "ref" in tags) and "place" not in tags:
                    self.roads.append((line, next((tags[k] for k in ("postal_code", "postcode", "addr:postcode",
                                                                     "tiger:zip_left", "tiger:zip_right") if tags.get(k)), None)))
            own = tags.get("addr:postcode") or tags.get("postal_code")
            if own and tags.get("boundary") != "postal_code" and (o.is_node() or o.is_way()):
                if o.is_node():
                    self.carriers.append((own, o.location.lon, o.location.lat))
                elif o.id in lines:
                    xy = np.asarray(lines[o.id].coords)
                    x, y = (xy[:-1] if len(xy) > 2 and lines[o.id].is_closed else xy).mean(axis=0)
                    self.carriers.append((own, float(x), float(y)))
                if o.is_node() and "place" in tags and "name" in tags:
                    self.place_codes[tags["name"]] = own
            if (o.is_node() or o.is_way()) and "addr:street" in tags:
                self.by_street.add(f"{o.type_str()}{o.id}")
            if o.is_node() and "addr:postcode" in tags:
                self.postcode_points.append((tags["addr:postcode"], o.location.lat, o.location.lon))
            if o.is_node() and tags.get("place") in SETTLEMENT_BOX_M and "name" in tags:
                self.settlements.append((tags["name"], tags["place"], o.location.lon, o.location.lat))
        self.street_tree = shapely.STRtree([g for _, g in self.streets])
        self.road_tree = shapely.STRtree([g for g, _ in self.roads])
        # relations a member of which the clipped extract lacks (osmium's assembler skips them): the rings the
        # members present close, as osm2pgsql builds them (merged lines that end where they start)
        for rid, (tags, members) in relations.items():
            if rid in assembled:
                continue
            rings = {}
            for inner in (False, True):
                merged = shapely.ops.linemerge([lines[r] for r, role in members if r in lines and (role == "inner") == inner])
                parts = [merged] if merged.geom_type == "LineString" else list(getattr(merged, "geoms", []))
                rings[inner] = shapely.union_all([shapely.Polygon(p) for p in parts if p.is_closed and len(p.coords) >= 4])
            if rings[False].is_empty:
                continue
            self.admin.append((int(tags["admin_level"]), tags, rings[False].difference(rings[True])))

    def containing(self, lon: float, lat: float, level: int, geometry: bool = False) -> list:
        """Tags (or (tags, polygon)) of the boundaries of `level` that contain the point."""
        p = shapely.Point(lon, lat)
        return [(t, g) if geometry else t for lv, t, g in self.admin if lv == level and g.intersects(p)]

    def settlement_near(self, name: str, lon: float, lat: float, within) -> bool:
        """A city/town/village node called `name` inside one of the polygons `within`, whose fuzzy area
        (Nominatim: a box of 15 / 4 / 2 km around a city / town / village) holds the point."""
        for nm, place, x, y in self.settlements:
            if nm != name:
                continue
            half = SETTLEMENT_BOX_M[place]
            if (abs(y - lat) * 111_200 <= half and abs(x - lon) * 111_200 * math.cos(math.radians(lat)) <= half
                    and any(g.intersects(shapely.Point(x, y)) for g in within)):
                return True
        return False


@pytest.fixture(scope="module")
def liechtenstein_index(tmp_path_factory):
    """The search index of Liechtenstein's Geofabrik extract (its stacked villages: Rotenboden in
    Triesenberg, Schaanwald in Mauren, Nendeln in Eschen)."""
    from geoengine.search.documents import build_documents
    from geoengine.search.index import SearchIndex
    from geoengine.search.write import write_index

    out = tmp_path_factory.mktemp("liechtenstein-search")
    ds, _ = build_documents(data_file(LIECHTENSTEIN))
    write_index(out, ds)
    return SearchIndex(out)


@pytest.fixture(scope="module")
def liechtenstein_extract():
    return Extract(data_file(LIECHTENSTEIN))


@pytest.fixture(scope="module")
def nominatim_extract():
    return Extract(data_file(NOMINATIM))


@pytest.fixture(scope="module")
def andorra_extract():
    return Extract(data_file("andorra/andorra.osm.pbf"))


def _rows(ix, *indexes) -> list[int]:
    return [i for i in range(ix.n) if ix.cols["index"][i] in indexes]


def _check_hierarchy(ix, extract, rows) -> dict:
    """The address keys of each row against the boundaries that contain its point."""
    seen = {"country": 0, "county": 0, "municipality": 0, "city": 0, "stacked": 0, "postcode": 0}
    for row in rows:
        lat, lon = float(ix.lat[row]), float(ix.lon[row])
        a = ix.address(row)
        countries = extract.containing(lon, lat, 2)
        if countries:
            assert a.get("country") in {t["name"] for t in countries}, (ix.cols["id"][row], a)
            seen["country"] += 1
        counties = extract.containing(lon, lat, 6)
        if counties:
            assert a.get("county") in {t["name"] for t in counties}, (ix.cols["id"][row], a)
            seen["county"] += 1
        municipalities = extract.containing(lon, lat, 7)
        if municipalities:
            assert a.get("municipality") in {t["name"] for t in municipalities}, (ix.cols["id"][row], a)
            seen["municipality"] += 1
        cities = extract.containing(lon, lat, 8, geometry=True)
        town = [a[k] for k in ("city", "town", "village") if k in a]
        if cities:
            # the level 8 boundary around the point is in the address: under its key (town: Vaduz), or as
            # the municipality where a settlement node inside it names the place (Nominatim's stacked
            # settlements: village: Rotenboden, municipality: Triesenberg)
            names = {v for t, _ in cities for k, v in t.items() if k == "name" or k.startswith("name:")}
            assert names & {*town, a.get("municipality")} and len(town) <= 2, (ix.cols["id"][row], a, names)
            for v in town:  # every other settlement is a place node inside that boundary, near the point
                assert v in names or extract.settlement_near(v, lon, lat, [g for _, g in cities]), (
                    ix.cols["id"][row], a, names)
            seen["city"] += 1
            seen["stacked"] += any(v not in names for v in town)
        else:
            assert len(town) <= 1
        own = (ix.detail[row] and __import__("json").loads(ix.detail[row]).get("address", {}).get("postcode"))
        postal = [c for c, g in extract.postal if g.intersects(shapely.Point(lon, lat))]
        if own:
            assert a.get("postcode") == own.strip()
            seen["postcode"] += 1
        elif postal:
            assert a.get("postcode") in postal, (ix.cols["id"][row], a, postal)
            seen["postcode"] += 1
    return seen


@pytest.mark.parametrize("which", ["nominatim", "liechtenstein", "andorra"])
def test_hierarchy_equals_the_containing_boundaries(which, request):
    """500 random addresses and POIs: country, county, village/town/city (or municipality beside a stacked
    settlement node) and postcode are the boundaries (admin_level 2, 6, 7, 8, postal_code) that contain the
    point; shapely containment is the oracle. A settlement named after a place node is a node inside that
    boundary whose fuzzy area holds the point."""
    if which in ("nominatim", "liechtenstein"):
        ix, extract = request.getfixturevalue(f"{which}_index"), request.getfixturevalue(f"{which}_extract")
    else:
        ix, extract = request.getfixturevalue("andorra").search_index, request.getfixturevalue("andorra_extract")
    rows = _rows(ix, "addresses", "pois")
    rng = np.random.default_rng(26)
    pick = rng.choice(rows, min(500, len(rows)), replace=False).tolist()
    seen = _check_hierarchy(ix, extract, pick)
    # the checks ran: most points lie in a country and a municipality assembled from the extract (the
    # Nominatim extract also holds clipped parts of Austria and Switzerland; Andorra's parishes are level 7)
    if which in ("nominatim", "liechtenstein"):
        assert seen["country"] > 0.8 * len(pick), seen
        assert seen["city"] > 0.5 * len(pick) and seen["county"] > 0.5 * len(pick), seen
        # fewer objects of Geofabrik's extract carry addr:postcode (and none a postal_code boundary)
        assert seen["postcode"] > (0.3 if which == "nominatim" else 0.05) * len(pick), seen
        assert seen["stacked"] > 0.05 * len(pick), seen  # Rotenboden, Schaanwald, Nendeln, Ebenholz, ...
    else:  # Andorra's own boundary is clipped from the extract: its country is its place=country node
        assert seen["municipality"] > 0.5 * len(pick), seen
        assert sum(ix.address(r).get("country") == "Andorra" for r in pick) > 0.8 * len(pick)
        # Andorra has no level 8: its towns and villages are the nearest place nodes within their radius
        assert sum(any(k in ix.address(r) for k in ("town", "village", "city")) for r in pick) > 0.5 * len(pick)


def test_admin_array_and_units(nominatim_index):
    ix = nominatim_index
    assert ix.admin.shape == (ix.n, len(ADMIN_LEVELS)) and ix.admin.dtype == np.int32
    vaduz = next(i for i in range(ix.n) if ix.cols["name"][i] == "Vaduz" and ix.cols["id"][i].startswith("osm:node"))
    rows = [i for i in _rows(ix, "addresses") if ix.address(i).get("town") == "Vaduz"]
    assert len(rows) > 50
    # Vaduz is the city level, or the municipality level where a village node inside Vaduz's boundary
    # (Ebenholz, Mühleholz) is the city level: one unit per level, both the boundary linked to the town node
    alone = [r for r in rows if "village" not in ix.address(r)]
    stacked = [r for r in rows if "village" in ix.address(r)]
    assert len(alone) > 50 and len(stacked) > 50
    assert any(ix.address(r)["village"] == "Ebenholz" for r in stacked)
    uid = int(ix.admin[alone[0], CITY])
    assert "vaduz" in ix.admin_unit_names(uid) and ix.admin_unit_row(uid) == vaduz
    assert all(int(ix.admin[r, CITY]) == uid for r in alone)
    muni = int(ix.admin[stacked[0], MUNICIPALITY])
    assert ix.admin_unit_key(muni) == "town" and ix.admin_unit_row(muni) == vaduz
    assert all(int(ix.admin[r, MUNICIPALITY]) == muni for r in stacked)
    assert all(ix.admin_unit_key(int(ix.admin[r, CITY])) == "village" for r in stacked)
    country = int(ix.admin[rows[0], COUNTRY])
    assert "liechtenstein" in ix.admin_unit_names(country) and ix.admin_unit_row(country) >= 0
    # the town's own document is its unit at its level and has no parent below it
    assert int(ix.admin[vaduz, CITY]) == uid and (ix.admin[vaduz, CITY + 1:POSTCODE] < 0).all()


def test_every_house_number_is_an_address(nominatim_index):
    """Every node and building with addr:housenumber is a document with its number (POIs keep their own)."""
    ix = nominatim_index
    want = {}
    for o in osmium.FileProcessor(str(data_file(NOMINATIM)), osmium.osm.NODE | osmium.osm.WAY):
        if "addr:housenumber" in o.tags:
            want[f"osm:{'node' if o.is_node() else 'way'}:{o.id}"] = o.tags["addr:housenumber"]
    got = {ix.cols["id"][i]: ix.housenumber(i) for i in range(ix.n) if ix.cols["id"][i] in want}
    assert len(got) >= 0.97 * len(want), (len(got), len(want))  # a few ways lack node locations in the extract
    assert all(got[k] == want[k] for k in got)
    for i in _rows(ix, "addresses")[:300]:
        if not ix.cols["id"][i].startswith("osm:interpolation"):
            assert ix.address(i)["house_number"] == ix.housenumber(i)


def test_interpolation_numbers_lie_on_the_line_in_order(nominatim_index, nominatim_extract):
    ix = nominatim_index
    assert nominatim_extract.interpolations
    for way_id, kind, line, _ in nominatim_extract.interpolations:
        rows = [i for i in range(ix.n) if ix.cols["id"][i].startswith(f"osm:interpolation:{way_id}:")]
        assert rows, way_id
        nums = [int(ix.housenumber(r)) for r in rows]
        assert all(n % 2 == (1 if kind == "odd" else 0) for n in nums) if kind in ("odd", "even") else True
        assert sorted(nums) == list(range(min(nums), max(nums) + 1, 2 if kind in ("odd", "even") else 1))
        shares = []
        for r, n in zip(rows, nums, strict=True):
            p = shapely.Point(float(ix.lon[r]), float(ix.lat[r]))
            assert line.distance(p) < 1e-7, (n, line.distance(p))  # on the line
            shares.append(line.project(p, normalized=True))
            assert ix.osm_type(r) == "W" and ix.osm_id(r) == way_id
            a = ix.address(r)
            assert a["house_number"] == str(n) and a.get("road")
        # numbers advance along the line (one way or the other), evenly for a straight two-point line
        order = np.argsort(nums)
        s = np.asarray(shares)[order]
        assert (np.diff(s) > 0).all() or (np.diff(s) < 0).all()


@pytest.mark.parametrize("kind,a,b,want", [
    ("odd", "1", "9", ["3", "5", "7"]), ("odd", "2", "10", ["3", "5", "7", "9"]), ("even", "9", "1", ["8", "6", "4", "2"]),
    ("all", "3", "6", ["4", "5"]), ("2", "10", "16", ["12", "14"]), ("alphabetic", "12a", "12e", ["12b", "12c", "12d"]),
    ("odd", "1", "3", None), ("odd", "1a", "7", None), ("alphabetic", "12a", "13c", None), ("bogus", "1", "9", None),
])
def test_interpolated_numbers(kind, a, b, want):
    got = interpolated_numbers(kind, a, b)
    assert (None if got is None else [n for n, _ in got]) == want
    if got:  # the share of the way grows from a to b, strictly between 0 and 1
        shares = [s for _, s in got]
        assert all(0 < x < 1 for x in shares) and shares == sorted(shares)


def test_addr_place_fallback(nominatim_index):
    ix = nominatim_index
    with_place = []
    for o in osmium.FileProcessor(str(data_file(NOMINATIM)), osmium.osm.NODE | osmium.osm.WAY):
        if "addr:housenumber" in o.tags and "addr:place" in o.tags and "addr:street" not in o.tags:
            with_place.append((f"osm:{'node' if o.is_node() else 'way'}:{o.id}", o.tags["addr:place"], o.tags["addr:housenumber"]))
    assert with_place
    for doc_id, place, hn in with_place:
        row = ix.row_of(doc_id)
        a = ix.address(row)
        assert "road" not in a and place in a.values() and a["house_number"] == hn
        if ix.cols["index"][row] == "addresses":
            assert ix.cols["name"][row] == f"{place} {hn}"


def test_nearest_street_fallback(nominatim_index, nominatim_extract):
    """An address without addr:street or addr:place belongs to the nearest named street (shapely distance
    over every named highway of the extract), within 50 m of the exact nearest (the search uses points
    every 50 m along the streets)."""
    ix = nominatim_index
    ex = nominatim_extract
    rows = [i for i in _rows(ix, "addresses") if '"street"' not in (ix.detail[i] or "") and '"place"' not in (ix.detail[i] or "")
            and not ix.cols["id"][i].startswith("osm:interpolation")]
    assert len(rows) > 20
    km = 111.2
    for row in rows:
        lat, lon = float(ix.lat[row]), float(ix.lon[row])
        p = shapely.Point(lon, lat)
        road = ix.address(row).get("road")
        assert road, ix.cols["id"][row]
        # distance (approximately in metres) to the nearest line of each name
        kx = math.cos(math.radians(lat))
        cand = ex.street_tree.query(p.buffer(0.01))
        dist = {}
        for k in cand.tolist():
            name, g = ex.streets[k]
            q = shapely.ops.nearest_points(g, p)[0]
            d = math.hypot((q.x - lon) * kx, q.y - lat) * km * 1000
            dist[name] = min(dist.get(name, 1e18), d)
        best = min(dist.values())
        assert dist.get(road, 1e18) <= best + 50, (ix.cols["id"][row], road, sorted(dist.items(), key=lambda x: x[1])[:3])
        assert ix.cols["name"][row] == f"{road} {ix.housenumber(row)}"


def _parent_road(ex, lon: float, lat: float):
    """The oracle's parent street of an object without addr:street: the nearest road with a name or a ref
    within 0.1 degree (Nominatim's getNearestRoadPlaceId), by shapely distance; (line, postcode tag) or None."""
    p = shapely.Point(lon, lat)
    k = ex.road_tree.nearest(p)
    line, tag = ex.roads[int(k)]
    return (line, tag) if line.distance(p) <= 0.1 else None


def _houses_without_postcode(ix, ex, cc: str) -> list[int]:
    """Addresses and POIs of Nominatim's rank 30 (amenity, shop, tourism, building, ...: the keys its
    address-levels.json ranks 30) of country `cc` without their own postcode, without addr:street, outside
    every postal_code boundary (the Autauga County half of Nominatim's test extract, "US", has no country
    boundary: its documents are those west of Greenwich)."""
    def country(i):
        if cc == "US":
            return "US" if float(ix.lon[i]) < 0 else ""
        code = int(ix._country[i])
        return chr(code >> 8) + chr(code & 0xFF) if code else ""

    return [i for i in _rows(ix, "addresses", "pois") if '"postcode"' not in (ix.detail[i] or "") and country(i) == cc
            and (ix.cols["index"][i] == "addresses" or ix.osm_key(i) in ("amenity", "shop", "tourism", "building", "office", "craft"))
            and ix.cols["id"][i].startswith(("osm:node", "osm:way"))
            and f"{ix.cols['id'][i].split(':')[1][0]}{ix.cols['id'][i].rsplit(':', 1)[1]}" not in ex.by_street
            and not any(g.intersects(shapely.Point(float(ix.lon[i]), float(ix.lat[i]))) for _, g in ex.postal)]


def test_postcode_of_the_parent_street(nominatim_index, nominatim_extract):
    """An address without its own postcode takes its parent street way's postcode tag (TIGER's zips in
    Autauga County), as Nominatim does: the parent is the nearest road (oracle: shapely distance to every
    road with a name or a ref)."""
    ix, ex = nominatim_index, nominatim_extract
    rows = _houses_without_postcode(ix, ex, "US")
    tagged = same = 0
    for row in rows:
        road = _parent_road(ex, float(ix.lon[row]), float(ix.lat[row]))
        if road is None or not road[1] or not postcode_fits(road[1], "US"):
            continue
        tagged += 1
        same += ix.postcode(row) == road[1]
    assert tagged > 100 and same >= 0.95 * tagged, (same, tagged)


def test_postcode_of_the_street_centre(liechtenstein_index, liechtenstein_extract):
    """Where the parent street has no postcode tag, its postcode is the one whose area covers the street's
    centre (the point halfway along its line), the nearest centre in degrees (Nominatim's
    get_nearest_postcode of the street's centroid); a postcode's centre is the mean of the extract's objects
    carrying it (nodes, and ways by their vertices), its area the box of 4 km around it (Liechtenstein). A
    village with a postcode of its own (Nendeln's postal_code 9485) gives it to the streets of its area
    first, so those are accepted too."""
    ix, ex = liechtenstein_index, liechtenstein_extract
    li = [g for lv, t, g in ex.admin if lv == 2 and t.get("ISO3166-1") == "LI"]
    assert li
    by_code: dict[str, list[tuple[float, float]]] = {}
    for code, x, y in ex.carriers:
        if postcode_fits(code, "LI") and any(g.intersects(shapely.Point(x, y)) for g in li):
            by_code.setdefault(code.strip(), []).append((x, y))
    for line, tag in ex.roads:  # the streets' own postcode tags are carriers too
        if tag and postcode_fits(tag, "LI") and any(g.intersects(line.centroid) for g in li):
            xy = np.asarray(line.coords)
            by_code.setdefault(tag.strip(), []).append(tuple(xy.mean(axis=0)))
    codes = sorted(by_code)
    cen = np.asarray([np.mean(by_code[c], axis=0) for c in codes])
    rows = _houses_without_postcode(ix, ex, "LI")
    checked = same = 0
    for row in np.random.default_rng(5).choice(rows, min(300, len(rows)), replace=False).tolist():
        road = _parent_road(ex, float(ix.lon[row]), float(ix.lat[row]))
        if road is None or road[1]:
            continue
        mid = road[0].interpolate(0.5, normalized=True)
        dx = np.abs(cen[:, 0] - mid.x) * 111_200 * math.cos(math.radians(mid.y))
        dy = np.abs(cen[:, 1] - mid.y) * 111_200
        covers = (dx <= 4000) & (dy <= 4000)
        if not covers.any() or (np.maximum(dx, dy)[covers] > 3990).any():
            continue  # no area, or one at the edge of its box (the metres of the two sides differ slightly)
        d = np.where(covers, np.hypot(cen[:, 0] - mid.x, cen[:, 1] - mid.y), np.inf)
        want = codes[int(np.argmin(d))]
        got = ix.postcode(row)
        own = {ex.place_codes.get(ix.address(row).get(k)) for k in ("village", "hamlet", "town", "suburb")}
        checked += 1
        same += got == want or got in own
    assert checked > 100 and same >= 0.95 * checked, (same, checked)


def test_postcode_of_an_area_follows_its_geometry(nominatim_index, nominatim_extract):
    """A lake, a park or a river (Nominatim's address rank below 30: no parent street) without a postcode of
    its own takes it from its geometry, as Nominatim's get_nearest_postcode does: an area the postcode whose
    centre is the only one of its country inside it (its bounding box: the build keeps no polygon), else
    none; a line of 0.02 degree or more none. Oracle: the ways read here, the centres from the extract's
    objects carrying a postcode."""
    ix, ex = nominatim_index, nominatim_extract
    by_code: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for code, x, y in ex.carriers:
        cc = "US" if x < 0 else "LI"
        if postcode_fits(code, cc) and (cc == "US" or any(
                g.intersects(shapely.Point(x, y)) for lv, t, g in ex.admin if lv == 2 and t.get("ISO3166-1") == "LI")):
            by_code.setdefault((code.strip(), cc), []).append((x, y))
    for line, tag in ex.roads:
        cc = "US" if line.centroid.x < 0 else "LI"
        if tag and postcode_fits(tag, cc):
            by_code.setdefault((tag.strip(), cc), []).append(tuple(np.asarray(line.coords).mean(axis=0)))
    keys = sorted(by_code)
    cen = np.asarray([np.mean(by_code[k], axis=0) for k in keys])
    wkb = osmium.geom.WKBFactory()
    checked = same = 0
    for w in osmium.FileProcessor(str(data_file(NOMINATIM)), osmium.osm.WAY | osmium.osm.NODE).with_locations():
        t = w.tags
        if not w.is_way() or "name" not in t or "addr:postcode" in t or not (
                t.get("waterway") == "river" or t.get("natural") == "water" or t.get("leisure") == "park"):
            continue
        row = ix.row_of(f"osm:way:{w.id}")
        if row is None or row < 0:
            continue
        try:
            line = shapely.from_wkb(wkb.create_linestring(w))
        except Exception:
            continue
        cc = "US" if line.centroid.x < 0 else "LI"
        x0, y0, x1, y1 = line.bounds
        if w.is_closed():
            inside = [k for k, (code, c) in enumerate(keys) if c == cc and x0 <= cen[k, 0] <= x1 and y0 <= cen[k, 1] <= y1]
            want = keys[inside[0]][0] if len(inside) == 1 else None
        elif line.length >= 0.02:
            want = None
        else:
            continue
        checked += 1
        same += ix.postcode(row) == want
    assert checked >= 10 and same >= 0.9 * checked, (same, checked)


def test_reverse_zoom_on_real_points(nominatim_index):
    ix = nominatim_index
    rng = np.random.default_rng(18)
    rows = [i for i in _rows(ix, "addresses") if not ix.cols["id"][i].startswith("osm:interpolation")]
    countries = 0
    for row in rng.choice(rows, 40, replace=False).tolist():
        lat, lon = float(ix.lat[row]), float(ix.lon[row])
        r18 = ix.reverse_zoom(lat, lon, 18)
        # the nearest address or POI: on the spot (another object may share the point)
        assert r18 >= 0 and ix.cols["index"][r18] in ("addresses", "pois", "streets")
        assert abs(float(ix.lat[r18]) - lat) < 1e-6 and abs(float(ix.lon[r18]) - lon) < 1e-6 or ix.cols["index"][r18] == "streets"
        r16 = ix.reverse_zoom(lat, lon, 16)
        assert ix.cols["index"][r16] == "streets" and ix.cols["category"][r16] not in ("service", "footway", "path", "track")
        r17 = ix.reverse_zoom(lat, lon, 17)
        assert ix.cols["index"][r17] == "streets"
        # zoom 10: the town/village of the address; 8: its county; 3: its country
        city = int(ix.admin[row, CITY])
        if city >= 0:
            assert ix.reverse_zoom(lat, lon, 10) == ix.admin_unit_row(city)
        county = int(ix.admin[row, COUNTY])
        if county >= 0 and ix.admin_unit_row(county) >= 0:
            assert ix.reverse_zoom(lat, lon, 8) == ix.admin_unit_row(county)
        r3 = ix.reverse_zoom(lat, lon, 3)
        country = int(ix.admin[row, COUNTRY])  # the extract's Alabama part has no country boundary
        assert r3 == (ix.admin_unit_row(country) if country >= 0 else -1)
        if country >= 0:
            assert ix.cols["place_class"][r3] == "country" and normalise(ix.cols["name"][r3]) in ix.admin_unit_names(country)
            countries += 1
        assert ix.reverse_zoom(lat, lon, 1) == -1
    assert countries > 20
    # zoom 16 is the nearest major street: no major street is nearer than the answer (item distances)
    from geoengine.search.index import MINOR_STREETS, segment_distance_m

    lat, lon = float(ix.lat[rows[0]]), float(ix.lon[rows[0]])
    r16 = ix.reverse_zoom(lat, lon, 16)
    items = np.asarray(ix.items)
    docs = np.asarray(ix.item_doc)
    d = segment_distance_m(lat, lon, items)
    major = np.asarray([ix.cols["index"][int(x)] == "streets" and ix.cols["category"][int(x)] not in MINOR_STREETS for x in docs])
    assert d[docs == r16].min() <= d[major].min() + 1e-6


def test_display_name_in_another_language(andorra):
    ix = andorra.search_index
    row = next(i for i in _rows(ix, "pois") if ix.address(i).get("country") == "Andorra" and ix.cols["name"][i])
    assert ix.display_name(row).endswith("Andorra") and ix.display_name(row) == ix.cols["display_name"][row]
    fr = ix.display_name(row, "fr")
    assert fr.endswith("Andorre") and ix.address(row, "fr")["country"] == "Andorre"
    # a place with its own name:xx shows it first
    la = next(i for i in _rows(ix, "places") if ix.cols["name"][i] == "Andorra la Vella" and ix.cols["id"][i].startswith("osm:node"))
    assert ix.display_name(la, "fr").split(", ")[0] == "Andorre-la-Vieille"


def test_results_carry_the_address(andorra):
    res = andorra.search("Avinguda Meritxell", size=5)["results"]
    assert res and all(r["address"]["country_code"] == "ad" for r in res)
    rev = andorra.reverse(lon=1.5218, lat=42.5075, radius="500m", size=5)["results"]
    assert rev and all("address" in r and r["address"].get("country") == "Andorra" for r in rev)
    street = next(r for r in res if r["index"] == "streets")
    assert street["address"]["road"] == street["name"]


def test_osm_identity(nominatim_index):
    ix = nominatim_index
    for i in range(0, ix.n, 97):
        doc_id = ix.cols["id"][i]
        kind = doc_id.split(":")[1]
        assert ix.osm_type(i) == {"node": "N", "way": "W", "relation": "R", "street": "W", "interpolation": "W"}[kind]
        assert ix.osm_id(i) == int(doc_id.split(":")[2])
        key, val = ix.osm_key(i), ix.osm_value(i)
        idx = ix.cols["index"][i]
        if idx == "streets":
            assert key == "highway" and val == ix.cols["category"][i]
        elif idx == "pois":
            assert (key, val) == (ix.cols["place_class"][i], ix.cols["category"][i])
        elif idx == "addresses":
            assert (key == "place" and val == "house") or key == "building"
        else:
            assert key in ("place", "boundary")


def test_house_number_queries_find_the_house(nominatim_index):
    """The address documents are found by "street number" (a number the street has), and the house number
    is in the result's address."""
    ix = nominatim_index
    rows = [i for i in _rows(ix, "addresses") if not ix.cols["id"][i].startswith("osm:interpolation")]
    hits = 0
    picks = np.random.default_rng(9).choice(rows, 60, replace=False).tolist()
    for row in picks:
        q = ix.cols["name"][row]
        res = ix.search(q, size=5)["results"]
        hits += any(normalise(r["name"] or "") == normalise(q) and r["address"].get("house_number") == ix.housenumber(row)
                    for r in res)
    assert hits >= 0.9 * len(picks)


def test_boundaries_osmium_leaves_out(nominatim_index, nominatim_extract):
    """Closed ways tagged boundary=administrative (Autaugaville, Billingsley, White Hall) and relations a
    member of which the clipped extract lacks (Prattville, Millbrook, Deatsville: their rings close without
    it) are boundaries, as osm2pgsql reads them for Nominatim: every address and POI inside one (the oracle
    builds the polygons here: osmium's areas of the ways, merged member lines of the relations) names it."""
    ix, ex = nominatim_index, nominatim_extract
    names = {"Autaugaville", "Billingsley", "White Hall", "Prattville", "Millbrook", "Deatsville"}
    polys = {t["name"]: g for lv, t, g in ex.admin if lv == 8 and t.get("name") in names}
    assert set(polys) == names
    rows = _rows(ix, "addresses", "pois")
    lon = np.asarray([float(ix.lon[r]) for r in rows])
    lat = np.asarray([float(ix.lat[r]) for r in rows])
    seen = 0
    for name, g in polys.items():
        inside = np.flatnonzero(shapely.contains_xy(g, lon, lat))
        for k in inside.tolist():
            a = ix.address(rows[k])
            assert name in {a.get("city"), a.get("town"), a.get("village"), a.get("municipality")}, (name, a)
        seen += len(inside)
    assert seen > 50, seen


def test_settlement_follows_the_parent_street(andorra, andorra_extract):
    """Andorra has no level 8 boundary: the village/town of a POI is a place node whose fuzzy area (a box of
    4 km around a town, 2 km around a village) its parent street's line crosses, as Nominatim gives a POI
    its street's address (oracle: the nearest road by shapely distance, for POIs whose own tags name no
    street), and the POI's parish stays the one that contains its point."""
    ix, ex = andorra.search_index, andorra_extract
    rows = [i for i in _rows(ix, "pois") if ix.osm_key(i) in ("amenity", "shop", "tourism")
            and ix.cols["id"][i].startswith("osm:node") and f"n{ix.cols['id'][i].rsplit(':', 1)[1]}" not in ex.by_street]
    checked = crossing = 0
    for row in rows:
        lon, lat = float(ix.lon[row]), float(ix.lat[row])
        a = ix.address(row)
        town = a.get("town") or a.get("village") or a.get("city")
        road = _parent_road(ex, lon, lat)
        if not town or road is None:
            continue
        checked += 1
        for nm, place, x, y in ex.settlements:
            if nm == town:
                half = SETTLEMENT_BOX_M[place]
                dx, dy = half / (111_200 * math.cos(math.radians(y))), half / 111_200
                if shapely.box(x - dx, y - dy, x + dx, y + dy).intersects(road[0]):
                    crossing += 1
                    break
        parishes = ex.containing(lon, lat, 7)
        if parishes:
            assert a.get("municipality") in {t["name"] for t in parishes}, (ix.cols["id"][row], a)
    assert checked > 100 and crossing >= 0.95 * checked, (crossing, checked)


def test_country_of_a_parish(andorra, andorra_extract):
    """Andorra's own boundary is clipped from the extract, its parishes are not: every document inside a
    parish (the oracle's polygons) is in Andorra, whatever GeoNames place lies nearest (a peak on the
    Spanish border, Tossa Plana de Lles, was "España")."""
    ix, ex = andorra.search_index, andorra_extract
    parishes = [g for lv, t, g in ex.admin if lv == 7 and t.get("name") in (
        "Andorra la Vella", "Canillo", "Encamp", "Escaldes-Engordany", "La Massana", "Ordino", "Sant Julià de Lòria")]
    assert len(parishes) >= 6
    rows = _rows(ix, "addresses", "pois")
    lon = np.asarray([float(ix.lon[r]) for r in rows])
    lat = np.asarray([float(ix.lat[r]) for r in rows])
    inside = np.zeros(len(rows), bool)
    for g in parishes:
        inside |= shapely.contains_xy(g, lon, lat)
    assert inside.sum() > 500
    assert all(ix.address(rows[k]).get("country_code") == "ad" for k in np.flatnonzero(inside).tolist())


def test_country_outside_the_country_boundary(liechtenstein_extract, tmp_path):
    """Liechtenstein's extract holds its country boundary and clipped parts of Austria and Switzerland: a
    document outside Liechtenstein's polygon (the oracle's) is never in Liechtenstein, though a Liechtenstein
    village may be the GeoNames place nearest to it (built here with the GeoNames table)."""
    from geoengine.search.documents import build_documents
    from geoengine.search.index import SearchIndex
    from geoengine.search.write import write_index

    ds, _ = build_documents(data_file(LIECHTENSTEIN), data_file("world/geonames-cities500.txt.gz"),
                            data_file("world/geonames_admin1.json"), world="region")
    write_index(tmp_path, ds)
    ix, ex = SearchIndex(tmp_path), liechtenstein_extract
    li = [g for lv, t, g in ex.admin if lv == 2 and t.get("ISO3166-1") == "LI"]
    assert li
    rows = _rows(ix, "addresses", "pois")
    lon = np.asarray([float(ix.lon[r]) for r in rows])
    lat = np.asarray([float(ix.lat[r]) for r in rows])
    outside = ~shapely.intersects_xy(li[0], lon, lat)
    assert outside.sum() > 20
    codes = [ix.address(rows[k]).get("country_code") for k in np.flatnonzero(outside).tolist()]
    assert "li" not in codes and set(codes) <= {"at", "ch"}, set(codes)
