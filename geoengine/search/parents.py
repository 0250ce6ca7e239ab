"""Nominatim's parent street of every address and POI, and what that street gives them (build time).

Nominatim gives an object of address rank 30 (a POI, a house: every class but those its
`address-levels.json` ranks below 28: places, boundaries, landuse, parks, most `natural`, water and
waterways) the address of its **parent street**, one OSM way (`find_parent_for_poi`):

- `addr:street`: the way of that name nearest to it by its line, among those within 0.015 degree of its
  box (`getNearestNamedRoadPlaceId`, whose search_name "centroid" is the street's geometry);
- else (an `addr:place` address excepted: Nominatim then takes the area around it) the nearest street way
  (named, or with a `ref`) within 0.1 degree (`getNearestRoadPlaceId`).

The street way's own address is computed against its whole line (`insert_addresslines` with the way's
geometry), and the object takes from it:

- the **postcode** (`placex_update`: the object's own, else its street's, else the nearest postcode area
  around the object): a street's postcode is its own tag, else that of its deepest address unit carrying
  one of its own, else the nearest postcode area around the street's centre, the point halfway along its
  line (`get_nearest_postcode` of the street's centroid; admin.py);
- the **place nodes** (village, hamlet, ...): the place nodes whose fuzzy area (`place_node_fuzzy_area`)
  the line crosses, nearest to the line first (at the city level distances of cities x0.25, towns
  x0.5), lying inside the boundary around the line's centre (admin._street_places) and (below the city level) inside the fuzzy
  area of the place chosen above. Only where no boundary of that level contains the object's own point:
  boundary keys stay the boundaries around the point.

Everything here is arrays and k-d tree queries over the street ways and the documents (linear in the
input); nothing of it is kept in the index.
"""

from __future__ import annotations

import numpy as np

from geoengine.search.text import normalise

KM_PER_DEG = 111.2
NAMED_ROAD_DEG = 0.015  # getNearestNamedRoadPlaceId: a way's centre within this box of the object
NEAREST_ROAD_DEG = 0.1  # getNearestRoadPlaceId: the search radius doubles while below 0.1 degree
NAME_CELL_DEG = 0.05  # grid cells of the addr:street candidates
CELLS_PER_ROW = 8000  # cells per row of latitude (360 / 0.05 = 7,200, and 180 / 0.05 = 3,600 rows)
NEAREST_POINTS = 32  # street points whose segments are measured exactly for the nearest street way
PAIR_CHUNK = 65_536  # (way, candidate, segment) triples per vectorised step (about 12 arrays of this
# length live at once: the chunk bounds the stage's peak, not its work)
BALL_CHUNK = 16_384  # ways per ball query of line_candidates
NEAREST_CHUNK = 2_048  # objects per query of the nearest street (x NEAREST_POINTS segments each)

# address-levels.json: the classes Nominatim ranks below 28 (not rank 30: no parent street); key -> values,
# None for every value of the key, and the values of such a key that are rank 30 nonetheless
LOW_RANK = {"place": None, "boundary": None, "landuse": None, "water": None, "waterway": None,
            "mountain_pass": None, "leisure": {"park", "nature_reserve", "garden", "common"},
            "historic": {"neighbourhood"}, "natural": None}
RANK30_EXCEPT = {"natural": {"tree", "spring", "cave_entrance", "geyser", "hot_spring", "rock", "stone"},
                 "place": {"house", "houses"}}


def rank30(osm_tag: str | None) -> bool:
    """Whether Nominatim ranks an object of this `key=value` at address rank 30 (a POI or a house: it has
    a parent street)."""
    if not osm_tag or "=" not in osm_tag:
        return True
    key, value = osm_tag.split("=", 1)
    if key not in LOW_RANK:
        return True
    if value in RANK30_EXCEPT.get(key, ()):
        return True
    values = LOW_RANK[key]
    return values is not None and value not in values


class StreetWayTable:
    """The named street ways of an extract, one row per way in the order of the documents' polylines
    (`DocSet.set_polylines`): its OSM id, street document `doc`, normalised name `key`, centre (vertex mean;
    `parent_ways` sets the point halfway along the line) and postcode tag; `seg_way` gives the way of each of
    the DocSet's segments."""

    def __init__(self, osm_id, doc, key, lat, lon, postcode, seg_way):
        self.osm_id = np.asarray(osm_id, np.int64)
        self.doc = np.asarray(doc, np.int64)
        self.key = list(key)
        self.lat = np.asarray(lat, np.float64)
        self.lon = np.asarray(lon, np.float64)
        self.postcode = list(postcode)
        self.seg_way = np.asarray(seg_way, np.int32)  # (one a street segment: 5 MB less at 64 copies)

    def __len__(self) -> int:
        return len(self.doc)

    def seg_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """(first segment, segment count) of every way (its segments are consecutive)."""
        n = len(self)
        first = np.searchsorted(self.seg_way, np.arange(n), "left")
        return first, np.searchsorted(self.seg_way, np.arange(n), "right") - first


def parent_ways(ds, rows: np.ndarray, by_tag: np.ndarray, ways: StreetWayTable, tree, point_seg,
                lat0: float, boxes=None) -> np.ndarray:
    """The parent street way (row of `ways`, -1: none) of every document, Nominatim's rule for those of
    `rows` that it ranks 30 (module doc): `named_parent_ways`, then `nearest_parent_ways` for the rest.
    `by_tag[r]`: the document's own addr:street names its street; `tree`/`point_seg`: the street points'
    search (streetpoints.StreetPoints, km plane around latitude `lat0`, addresses.street_points) and the
    segment of each point; `boxes` (rows, (k, 4) boxes): the bounding boxes of the way documents (a way's
    street of its name is the one nearest to its box, as Nominatim measures from an object's envelope)."""
    parent = named_parent_ways(ds, rows, by_tag, ways, boxes)
    nearest_parent_ways(ds, rows, by_tag, parent, ways, tree, point_seg, lat0)
    return parent


def _rank30_rows(ds, rows: np.ndarray) -> np.ndarray:
    """The documents of `rows` that Nominatim ranks 30 (the ones that get a parent street)."""
    return np.asarray([r for r in rows.tolist() if rank30(ds.osm_tag[r])], np.int64)


def named_parent_ways(ds, rows: np.ndarray, by_tag: np.ndarray, ways: StreetWayTable, boxes=None) -> np.ndarray:
    """The first half of `parent_ways`: the nearest way of its addr:street name (-1: none). Needs no street
    points, so the build runs it before their tree exists (its temporaries and the tree's are not held at
    once)."""
    n = len(ds)
    parent = np.full(n, -1, np.int64)
    rows = _rank30_rows(ds, rows) if len(ways) else rows[:0]
    if not len(rows):
        return parent
    lat, lon = np.asarray(ds.lat, np.float64), np.asarray(ds.lon, np.float64)
    # addr:street: the nearest way of that name. Candidates by (name, grid cell): each way is listed in the
    # cells its box, grown by NAMED_ROAD_DEG, covers; an object looks up its own cell (local, not every way
    # of a common name in a large extract)
    by_key: dict[str, int] = {}
    way_key = np.asarray([by_key.setdefault(k, len(by_key)) for k in ways.key], np.int64)
    wx0, wy0, wx1, wy1 = way_boxes(ways, ds.seg, np.arange(len(ways)))
    cx0 = np.floor((wx0 - NAMED_ROAD_DEG + 180.0) / NAME_CELL_DEG).astype(np.int64)
    cx1 = np.floor((wx1 + NAMED_ROAD_DEG + 180.0) / NAME_CELL_DEG).astype(np.int64)
    cy0 = np.floor((wy0 - NAMED_ROAD_DEG + 90.0) / NAME_CELL_DEG).astype(np.int64)
    cy1 = np.floor((wy1 + NAMED_ROAD_DEG + 90.0) / NAME_CELL_DEG).astype(np.int64)
    nx, ny = cx1 - cx0 + 1, cy1 - cy0 + 1
    ncell = nx * ny
    cell_at = np.cumsum(ncell) - ncell
    wkey = np.empty(int(ncell.sum()), np.int64)
    for a in range(0, len(ways), PAIR_CHUNK):  # (each way's cells, PAIR_CHUNK ways a step: the one-shot
        # arrays of every (way, cell) were about 70 MB at 64 copies of Liechtenstein)
        wrep = np.repeat(np.arange(a, min(a + PAIR_CHUNK, len(ways))), ncell[a:a + PAIR_CHUNK])
        k = np.arange(len(wrep)) - np.repeat(cell_at[a:a + PAIR_CHUNK] - cell_at[a], ncell[a:a + PAIR_CHUNK])
        cells = (cy0[wrep] + k // nx[wrep]) * CELLS_PER_ROW + cx0[wrep] + k % nx[wrep]
        wkey[cell_at[a]:cell_at[a] + len(wrep)] = way_key[wrep] * (CELLS_PER_ROW * CELLS_PER_ROW) + cells
    del wrep, k, cells
    order = np.argsort(wkey, kind="stable")
    sorted_key = wkey[order]
    del wkey
    order = np.repeat(np.arange(len(ways), dtype=np.int32), ncell)[order].astype(np.int64)
    doc_name = np.asarray([by_key.get(normalise(ds.street[r]), -1) if by_tag[r] else -1 for r in rows.tolist()],
                          np.int64)
    has = doc_name >= 0
    d_rows = rows[has]
    doc_cell = (np.floor((lat[d_rows] + 90.0) / NAME_CELL_DEG).astype(np.int64) * CELLS_PER_ROW
                + np.floor((lon[d_rows] + 180.0) / NAME_CELL_DEG).astype(np.int64))
    doc_key = doc_name[has] * (CELLS_PER_ROW * CELLS_PER_ROW) + doc_cell
    lo = np.searchsorted(sorted_key, doc_key, "left")
    cnt = np.searchsorted(sorted_key, doc_key, "right") - lo
    if len(d_rows) and cnt.sum():
        pair_doc = np.repeat(d_rows, cnt)
        offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        pair_way = order[np.repeat(lo, cnt) + offs]
        box = np.column_stack([lon, lat, lon, lat])
        if boxes is not None and len(boxes[0]):
            box[boxes[0]] = boxes[1]
        # the way's line within NAMED_ROAD_DEG of the object's box (Nominatim: `centroid && ST_Expand(point,
        # 0.015)` where search_name's "centroid" is the street's geometry), the nearest line first
        b = box[pair_doc]
        ok = ((wx0[pair_way] <= b[:, 2] + NAMED_ROAD_DEG) & (wx1[pair_way] >= b[:, 0] - NAMED_ROAD_DEG)
              & (wy0[pair_way] <= b[:, 3] + NAMED_ROAD_DEG) & (wy1[pair_way] >= b[:, 1] - NAMED_ROAD_DEG))
        pair_doc, pair_way = pair_doc[ok], pair_way[ok]
        first, count = ways.seg_ranges()
        d2 = np.empty(len(pair_doc))
        for a0, a1 in _chunks(count[pair_way]):
            rep, segi, at = _pairs_over_segments(pair_way[a0:a1], first, count)
            q = pair_doc[a0:a1][rep]
            d2[a0:a1] = np.minimum.reduceat(_point_segments(lon[q], lat[q], ds.seg[segi]), at)
        o = np.lexsort((d2, pair_doc))
        first = np.ones(len(o), bool)
        first[1:] = pair_doc[o][1:] != pair_doc[o][:-1]
        pick = o[first]
        good = np.isfinite(d2[pick])
        parent[pair_doc[pick][good]] = pair_way[pick][good]
    return parent


def nearest_parent_ways(ds, rows: np.ndarray, by_tag: np.ndarray, parent: np.ndarray, ways: StreetWayTable, tree,
                        point_seg, lat0: float) -> np.ndarray:
    """The second half of `parent_ways`: for the rank-30 documents of `rows` without a parent in `parent`
    (not an addr:place address), the nearest street way within 0.1 degree; sets and returns `parent`."""
    from geoengine.search.addresses import _xy

    rows = _rank30_rows(ds, rows) if len(ways) and tree is not None else rows[:0]
    if not len(rows):
        return parent
    lat, lon = np.asarray(ds.lat, np.float64), np.asarray(ds.lon, np.float64)
    # (not an addr:place address): the nearest street way within 0.1 degree
    place_only = np.asarray([bool(ds.addr_place[r]) and not by_tag[r] for r in rows.tolist()], bool)
    need = rows[(parent[rows] < 0) & ~place_only]
    if len(need):
        # the street points nearest to each object (a point every 50 m along every street), then the exact
        # distance to the segments those points lie on: the nearest segment's way
        k = NEAREST_POINTS
        for a in range(0, len(need), NEAREST_CHUNK):
            part = need[a:a + NEAREST_CHUNK]
            dist, idx = tree.query(_xy(lat[part], lon[part], lat0), k=k,
                                   distance_upper_bound=NEAREST_ROAD_DEG * KM_PER_DEG)
            dist, idx = dist.reshape(len(part), k), idx.reshape(len(part), k)
            ok = np.isfinite(dist)
            segi = np.where(ok, point_seg[np.where(ok, idx, 0)], 0)
            s = ds.seg[segi.ravel()]
            d = _point_segments(np.repeat(lon[part], k), np.repeat(lat[part], k), s).reshape(len(part), k)
            d = np.where(ok, d, np.inf)
            best = np.argmin(d, axis=1)
            hit = ok[np.arange(len(part)), best]
            parent[part[hit]] = ways.seg_way[segi[np.arange(len(part)), best][hit]]
    return parent


def _point_segments(px, py, seg):
    """(distance, x-y of the nearest point) from points (px, py) to segments seg (k, 4), all in degrees."""
    x1, y1, x2, y2 = seg[:, 0], seg[:, 1], seg[:, 2], seg[:, 3]
    dx, dy = x2 - x1, y2 - y1
    ll = dx * dx + dy * dy
    t = np.where(ll > 0, ((px - x1) * dx + (py - y1) * dy) / np.where(ll > 0, ll, 1.0), 0.0)
    t = np.clip(t, 0.0, 1.0)
    return np.hypot(x1 + t * dx - px, y1 + t * dy - py)


def _segment_crosses_box(seg, cx, cy, hx, hy) -> np.ndarray:
    """Whether each segment (k, 4) meets the box [cx - hx, cx + hx] x [cy - hy, cy + hy] (Liang-Barsky)."""
    x1, y1 = seg[:, 0], seg[:, 1]
    dx, dy = seg[:, 2] - x1, seg[:, 3] - y1
    t0 = np.zeros(len(seg))
    t1 = np.ones(len(seg))
    ok = np.ones(len(seg), bool)
    for p, d, c, h in ((x1, dx, cx, hx), (y1, dy, cy, hy)):
        flat = d == 0
        ok &= ~flat | ((p >= c - h) & (p <= c + h))
        dd = np.where(flat, 1.0, d)
        ta = (c - h - p) / dd
        tb = (c + h - p) / dd
        t0 = np.where(flat, t0, np.maximum(t0, np.minimum(ta, tb)))
        t1 = np.where(flat, t1, np.minimum(t1, np.maximum(ta, tb)))
    return ok & (t0 <= t1)


def _pairs_over_segments(pair_way, first, count):
    """Expand (way, candidate) pairs into (pair, segment) rows: (pair index per row, segment per row, start
    of each pair's rows)."""
    cnt = count[pair_way]
    rep = np.repeat(np.arange(len(pair_way)), cnt)
    offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rep, first[pair_way][rep] + offs, np.cumsum(cnt) - cnt


def way_boxes(ways: StreetWayTable, seg: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, ...]:
    """(min lon, min lat, max lon, max lat) of the lines of the ways `which` (about PAIR_CHUNK segments a
    step: the boxes of every way at once expanded all their segments, at the stage's peak)."""
    first, count = ways.seg_ranges()
    box = [np.full(len(which), np.inf), np.full(len(which), np.inf), np.full(len(which), -np.inf),
           np.full(len(which), -np.inf)]
    for a, b in _chunks(count[which]):
        rep, segi, _ = _pairs_over_segments(which[a:b], first, count)
        if len(rep):
            rep += a
            for k, (fn, c, d) in enumerate(((np.minimum, 0, 2), (np.minimum, 1, 3), (np.maximum, 0, 2), (np.maximum, 1, 3))):
                fn.at(box[k], rep, fn(seg[segi, c], seg[segi, d]))
    return tuple(box)


def _chunks(count_per_pair: np.ndarray):
    """Slices of pairs whose rows (one per segment) add up to about PAIR_CHUNK each."""
    ends = np.cumsum(count_per_pair)
    start = 0
    while start < len(count_per_pair):
        base = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, base + PAIR_CHUNK, "right")), start + 1)
        yield start, stop
        start = stop


def line_candidates(ways: StreetWayTable, seg: np.ndarray, which: np.ndarray, plon, plat, half_m):
    """For the ways `which`, every point p (plon, plat, with a box of half_m[p] metres around it) whose box
    the way's line crosses: (way, point, distance in degrees from the line to the point)."""
    from scipy.spatial import cKDTree

    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if not len(which) or not len(plon):
        return empty
    first, count = ways.seg_ranges()
    x0, y0, x1, y1 = way_boxes(ways, seg, which)
    lat0 = float(np.mean(plat))
    kx = KM_PER_DEG * 1000.0 * np.cos(np.radians(lat0))
    ky = KM_PER_DEG * 1000.0
    tree = cKDTree(np.column_stack([plon * kx, plat * ky]))
    cx, cy = (x0 + x1) / 2 * kx, (y0 + y1) / 2 * ky
    reach = np.hypot((x1 - x0) / 2 * kx, (y1 - y0) / 2 * ky) + float(np.max(half_m)) * 1.5 + 1.0
    out_w, out_p, out_d = [], [], []
    for c0 in range(0, len(which), BALL_CHUNK):  # (the lists of every way at once: ~30 MB at 64 copies)
        found = tree.query_ball_point(np.column_stack([cx[c0:c0 + BALL_CHUNK], cy[c0:c0 + BALL_CHUNK]]),
                                      r=reach[c0:c0 + BALL_CHUNK])
        lens = np.fromiter((len(f) for f in found), np.int64, len(found))
        pair_w = np.repeat(which[c0:c0 + BALL_CHUNK], lens)
        pair_p = np.fromiter((p for f in found for p in f), np.int64, int(lens.sum()))
        del found
        _line_pairs(pair_w, pair_p, first, count, seg, plon, plat, half_m, ky, out_w, out_p, out_d)
    if not out_w:
        return empty
    return np.concatenate(out_w), np.concatenate(out_p), np.concatenate(out_d)


def _line_pairs(pair_w, pair_p, first, count, seg, plon, plat, half_m, ky, out_w, out_p, out_d) -> None:
    """line_candidates' exact step for (way, point) pairs: appends those whose box the line crosses."""
    for a, b in _chunks(count[pair_w]):  # exact: the point's box against the way's segments
        pw, pp = pair_w[a:b], pair_p[a:b]
        rep, segi, at = _pairs_over_segments(pw, first, count)
        if not len(rep):
            continue
        s = seg[segi]
        qx, qy = plon[pp][rep], plat[pp][rep]
        hy = half_m[pp][rep] / ky
        hx = half_m[pp][rep] / (KM_PER_DEG * 1000.0 * np.cos(np.radians(qy)))
        cross = np.logical_or.reduceat(_segment_crosses_box(s, qx, qy, hx, hy), at)
        dmin = np.minimum.reduceat(_point_segments(qx, qy, s), at)
        out_w.append(pw[cross])
        out_p.append(pp[cross])
        out_d.append(dmin[cross])


def way_midpoints(ways: StreetWayTable, seg: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lon, lat) halfway along the line of each way of `which` (Nominatim's centre of a line,
    ST_LineInterpolatePoint(line, 0.5) in degrees). About PAIR_CHUNK segments a step (all at once, the
    segments' copies and lengths were about 80 MB at 64 copies of Liechtenstein); the running length is
    carried from step to step, so every sum is the one-shot cumulative sum's, bit for bit."""
    first, count = ways.seg_ranges()
    out_x, out_y = np.empty(len(which)), np.empty(len(which))
    carry = np.zeros(1)
    for a, b in _chunks(count[which]):
        w = which[a:b]
        rep, segi, at = _pairs_over_segments(w, first, count)
        s = seg[segi]
        length = np.hypot(s[:, 2] - s[:, 0], s[:, 3] - s[:, 1])
        cum = np.cumsum(np.concatenate([carry, length]))[1:]  # (a sequential sum, as over every way at once)
        carry = cum[-1:]
        before = cum - length  # the length before each row's segment, from the first way's start
        start = before[at]
        total = np.add.reduceat(length, at)
        target = start + total / 2
        k = np.minimum(np.searchsorted(cum, target, "left"), len(cum) - 1)
        k = np.clip(k, at, at + count[w] - 1)  # within the way's own rows
        t = np.where(length[k] > 0, (target - before[k]) / np.where(length[k] > 0, length[k], 1.0), 0.0)
        t = np.clip(t, 0.0, 1.0)
        out_x[a:b] = s[k, 0] + t * (s[k, 2] - s[k, 0])
        out_y[a:b] = s[k, 1] + t * (s[k, 3] - s[k, 1])
    return out_x, out_y
