"""Address documents: interpolation lines expanded into house numbers, and the street of every address.

- `addr:interpolation` ways (`odd`, `even`, `all`, a step `1`-`9`, and `alphabetic`): as Nominatim does,
  the line is cut at its nodes that carry a house number (a whole number of at most 6 digits; for
  `alphabetic`, a number with one letter), and each number strictly between two consecutive ones (of
  the interpolation's parity or step) becomes an address placed at its share of the section's length
  (n between 2 and 10 at 4: 25 % of the way from 2 to 10). Nominatim drops alphabetic interpolations;
  here "12a" to "12e" gives 12b, 12c, 12d. The street and postcode are the way's `addr:street` and
  `addr:postcode`, else those of its end nodes.
- the street of an address (and of every POI): `addr:street` (linked to the nearest street document of
  that name, for its names in other languages), else `addr:place` (then no road), else the nearest named
  street within 0.1 degree (Nominatim's `getNearestRoadPlaceId` doubles its search radius from
  0.00005 degree while it is below 0.1).
"""

from __future__ import annotations

import re

import numpy as np
from scipy.spatial import cKDTree

from geoengine.search.streetpoints import StreetPoints, build_points
from geoengine.search.text import normalise

NEAREST_STREET_KM = 0.1 * 111.2
NAMED_STREET_KM = 20.0  # an addr:street is linked to the nearest street of that name within this distance
NAMED_CHUNK = 512  # rows of one addr:street measured against its streets at once
DENSIFY_KM = 0.05  # street segments get extra points every 50 m for the nearest-street search
MAX_NUMBERS = 1000  # numbers one interpolation section may make (broken data)
INTEGER = re.compile(r"^\d{1,6}$")
ALPHA = re.compile(r"^(\d{1,6})\s*([A-Za-z])$")
KM_PER_DEG = 111.2


def _xy(lat, lon, lat0: float) -> np.ndarray:
    return np.column_stack([np.asarray(lon) * KM_PER_DEG * np.cos(np.radians(lat0)), np.asarray(lat) * KM_PER_DEG])


def interpolated_numbers(kind: str, a: str, b: str) -> list[tuple[str, float]] | None:
    """(house number, share of the way from a to b) of every number strictly between the ends a and b of an
    interpolation of type `kind`; None when the ends do not allow one."""
    if kind == "alphabetic":
        ma, mb = ALPHA.match(a.strip()), ALPHA.match(b.strip())
        if not ma or not mb or ma.group(1) != mb.group(1):
            return None
        la, lb = ord(ma.group(2).lower()), ord(mb.group(2).lower())
        if abs(lb - la) < 2:
            return None
        step = 1 if lb > la else -1
        upper = ma.group(2).isupper()
        out = []
        for c in range(la + step, lb, step):
            letter = chr(c).upper() if upper else chr(c)
            out.append((f"{ma.group(1)}{letter}", (c - la) / (lb - la)))
        return out
    if not INTEGER.match(a.strip()) or not INTEGER.match(b.strip()):
        return None
    x, y = int(a), int(b)
    if kind in ("odd", "even"):
        step, parity = 2, 1 if kind == "odd" else 0
    elif kind == "all":
        step, parity = 1, None
    elif len(kind) == 1 and kind in "123456789":
        step, parity = int(kind), None
    else:
        return None
    lo, hi = min(x, y), max(x, y)
    if hi - lo <= step:
        return None
    if parity is None:
        nums = range(lo + step, hi, step)
    else:
        first = lo + 1 if (lo + 1) % 2 == parity else lo + 2
        nums = range(first, hi, step)
    if len(nums) > MAX_NUMBERS:
        return None
    out = [(str(n), (n - x) / (y - x)) for n in nums]
    return out if x < y else out[::-1]  # in the order from a to b


def _point_along(xy: np.ndarray, cum: np.ndarray, at: float) -> tuple[float, float]:
    """(lon, lat) at length `at` along the polyline xy (lon, lat) with cumulative lengths cum."""
    k = int(np.clip(np.searchsorted(cum, at, side="right") - 1, 0, len(xy) - 2))
    seg = cum[k + 1] - cum[k]
    t = 0.0 if seg <= 0 else (at - cum[k]) / seg
    p = xy[k] + t * (xy[k + 1] - xy[k])
    return float(p[0]), float(p[1])


def expand_interpolations(ds, ways, addr_node_id, addr_node_row) -> int:
    """Add an address document for every number of every interpolation way; returns how many."""
    if not len(ways):
        return 0
    ids = np.frombuffer(addr_node_id, np.int64) if len(addr_node_id) else np.zeros(0, np.int64)
    rows = np.frombuffer(addr_node_row, np.int64) if len(addr_node_row) else np.zeros(0, np.int64)
    order = np.argsort(ids, kind="stable")
    ids, rows = ids[order], rows[order]
    node_ids = np.frombuffer(ways.node_id, np.int64)
    allxy = np.frombuffer(ways.xy, np.float64).reshape(-1, 2)
    added = 0
    for k in range(len(ways)):
        a, b = ways.ends[k], ways.ends[k + 1]
        nid, xy = node_ids[a:b], allxy[a:b]
        pos = np.minimum(np.searchsorted(ids, nid), max(len(ids) - 1, 0))
        numbered = np.flatnonzero(ids[pos] == nid) if len(ids) else np.zeros(0, np.int64)
        if len(numbered) < 2:
            continue
        lat0 = float(xy[:, 1].mean())
        pxy = _xy(xy[:, 1], xy[:, 0], lat0)
        cum = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pxy, axis=0).T))])
        kind = ways.kind[k]
        for p, q in zip(numbered[:-1].tolist(), numbered[1:].tolist(), strict=True):
            ra, rb = int(rows[pos[p]]), int(rows[pos[q]])
            nums = interpolated_numbers(kind, ds.housenumber[ra] or "", ds.housenumber[rb] or "")
            if not nums:
                continue
            street = ways.street[k] or ds.street[ra] or ds.street[rb]
            place = ways.addr_place[k] or ds.addr_place[ra] or ds.addr_place[rb]
            postcode = ds.postcode[ra] or ds.postcode[rb] or ways.postcode[k]
            for hn, share in nums:
                lon, lat = _point_along(xy, cum, cum[p] + share * (cum[q] - cum[p]))
                label = f"{street or place} {hn}" if (street or place) else None
                ds.add(id=f"osm:interpolation:{ways.id[k]}:{hn}", index="addresses", doc_type="place", name=label,
                       name_en=None, names=[label] if label else [], place_class="address", category="house",
                       importance=0.05, lat=lat, lon=lon, source="osm", kind="w", detail="{}",
                       housenumber=hn, street=street, addr_place=place, postcode=postcode, osm_tag="place=house")
                added += 1
    return added


def street_points(ds, lat0: float) -> tuple[StreetPoints | None, np.ndarray]:
    """The street segments' vertices and points every DENSIFY_KM along them (km plane around lat0) for
    nearest-point queries (`streetpoints.StreetPoints`, `query` as a k-d tree's; equal distances: the lower
    segment first), and the segment of each point (int32; its street document is `ds.seg_doc[segment]`: not
    kept per point, the points are the stage's largest array at its peak)."""
    seg, _ = ds.segments()
    if not len(seg):
        return None, np.zeros(0, np.int32)
    points = build_points(seg, lat0, KM_PER_DEG, DENSIFY_KM)
    return points, points.seg


def resolve_streets(ds, rows: np.ndarray, lat0: float, tree, point_seg) -> dict[str, int]:
    """Settle the street of the address and POI documents `rows`: ds.street becomes the street's name,
    ds.street_row[row] its street document (-1: none); an address without a name gets "<street> <number>".
    Returns counts by how the street was found."""
    counts = {"addr_street": 0, "addr_street_linked": 0, "addr_place": 0, "nearest_street": 0, "no_street": 0}
    street_rows = [i for i in range(len(ds)) if ds.index[i] == "streets"]
    by_name: dict[str, list[int]] = {}
    for i in street_rows:
        by_name.setdefault(normalise(ds.name[i]), []).append(i)
    lat = np.asarray(ds.lat)
    lon = np.asarray(ds.lon)
    need = []
    named: dict[str, list[int]] = {}  # normalised addr:street -> the rows naming it (a street of that name exists)
    keys: dict[str, str] = {}  # addr:street -> normalised
    for i in rows.tolist():
        s = ds.street[i]
        if s:
            counts["addr_street"] += 1
            key = keys.get(s)
            if key is None:
                key = keys[s] = normalise(s)
            if key in by_name:
                named.setdefault(key, []).append(i)
        elif ds.addr_place[i]:
            counts["addr_place"] += 1
        else:
            need.append(i)
    cos0 = np.cos(np.radians(lat0))
    for key, mine in named.items():  # the nearest street of the name, the rows of one name at a time
        cands = np.asarray(by_name[key], np.int64)
        for a in range(0, len(mine), NAMED_CHUNK):
            part = np.asarray(mine[a:a + NAMED_CHUNK], np.int64)
            d = np.hypot((lat[cands][None, :] - lat[part][:, None]) * KM_PER_DEG,
                         (lon[cands][None, :] - lon[part][:, None]) * KM_PER_DEG * cos0)
            j = np.argmin(d, axis=1)
            ok = d[np.arange(len(part)), j] <= NAMED_STREET_KM
            for i, c in zip(part[ok].tolist(), cands[j[ok]].tolist(), strict=True):
                ds.street_row[i] = c
            counts["addr_street_linked"] += int(ok.sum())
    if need and tree is not None:
        dist, idx = tree.query(_xy(lat[need], lon[need], lat0), distance_upper_bound=NEAREST_STREET_KM)
        for i, d, k in zip(need, dist.tolist(), idx.tolist(), strict=True):
            if np.isfinite(d):
                r = int(ds.seg_doc[point_seg[k]])
                ds.street[i] = ds.name[r]
                ds.street_row[i] = r
                counts["nearest_street"] += 1
            else:
                counts["no_street"] += 1
    else:
        counts["no_street"] += len(need)
    for i in rows.tolist():
        if ds.index[i] == "addresses" and not ds.name[i]:
            where = ds.street[i] or ds.addr_place[i]
            ds.name[i] = f"{where} {ds.housenumber[i]}" if where else ds.housenumber[i]
            ds.names[i] = [ds.name[i]]
    return counts


ADDRESS_STREET_KM = 1.0  # addresses of one unmatched addr:street within this of each other are one street


def address_streets(ds, rows: np.ndarray, lat0: float) -> int:
    """Streets that only addresses name: an `addr:street` of a numbered document (address or POI) linked to no street document (no named highway of
    that name within NAMED_STREET_KM: a pedestrian square mapped as an area, a street missing from a clipped
    extract, a spelling no way uses) becomes a street document of its own, so that a number the data lacks
    still finds its street. The addresses of one name are grouped into streets by single linkage within
    ADDRESS_STREET_KM; each street sits at its address nearest their mean, is named by their most common
    spelling, and its addresses are linked to it (ds.street_row). Id `osm:addrstreet:<row of that address's
    OSM id>`: no OSM object of its own (osm type none), no reverse item. Returns how many were added."""
    from collections import Counter

    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    by_name: dict[str, list[int]] = {}
    for i in rows.tolist():
        s = ds.street[i]
        if s and ds.street_row[i] < 0 and ds.housenumber[i]:
            by_name.setdefault(normalise(s), []).append(i)
    lat = np.array(ds.lat, np.float64)  # copies: ds grows below
    lon = np.array(ds.lon, np.float64)
    added = 0
    for key in sorted(by_name):
        if not key:
            continue
        members = np.asarray(by_name[key], np.int64)
        xy = _xy(lat[members], lon[members], lat0)
        if len(members) > 1:
            pairs = cKDTree(xy).query_pairs(ADDRESS_STREET_KM, output_type="ndarray")
            graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(members), len(members)))
            _, label = connected_components(graph, directed=False)
        else:
            label = np.zeros(1, np.int64)
        for lab in np.unique(label).tolist():
            part = members[label == lab]
            pxy = xy[label == lab]
            at = int(part[np.argmin(np.hypot(*(pxy - pxy.mean(axis=0)).T))])
            name = Counter(ds.street[i] for i in part.tolist()).most_common(1)[0][0]
            osm_id = ds.id[at].rsplit(":", 1)[-1]
            row = ds.add(id=f"osm:addrstreet:{osm_id}", index="streets", doc_type="place", name=name, name_en=None,
                         names=[name], place_class="street", category="road", importance=0.1, lat=float(lat[at]),
                         lon=float(lon[at]), source="osm", kind="w",
                         detail='{"names":{"name":' + _json_str(name) + '},"address":{},"tags":{}}',
                         osm_tag="highway=road")
            for i in part.tolist():
                ds.street_row[i] = row
            added += 1
    return added


def _json_str(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)
