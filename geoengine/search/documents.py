"""Assemble search documents from OSM and GeoNames: street merging, display names, canonical ids.

Streets: named highway ways are grouped by (normalised name, nearest city/town/village/hamlet
within 15 km) into one document each, keeping every way's polyline for reverse geocoding. Display names: the document's name, then
its locality (nearest OSM city/town/village/hamlet/suburb within 10 km), region (smallest
administrative boundary containing it, admin_level 3..8) and country (admin_level 2 boundary, else
the country code of the nearest GeoNames place). Canonical ids: place documents of different
sources (or an OSM node and an OSM relation) with a shared normalised name, lying within a distance
that depends on their class, form one group; the group's canonical document is the OSM one
(node/way before relation) else the GeoNames one, and every member carries its id as `canonical_id`.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from array import array

import numpy as np
import shapely
from scipy.spatial import cKDTree

from geoengine.bundler import heap
from geoengine.search import geonames as gn
from geoengine.search.addresses import address_streets, expand_interpolations, resolve_streets, street_points
from geoengine.search.admin import (
    COUNTRY,
    DISPLAY_SLOTS,
    POSTCODE,
    assign_postcodes,
    build_hierarchy,
    country_label,
    make_address,
    make_display,
    unit_name,
)
from geoengine.search.docset import DocSet
from geoengine.search.osm import OsmDoc, StreetWays, mean_xy, read_osm
from geoengine.search.osm import _json as _json_osm
from geoengine.search.parents import StreetWayTable, named_parent_ways, nearest_parent_ways
from geoengine.search.text import normalise

KM_PER_DEG_LAT = 110.574
# how far apart two descriptions of the same place may lie, by class (km)
MERGE_KM = {"country": 300.0, "state": 100.0, "region": 100.0, "province": 80.0, "county": 40.0,
            "city": 15.0, "municipality": 10.0, "town": 8.0, "borough": 6.0}
MERGE_KM_DEFAULT = 3.0
STREET_LOCALITY_PLACES = ("city", "town", "village", "hamlet", "municipality")
SOURCE_RANK = {"n": 0, "w": 0, "r": 1, "g": 2}  # canonical preference: OSM node/way, relation, GeoNames


def _json(d: dict) -> str:
    return _json_osm(d)


def _xy(lat, lon, lat0: float) -> np.ndarray:
    """Equirectangular km around latitude lat0 (enough for neighbour searches)."""
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    return np.column_stack([lon * 111.320 * np.cos(np.radians(lat0)), lat * KM_PER_DEG_LAT])


def _merge_streets(streets: StreetWays, loc_tree, lat0: float) -> list[tuple[OsmDoc, int, list[int]]]:
    """(document, locality, its ways) of each street: the ways grouped by normalised name and nearest
    locality of `loc_tree` within 15 km. (The ways' vertex ranges are `streets.ends[w], streets.ends[w + 1]`:
    a tuple of two ints per way held until the segments were made was about 35 MB at 64 copies.)"""
    groups: dict[tuple[str, int], list[int]] = {}
    if not len(streets):
        return []
    if loc_tree is not None:
        dist, near = loc_tree.query(_xy(streets.lat, streets.lon, lat0), distance_upper_bound=15.0)
        near = np.where(np.isfinite(dist), near, -1)
    else:
        near = np.full(len(streets), -1)
    for k, loc in enumerate(near.tolist()):
        groups.setdefault((normalise(streets.name[k]), loc), []).append(k)
    xy = streets.vertices()
    out = []
    for (_, loc), ways in groups.items():
        ways.sort(key=streets.id.__getitem__)
        first = ways[0]
        names = []
        for w in ways:
            for n in streets.variants(w):
                if n not in names:
                    names.append(n)
        ranges = [(streets.ends[w], streets.ends[w + 1]) for w in ways]
        if len(ranges) == 1 and ranges[0][1] - ranges[0][0] <= SHORT_WAY:
            lon, lat = _vertex_near_mean(xy[ranges[0][0]:ranges[0][1]].tolist())
        else:
            verts = xy[ranges[0][0]:ranges[0][1]] if len(ranges) == 1 else np.concatenate([xy[a:b] for a, b in ranges])
            centre = mean_xy(verts)
            k = int(np.argmin(((verts - centre) ** 2).sum(axis=1)))
            lon, lat = float(verts[k, 0]), float(verts[k, 1])
        best = max(ways, key=streets.importance.__getitem__)
        if len(ways) == 1:  # (the way's own names, address, tags: its detail as written, in that order)
            detail = json.loads(streets.detail[first])
        else:
            detail = {"names": {}, "address": {}, "tags": {}}
            for w in ways:
                wd = json.loads(streets.detail[w])
                for part in ("names", "address", "tags"):
                    for key, val in wd.get(part, {}).items():
                        detail[part].setdefault(key, val)
        detail["osm_ways"] = [streets.id[w] for w in ways]
        detail["tags"]["highway"] = streets.category[best]
        doc = OsmDoc(
            id=f"osm:street:{streets.id[first]}", index="streets", doc_type="place", name=streets.name[first],
            name_en=next((streets.name_en[w] for w in ways if streets.name_en[w]), None), names=names,
            place_class="street", category=streets.category[best], importance=streets.importance[best],
            lat=lat, lon=lon, osm_type="w",
            detail=_json(detail),
        )
        out.append((doc, loc, ways))
    return out


SHORT_WAY = 32  # vertices of a street of one way whose centre vertex is found without numpy


def _vertex_near_mean(verts: list[list[float]]) -> tuple[float, float]:
    """(lon, lat) of the first vertex nearest the mean of `verts`: the sums, squares and comparisons of
    `mean_xy` and numpy's argmin of squared distances, in the same order (a sequential sum from the first
    vertex, dx * dx + dy * dy), on Python floats: a few microseconds instead of five numpy calls."""
    sx, sy = verts[0]
    for x, y in verts[1:]:
        sx += x
        sy += y
    cx, cy = sx / len(verts), sy / len(verts)
    best, k = None, 0
    for i, (x, y) in enumerate(verts):
        d = (x - cx) * (x - cx) + (y - cy) * (y - cy)
        if best is None or d < best:
            best, k = d, i
    return verts[k][0], verts[k][1]


NEAR_COUNTRY_K = 16  # GeoNames places examined for the country of a document outside every country boundary
NEAR_DATA_DEG = 0.5  # a GeoNames place this close to the extract's documents is of its region


def _near_cells(lon, lat, qlon, qlat, cell: float) -> np.ndarray:
    """bool per query point: its `cell`-degree cell or one of the eight around it holds a data point (so
    every point within `cell` degrees of the data is in)."""
    def key(x, y):
        return np.floor((np.asarray(y) + 90.0) / cell).astype(np.int64) * 10_000_000 + np.floor(
            (np.asarray(x) + 180.0) / cell).astype(np.int64)

    occupied = np.unique(key(lon, lat))
    near = np.zeros(len(qlon), bool)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            near |= np.isin(key(np.asarray(qlon) + dx * cell, np.asarray(qlat) + dy * cell), occupied)
    return near


MMAP_THRESHOLD = 1 << 20  # bytes: larger blocks are mapped and unmapped, not kept on the heap (build_documents)


def _cpu() -> float:
    """CPU seconds of this process and of its children ended so far (read_osm's forked reader)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class _Steps:
    """Wall and CPU seconds (with the forked reader's) of each sub-step of `build_documents`, and the
    process's RSS after it (MB): `info["steps"]`, logged at debug level and printed by
    benchmarks/search_stage_bench.py."""

    def __init__(self):
        self.rows: list[dict] = []
        self.t, self.c = time.perf_counter(), _cpu()

    def __call__(self, name: str) -> None:
        t, c = time.perf_counter(), _cpu()
        rss = 0.0
        try:
            with open("/proc/self/statm") as fh:
                rss = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except (OSError, ValueError):
            pass
        self.rows.append({"step": name, "wall_s": round(t - self.t, 3), "cpu_s": round(c - self.c, 3),
                          "rss_mb": round(rss, 1)})
        logging.getLogger(__name__).debug("search step %s", self.rows[-1])
        self.t, self.c = t, c


def build_documents(osm_path, places_path=None, admin1_path=None, *, bbox=None, world: str = "important",
                    world_min_population: int = 50_000, progress=None,
                    mmap_threshold: int | None = MMAP_THRESHOLD, read=None, keep=None,
                    keep_ways: str | None = None) -> tuple[DocSet, dict]:
    """Every document of a bundle. `world`: "all" keeps the whole GeoNames table, "important" the places
    near the extract's data (inside its bbox plus 0.1 degree, and within NEAR_DATA_DEG of an OSM document:
    an extract with far-apart parts does not take in the places between them) and the world's capitals, admin seats and places of at
    least `world_min_population`, "region" only those inside the bbox. `mmap_threshold`: glibc's mmap
    threshold for the stage (None: the allocator's own, dynamic). `read`: `read_osm`'s output to start from
    instead of reading `osm_path` (an update's patched records: search/records.py); `keep`: called with it
    before the later phases change it (the full run keeps the records); `keep_ways`: where the read writes the
    ways it keeps for updates (osm.py's `_open_kept`)."""
    if mmap_threshold:
        # the steps make and free many arrays of a few MB: with glibc's dynamic threshold (up to 32 MB, and
        # a forked stage process inherits the build process's) they came from the heap and their holes
        # stayed resident (25-45 MB at 64 copies from the parent streets to the index). glibc keeps a set
        # threshold for the rest of the process: the build runs this stage in a forked child
        heap.mmap_threshold(mmap_threshold)
    step = _Steps()
    # ds: the documents of OSM nodes, ways, relations
    ds, streets, boundaries, reader = read_osm(osm_path, keep_ways=keep_ways) if read is None else read
    read = None
    heap.release()  # what the OSM reader's threads freed, under the steps after it (50-80 MB at 64 copies)
    step("read_osm")
    if keep is not None:
        keep(ds, streets, boundaries, reader)
        heap.release()
        step("keep_records")
    info: dict = {}
    n_points = len(ds)
    if bbox is None:  # (no lists of Python floats: they outlived the bbox, 16 MB at 64 copies)
        lats = np.concatenate([np.frombuffer(ds.lat, np.float64), np.frombuffer(streets.lat, np.float64), [0.0]])
        lons = np.concatenate([np.frombuffer(ds.lon, np.float64), np.frombuffer(streets.lon, np.float64), [0.0]])
        k = len(lats) - 1 if len(lats) > 1 else 1  # the 0.0 only when there is nothing else
        bbox = (float(lons[:k].min()), float(lats[:k].min()), float(lons[:k].max()), float(lats[:k].max()))
        del lats, lons
    lat0 = (bbox[1] + bbox[3]) / 2

    # streets group by settlement (a street crossing several suburbs of one city is one street)
    towns = [i for i in range(n_points) if ds.index[i] == "places" and ds.osm_tag[i] != "boundary=administrative"
             and ds.place_class[i] in STREET_LOCALITY_PLACES]
    town_tree = cKDTree(_xy([ds.lat[i] for i in towns], [ds.lon[i] for i in towns], lat0)) if towns else None
    merged = _merge_streets(streets, town_tree, lat0)
    step("merge_streets")
    way_order, owners = array("q"), array("q")  # the street ways in the order of the polylines, their documents
    street_town: dict[int, str] = {}  # street row -> the settlement it was grouped by
    pc_code, pc_lat, pc_lon, pc_row = [], [], [], []  # the street ways' postcodes, as postcode samples
    # per way, in the order of the polylines (numbers in typed arrays, a normalised name one string per name:
    # lists of Python numbers and a string per way were about 25 MB more at 64 copies)
    way_id, way_lat, way_lon = array("q"), array("d"), array("d")
    way_key, way_pc = [], []
    keys: dict[str, str] = {}
    merged.reverse()
    while merged:  # (each street's merge output freed once it is added: its detail text was held twice)
        doc, loc, ways = merged.pop()
        row = ds.add(id=doc.id, index="streets", doc_type="place", name=doc.name, name_en=doc.name_en,
                     names=doc.names, place_class="street", category=doc.category, importance=doc.importance,
                     lat=doc.lat, lon=doc.lon, source="osm", kind="w", detail=doc.detail,
                     osm_tag=f"highway={doc.category}")
        way_order.extend(ways)
        owners.extend([row] * len(ways))
        for w in ways:
            way_id.append(streets.id[w])
            name = streets.name[w]
            key = keys.get(name)
            if key is None:
                key = keys[name] = normalise(name)
            way_key.append(key)
            way_lat.append(streets.lat[w])
            way_lon.append(streets.lon[w])
            way_pc.append(streets.postcode[w])
            if streets.postcode[w]:
                pc_code.append(streets.postcode[w])
                pc_lat.append(streets.lat[w])
                pc_lon.append(streets.lon[w])
                pc_row.append(row)
        if loc >= 0:
            street_town[row] = ds.name[towns[loc]]
    info["osm_ways_in_streets"] = len(streets)
    del merged
    ends = np.frombuffer(streets.ends, np.int64)
    way_order = np.frombuffer(way_order, np.int64) if len(way_order) else np.zeros(0, np.int64)
    ranges = np.column_stack([ends[way_order], ends[way_order + 1]])
    del way_order, ends
    ds.set_polylines(streets.vertices(), ranges, np.frombuffer(owners, np.int64) if len(owners) else np.zeros(0, np.int64))
    # the ways as Nominatim's parent streets (one way each: parents.py), their segments consecutive in ds.seg
    way_table = StreetWayTable(way_id, owners, way_key, way_lat, way_lon, way_pc,
                               np.repeat(np.arange(len(ranges), dtype=np.int32), np.maximum(ranges[:, 1] - ranges[:, 0] - 1, 1)))
    del way_id, way_key, way_lat, way_lon, way_pc, keys
    del streets, ranges, owners  # the street ways' polylines are ds.seg now
    heap.release()
    step("street_documents")

    # addresses: interpolation lines into numbers, then the street of every address and POI
    info["interpolated_addresses"] = expand_interpolations(ds, reader.interpolations, reader.addr_node_id,
                                                           reader.addr_node_row)
    labels = reader.labels
    info["boundaries_from_members"] = reader.unassembled
    shapes = (np.frombuffer(reader.shape_row, np.int64).copy(), np.frombuffer(reader.shape_closed, np.int8).astype(bool),
              np.frombuffer(reader.shape_box, np.float64).reshape(-1, 4).copy(), np.frombuffer(reader.shape_len, np.float64).copy())
    boxes = (np.frombuffer(reader.box_row, np.int64).copy(), np.frombuffer(reader.box, np.float64).reshape(-1, 4).copy())
    extra_pc = (reader.pc_code, np.frombuffer(reader.pc_xy, np.float64).reshape(-1, 2).copy())
    del reader
    heap.release()
    step("interpolations")
    n_osm = len(ds)
    rows = np.asarray([i for i in range(n_osm) if ds.index[i] in ("addresses", "pois")], np.int64)
    by_tag = np.asarray([bool(s) for s in ds.street], bool)  # addr:street of the object itself
    # the parent street ways (parents.py): by addr:street name first, before the street points exist (the
    # two steps' temporaries are not held at once), then the nearest street for the rest
    parent = named_parent_ways(ds, rows, by_tag, way_table, boxes)
    del boxes
    heap.release()
    step("named_parent_ways")
    tree, point_seg = street_points(ds, lat0)
    heap.release()  # what making the points freed, under the tree's nodes (20 MB at 64 copies)
    for k, v in resolve_streets(ds, rows, lat0, tree, point_seg).items():
        info[f"street_from_{k}"] = v
    heap.release()
    step("resolve_streets")
    nearest_parent_ways(ds, rows, by_tag, parent, way_table, tree, point_seg, lat0)
    info["parent_street_ways"] = int((parent >= 0).sum())
    del tree, point_seg, by_tag
    heap.release()  # the street points and their tree
    step("parent_ways")
    info["streets_from_addresses"] = address_streets(ds, rows, lat0)
    n_osm = len(ds)
    for i in rows.tolist():  # an unnamed POI's detail names its street
        if not ds.name[i] and ds.index[i] == "pois" and ds.street[i] and ds.detail[i] is not None:
            d = json.loads(ds.detail[i])
            if "street" not in d["address"]:
                d["address"]["street"] = ds.street[i]
                ds.detail[i] = _json(d)
    step("address_streets")

    # GeoNames
    n_geo = 0
    box_rows = np.zeros(0, np.int64)
    places = None
    if places_path is not None:
        places = gn.read_places(places_path)
        admin1 = gn.read_admin1(admin1_path)
        pad = 0.1
        in_box = ((places.lon >= bbox[0] - pad) & (places.lon <= bbox[2] + pad)
                  & (places.lat >= bbox[1] - pad) & (places.lat <= bbox[3] + pad))
        if n_osm:  # near the data, not anywhere in its box: far-apart parts do not take in what lies between
            data_lon = np.array(ds.lon[:n_osm], dtype=np.float64)  # copies: ds grows below
            data_lat = np.array(ds.lat[:n_osm], dtype=np.float64)
            in_box &= _near_cells(data_lon, data_lat, places.lon, places.lat, NEAR_DATA_DEG)
        if world == "all":
            keep = np.ones(len(places), bool)
        elif world == "region":
            keep = in_box
        else:
            seats = np.array([f in ("PPLC", "PPLA", "PPLG") for f in places.fcode])
            keep = in_box | seats | (places.population >= world_min_population)
        info["geonames_rows"] = len(places)
        box_rows = np.flatnonzero(in_box)
        for r in np.flatnonzero(keep):
            r = int(r)
            nm = places.name[r]
            names = [nm] + [a for a in places.altnames[r].split(",") if a and a != nm and _useful_altname(a)]
            pop = int(places.population[r])
            fc = places.fcode[r]
            a1 = admin1.get(places.admin1[r])
            parts = [nm] + ([a1] if a1 and a1 != nm else []) + [places.country[r]]
            ds.add(id=f"geonames:{places.ids[r]}", index="places", doc_type="place", name=nm, name_en=None,
                   names=names, place_class=gn.place_class(pop, fc), category=fc, importance=gn.importance(pop, fc),
                   lat=places.lat[r], lon=places.lon[r], source="geonames", kind="g", display_name=", ".join(parts),
                   country=places.country[r] or None, region=bool(in_box[r]),
                   detail=_json({"names": {"name": nm, **({"alternate": names[1:]} if in_box[r] else {})},
                                 "address": {k: v for k, v in (("state", a1), ("country_code", places.country[r])) if v},
                                 "tags": {"population": pop} if pop else {}}),
                   osm_tag=f"place={gn.place_class(pop, fc)}", addr_place=None)
            n_geo += 1
        # of the table only what the country step reads: the places near the data (the whole table's names
        # and alternate names were about 90 MB under the hierarchy's and the countries' steps)
        places = (places.lat[box_rows], places.lon[box_rows], np.asarray(places.country, dtype=object)[box_rows])
        box_rows = np.arange(len(box_rows))
        del admin1
        heap.release()

    step("geonames")
    # the administrative hierarchy of every document; countries from it, else the nearest GeoNames place
    parent = np.concatenate([parent, np.full(len(ds) - len(parent), -1, np.int64)])
    ds.admin, ds.units = build_hierarchy(ds, boundaries, labels, n_osm, parent=parent, ways=way_table)
    del boundaries
    heap.release()  # the boundaries' geometries and the point-in-polygon steps' arrays
    step("hierarchy")
    units = ds.units
    cu = ds.admin[:n_osm, COUNTRY]
    for i in np.flatnonzero(cu >= 0).tolist():
        if units.cc[cu[i]]:
            ds.country[i] = units.cc[cu[i]]
    guessed = np.asarray([i for i in range(n_osm) if ds.country[i] is None], np.int64)
    if len(guessed):
        # outside every country boundary of the extract (a clipped one): the boundary around the point whose
        # country is known, else Nominatim's country grid (countries.py), else the nearest GeoNames place
        framed = {units.cc[u] for u in set(cu[cu >= 0].tolist()) if units.cc[u]}
        try:
            info["countries_from_grid"] = _grid_countries(ds, guessed, framed)
        except FileNotFoundError:  # not generated here (./dev setup makes it): GeoNames alone, as it says
            info["countries_from_grid"] = "no data/search/country_grid.bin"
            logging.getLogger(__name__).warning(
                "data/search/country_grid.bin is missing (`./dev setup` or `python vendor/country-grid/generate.py "
                "--pypi` makes it): countries outside the extract's boundaries come from GeoNames alone")
        guessed = guessed[np.asarray([ds.country[i] is None for i in guessed.tolist()], bool)]
    units.shape.clear()
    if len(box_rows) and len(guessed):
        lat = np.asarray(ds.lat)[:n_osm]
        lon = np.asarray(ds.lon)[:n_osm]
        tree = cKDTree(_xy(places[0][box_rows], places[1][box_rows], lat0))
        # the nearest GeoNames place's country, but not one whose country boundary the extract holds: a point
        # outside Liechtenstein's polygon is not in Liechtenstein, whatever village lies nearest
        framed = {units.cc[u] for u in set(cu[cu >= 0].tolist()) if units.cc[u]}
        k = min(NEAR_COUNTRY_K, len(box_rows))
        _, near = tree.query(_xy(lat[guessed], lon[guessed], lat0), k=k)
        cand = places[2][box_rows[near.reshape(len(guessed), k)]]
        free = ~np.isin(cand, list(framed)) if framed else np.ones(cand.shape, bool)
        pick = np.where(free.any(axis=1), np.argmax(free, axis=1), 0)
        for i, c in zip(guessed.tolist(), cand[np.arange(len(guessed)), pick].tolist(), strict=True):
            ds.country[i] = c
    del places
    # where the extract holds no country boundary (a clipped extract): the place=country node of the
    # document's country code is its country (Nominatim names countries from its own table)
    country_node = {}
    for r in range(n_osm):
        if ds.place_class[r] == "country" and ds.kind[r] == "n" and ds.country[r] and ds.index[r] == "places":
            country_node.setdefault(ds.country[r], r)
    if country_node:
        from geoengine.search.admin import _names_of

        unit_of = {code: units.add(COUNTRY, "country", _names_of(ds.detail[r], ds.name[r]), r, code)
                   for code, r in country_node.items()}
        for i in np.flatnonzero(ds.admin[:, COUNTRY] < 0).tolist():
            u = unit_of.get(ds.country[i])
            if u is not None:
                ds.admin[i, COUNTRY] = u
    if extra_pc[0] and n_osm:  # objects with a postcode and no document: the country of the nearest document
        _, near = cKDTree(_xy(np.asarray(ds.lat)[:n_osm], np.asarray(ds.lon)[:n_osm], lat0)).query(
            _xy(extra_pc[1][:, 1], extra_pc[1][:, 0], lat0))
        pc_code += extra_pc[0]
        pc_lat += extra_pc[1][:, 1].tolist()
        pc_lon += extra_pc[1][:, 0].tolist()
        pc_row += near.tolist()
    del extra_pc
    step("countries")
    assign_postcodes(ds, ds.admin, units, n_osm, samples=(pc_code, pc_lat, pc_lon, pc_row), parent=parent,
                     ways=way_table, shapes=shapes)
    del pc_code, pc_lat, pc_lon, pc_row, parent, way_table, shapes
    step("postcodes")
    info["admin_units"] = len(units)
    outside = (ds.admin[:, :POSTCODE] < 0).all(axis=1).tolist()
    for i in range(len(ds)):
        if outside[i] and ds.source[i] != "osm":
            continue  # a GeoNames place outside every boundary keeps "name, admin1, country code"
        address = address_at_build(ds, i)
        name = ds.name[i]
        if ds.index[i] == "addresses":
            name = None  # "12, Street, ..." as Nominatim writes it
        elif not name:  # an unnamed POI: its category, then its address
            name = category_label(ds.categories[i], ds.category[i])
        town = street_town.get(i)
        if town:  # a street shows the settlement it was grouped by, after its name
            address = {"road": address.get("road"), "_town": town, **address}
        ds.display_name[i] = make_display(name, address, skip=ds.place_class[i] if ds.index[i] == "pois" else None)

    step("display_names")
    ds.canonical = canonical_groups(ds)
    step("canonical")
    info.update({"osm_documents": n_osm, "osm_points": n_points, "geonames_documents": n_geo,
                 "merged_groups": int((ds.canonical != np.arange(len(ds))).sum()), "steps": step.rows})
    return ds, info


def _grid_countries(ds: DocSet, rows: np.ndarray, framed=frozenset()) -> int:
    """The country of `rows`, OSM documents that no country boundary of the extract covers (Nominatim's
    `get_country_code` falls back on its country grid there). A point strictly inside a boundary of the
    extract (a parish of a clipped Andorra, a Spanish comarca) takes that boundary's country, the deepest
    first: the one its tags name (ISO3166-2 prefix, is_in:country_code), else the country at the boundary's
    own point (its country polygon, else the grid); so an address never lies in Ordino and in France. Any other point (on a border, as a peak on
    the ridge the border follows, or outside every boundary) takes the grid's country: the smallest grid
    polygon that covers it, but never a country of `framed`, those whose own polygon the extract holds: a
    point outside Liechtenstein's polygon is not in Liechtenstein, though the coarser grid may reach past
    the border (there Nominatim says Liechtenstein). Rows the grid leaves out keep None. Returns how many
    got a country."""
    from geoengine.search.admin import NEIGHBOURHOOD, STATE
    from geoengine.search.countries import country_grid

    grid = country_grid()
    units = ds.units
    lon = np.asarray(ds.lon, np.float64)
    lat = np.asarray(ds.lat, np.float64)
    # the country of each boundary unit: its tags, else the grid at its own document's point
    bu = np.asarray(sorted(units.shape), np.int64)
    unit_cc = np.full(len(units), None, dtype=object)
    if len(bu):
        brow = np.asarray([units.row[u] for u in bu.tolist()], np.int64)
        ok = (brow >= 0) & (brow < len(ds))
        # the boundary's own point: the country polygon around it, else the grid (not a framed country)
        known = np.asarray([ds.country[r] for r in brow[ok].tolist()], dtype=object)
        free = known == None  # noqa: E711 (element-wise)
        known[free] = grid.codes(lon[brow[ok][free]], lat[brow[ok][free]], exclude=framed)
        unit_cc[bu[ok]] = known
        for u, c in units.hint.items():
            unit_cc[u] = c
    got = np.full(len(rows), None, dtype=object)
    todo = np.ones(len(rows), bool)
    for slot in range(NEIGHBOURHOOD, STATE - 1, -1):  # the deepest boundary first
        u = ds.admin[rows, slot]
        cand = todo & (u >= 0)
        cand[cand] = unit_cc[u[cand]] != None  # noqa: E711 (element-wise)
        for uid in np.unique(u[cand]).tolist():  # one prepared polygon per boundary
            mine = np.flatnonzero(cand & (u == uid))
            inside = shapely.contains_xy(units.shape[uid], lon[rows[mine]], lat[rows[mine]])
            got[mine[inside]] = unit_cc[uid]
            todo[mine[inside]] = False
    rest = np.flatnonzero(todo)
    got[rest] = grid.codes(lon[rows[rest]], lat[rows[rest]], exclude=framed)
    n = 0
    for i, c in zip(rows.tolist(), got.tolist(), strict=True):
        if c:
            ds.country[i] = c
            n += 1
    return n


def address_at_build(ds: DocSet, i: int, lang: str | None = None) -> dict:
    """The address object of document i of a DocSet with its hierarchy (see admin.make_address)."""
    units, adm = ds.units, ds.admin[i].tolist()
    parents = [(units.key[u], unit_name(units.names[u], lang)) for u in (adm[s] for s in DISPLAY_SLOTS) if u >= 0]
    cu, pu = adm[COUNTRY], adm[POSTCODE]
    idx = ds.index[i]
    own = (ds.place_class[i], ds.name[i]) if idx == "pois" and ds.name[i] else None
    road = ds.name[i] if idx == "streets" else ds.street[i]
    place = ds.addr_place[i] if not road and idx in ("addresses", "pois") else None
    if ds.source[i] != "osm":
        state = json.loads(ds.detail[i] or "{}").get("address", {}).get("state")
        if state and not any(k in ("state", "region") for k, _ in parents):
            parents.append(("state", state))
    return make_address(own=own, housenumber=ds.housenumber[i], road=road, place=place, parents=parents,
                        postcode=units.names[pu]["name"] if pu >= 0 else None,
                        country=country_label(units.names[cu] if cu >= 0 else None, ds.country[i], lang),
                        country_code=ds.country[i])


def category_label(categories: list[str], category: str | None) -> str:
    """English name of a POI's first search category (its OSM value when it has none)."""
    from geoengine.search.categories import vocabulary

    for pid in categories:
        name = vocabulary()["categories"].get(pid, {}).get("names", {}).get("en")
        if name:
            return name
    return (category or "place").replace("_", " ").capitalize()


def _useful_altname(name: str) -> bool:
    """GeoNames alternate names worth matching: not codes (IATA/ICAO/abbreviations such as "SCH" for
    Schenectady or "HOF" for Al Hufuf, all-capital ASCII of at most 4 letters) and not romanisations of one
    or two letters ("mo" for Meaux), which would turn 2-3 letter prefixes into exact matches of far places."""
    if len(name) <= 4 and name.isascii() and name.isupper():
        return False
    return len(normalise(name)) >= 3


def canonical_groups(ds: DocSet) -> np.ndarray:
    """Row of the canonical document of every row (itself when it describes a place nobody else does)."""
    n = len(ds)
    canon = np.arange(n)
    _merge_duplicate_pois(ds, canon)
    rows = np.array([i for i in range(n) if ds.index[i] == "places"], dtype=np.int64)
    if len(rows) < 2:
        return canon
    lat = np.radians(np.array(ds.lat)[rows])
    lon = np.radians(np.array(ds.lon)[rows])
    xyz = 6371.0 * np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    keys = [{normalise(x) for x in [ds.name[i], ds.name_en[i]] if x} for i in rows]
    parent = np.arange(len(rows))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def limit(i):
        return MERGE_KM.get(ds.place_class[i] or "", MERGE_KM_DEFAULT)

    # the rows of each normalised name: only rows sharing a name are partners, so a relation (which looks
    # 300 km around) examines its namesakes, not every place of a large extract
    by_key: dict[str, list[int]] = {}
    for k, ks in enumerate(keys):
        for key in ks:
            by_key.setdefault(key, []).append(k)
    # only OSM documents look for partners: GeoNames rows never merge with each other
    for a in np.flatnonzero(np.array([ds.source[i] == "osm" for i in rows])):
        ia = rows[a]
        r = max(limit(ia), max(MERGE_KM.values()) if ds.kind[ia] == "r" else 15.0)
        cand = sorted({b for key in keys[a] for b in by_key[key]})
        if not cand:
            continue
        near = np.asarray(cand)[np.linalg.norm(xyz[cand] - xyz[a], axis=1) <= r]  # (a k-d tree's ball of r)
        for b in near.tolist():
            ib = rows[b]
            if b == a or (ds.source[ib] == "osm" and ds.kind[ia] != "r" and ds.kind[ib] != "r"):
                continue  # two OSM nodes/ways are two places
            if np.linalg.norm(xyz[a] - xyz[b]) > max(limit(ia), limit(ib)):
                continue
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for k in range(len(rows)):
        groups.setdefault(find(k), []).append(k)
    for members in groups.values():
        if len(members) < 2:
            continue
        best = min(members, key=lambda k: (SOURCE_RANK[ds.kind[rows[k]]], -ds.importance[rows[k]]))
        for k in members:
            canon[rows[k]] = rows[best]
    return canon


POI_DUPLICATE_KM = 0.2


def _merge_duplicate_pois(ds: DocSet, canon: np.ndarray) -> None:
    """OSM often maps one POI twice (a node and a building or area): POIs of the same normalised name
    and category within 200 m form one group; the node is canonical, else the smallest way."""
    rows = np.array([i for i in range(len(ds)) if ds.index[i] == "pois"], dtype=np.int64)
    if len(rows) < 2:
        return
    lat = np.radians(np.array(ds.lat)[rows])
    lon = np.radians(np.array(ds.lon)[rows])
    xyz = 6371.0 * np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    parent = np.arange(len(rows))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in cKDTree(xyz).query_pairs(POI_DUPLICATE_KM, output_type="ndarray"):
        ia, ib = rows[a], rows[b]
        if ds.category[ia] == ds.category[ib] and ds.name[ia] and normalise(ds.name[ia]) == normalise(ds.name[ib]):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for k in range(len(rows)):
        groups.setdefault(find(k), []).append(k)
    order = {"n": 0, "w": 1, "r": 2}
    for members in groups.values():
        if len(members) > 1:
            best = min(members, key=lambda k: (order.get(ds.kind[rows[k]], 3), int(ds.id[rows[k]].rsplit(":", 1)[1])))
            for k in members:
                canon[rows[k]] = rows[best]
