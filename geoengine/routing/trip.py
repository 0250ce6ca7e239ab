"""From found pieces to the Valhalla-style `trip` document of POST /route: legs split at break
locations, each with summary, encoded (or GeoJSON) shape and maneuvers from the narrative layer."""

from __future__ import annotations

import numba
import numpy as np

from geoengine.elevation.grades import climb_descent
from geoengine.graph import tags as T
from geoengine.graph.build import EARTH_R
from geoengine.narrative import PathInfo, Stop, narrate, road_class_of
from geoengine.routing.router import KM_PER_MILE, Leg

_CLASS_FOR_NARRATIVE = np.array([int(road_class_of(name, "ferry" if name == "ferry" else None)[0])
                                 for name in T.CLASS_NAMES], dtype=np.uint8)
HIGHWAY_CLASSES = {T.CLASS["motorway"], T.CLASS["trunk"]}
_IS_HIGHWAY = np.isin(np.arange(256), list(HIGHWAY_CLASSES))


def piece_geometry(graph, leg: Leg):
    """Shape (lon, lat) of a piece and, per traversed edge, its first/last shape index and the fraction
    of the edge it covers. One Numba call over the graph's shape arrays; only the two end edges are
    cut at the snapped positions (as `geoengine.graph.store.cut_polyline` does). Consecutive edges
    share their junction point."""
    return _piece_shape(np.ascontiguousarray(leg.edges, dtype=np.int64), float(leg.f_first), float(leg.f_last),
                        graph.shape_offsets, graph.shape_lon, graph.shape_lat)


@numba.njit(cache=True, nogil=True)
def _hav(lon1, lat1, lon2, lat2):
    r = np.pi / 180.0
    a = np.sin((lat2 - lat1) * r / 2) ** 2 + np.cos(lat1 * r) * np.cos(lat2 * r) * np.sin((lon2 - lon1) * r / 2) ** 2
    return 2 * EARTH_R * np.arcsin(np.sqrt(min(a, 1.0)))


@numba.njit(cache=True, nogil=True)
def _cut(lo, la, s, t, out_lo, out_la, pos):
    """Append the part of polyline (lo, la) between fractions s <= t of its length; returns new pos."""
    m = lo.shape[0]
    if s <= 0.0 and t >= 1.0:
        for k in range(m):
            out_lo[pos] = lo[k]
            out_la[pos] = la[k]
            pos += 1
        return pos
    s = min(max(s, 0.0), 1.0)
    t = min(max(t, s), 1.0)
    cum = np.zeros(m)
    for k in range(m - 1):
        cum[k + 1] = cum[k] + _hav(lo[k], la[k], lo[k + 1], la[k + 1])
    total = cum[m - 1]
    if total <= 0 or m < 2:
        out_lo[pos] = lo[0]
        out_la[pos] = la[0]
        return pos + 1
    i_s = 0
    for side in range(2):
        x = (s if side == 0 else t) * total
        # searchsorted(cum, x, 'right') - 1, clipped to [0, m - 2]
        i = np.searchsorted(cum, x, side="right") - 1
        i = min(max(i, 0), m - 2)
        d = cum[i + 1] - cum[i]
        u = 0.0 if d <= 0 else (x - cum[i]) / d
        if side == 1:
            for k in range(i_s + 1, i + 1):
                out_lo[pos] = lo[k]
                out_la[pos] = la[k]
                pos += 1
        else:
            i_s = i
        out_lo[pos] = lo[i] + u * (lo[i + 1] - lo[i])
        out_la[pos] = la[i] + u * (la[i + 1] - la[i])
        pos += 1
    return pos


@numba.njit(cache=True, nogil=True)
def _piece_shape(edges, f_first, f_last, so, slon, slat):
    n = edges.shape[0]
    total = 0
    for i in range(n):
        k = edges[i] >> 1
        total += so[k + 1] - so[k]
    out_lo = np.empty(total + 2)
    out_la = np.empty(total + 2)
    begin = np.zeros(n, np.int64)
    end = np.zeros(n, np.int64)
    covered = np.ones(n)
    pos = 0
    for i in range(n):
        k = edges[i] >> 1
        a, b = so[k], so[k + 1]
        c = b - a
        lo = np.empty(c)
        la = np.empty(c)
        if edges[i] & 1:
            for j in range(c):
                lo[j] = slon[b - 1 - j]
                la[j] = slat[b - 1 - j]
        else:
            for j in range(c):
                lo[j] = slon[a + j]
                la[j] = slat[a + j]
        s = f_first if i == 0 else 0.0
        t = f_last if i == n - 1 else 1.0
        if i == 0 or i == n - 1:
            covered[i] = t - s
        start = pos
        if i == 0:
            pos = _cut(lo, la, s, t, out_lo, out_la, pos)
            begin[i] = 0
            end[i] = pos - 1
        else:
            # the junction point is the previous edge's last point: drop this edge's first point
            pos = _cut(lo, la, s, t, out_lo, out_la, pos)
            for j in range(start, pos - 1):
                out_lo[j] = out_lo[j + 1]
                out_la[j] = out_la[j + 1]
            pos -= 1
            begin[i] = end[i - 1]
            end[i] = begin[i] + (pos - start)
    return out_lo[:pos].copy(), out_la[:pos].copy(), begin, end, covered


def _units_scale(units: str) -> float:
    return 1000.0 if units == "kilometers" else 1000.0 * KM_PER_MILE


def _encode(lon, lat, fmt: str):
    from geoengine.geo import encode_polyline

    if fmt == "geojson":
        return {"type": "LineString", "coordinates": np.round(np.column_stack([lon, lat]), 6).tolist()}
    return encode_polyline(lat, lon, 6 if fmt == "polyline6" else 5)


def _bbox(lon, lat) -> dict:
    return {"min_lat": round(float(lat.min()), 6), "min_lon": round(float(lon.min()), 6),
            "max_lat": round(float(lat.max()), 6), "max_lon": round(float(lon.max()), 6)}


def leg_geometry(router, pieces: list[Leg]):
    """Shape (lon, lat) and edges of consecutive pieces (one leg), without the narrative's inputs."""
    g = router.graph
    lons, lats, edges, covered = [], [], [], []
    for p_i, piece in enumerate(pieces):
        lo, la, _b, _e, cov = piece_geometry(g, piece)
        if p_i > 0:
            lo, la = lo[1:], la[1:]
        lons.append(lo)
        lats.append(la)
        edges.append(piece.edges)
        covered.append(cov)
    ed = np.concatenate(edges)
    k = ed >> 1
    extra = {"flags": np.asarray(g.seg_flags)[k], "class": np.asarray(g.seg_class)[k].astype(np.int64), "edges": ed,
             "covered": np.concatenate(covered)}
    return np.concatenate(lons), np.concatenate(lats), extra


def leg_path(router, prof, pieces: list[Leg], stop_kinds: list[str], points) -> tuple[PathInfo, dict]:
    """PathInfo over consecutive pieces (one leg) plus per-edge arrays for summaries."""
    g = router.graph
    lons, lats, begins, ends, edges, covered, stops = [], [], [], [], [], [], []
    offset = 0
    for p_i, piece in enumerate(pieces):
        lo, la, b, e, cov = piece_geometry(g, piece)
        if p_i > 0:
            # the next piece starts where the previous ended (same location); drop the duplicate point
            lo, la = lo[1:], la[1:]
            b = np.maximum(b - 1, 0) + offset
            e = e - 1 + offset
            b[0] = offset
        lons.append(lo)
        lats.append(la)
        begins.append(b)
        ends.append(e)
        edges.append(piece.edges)
        covered.append(cov)
        offset = int(e[-1]) if len(e) else offset
        if p_i < len(pieces) - 1:
            stops.append(Stop(edge=int(sum(len(x) for x in edges)) - 1, kind=stop_kinds[p_i],
                              point=points[p_i + 1], index=p_i + 1))
    lon = np.concatenate(lons)
    lat = np.concatenate(lats)
    ed = np.concatenate(edges)
    cov = np.concatenate(covered)
    info = g.path_info(ed)
    length_m = np.asarray(info["length_m"], dtype=np.float64) * cov
    time_s = prof.time[ed] * cov
    flags = np.asarray(info["flags"])
    klass = np.asarray(info["class"]).astype(np.int64)
    usable_out = prof_usable_out(prof)
    deg = usable_out[np.asarray(g.edge_src)[ed]].astype(np.int32)
    prev_rev_usable = np.zeros(len(ed), dtype=np.int32)
    if len(ed) > 1:
        prev_rev_usable[1:] = prof.usable[ed[:-1] ^ 1]
    deg = deg - prev_rev_usable + 1
    path = PathInfo(
        lon=lon, lat=lat, shape_begin=np.concatenate(begins), shape_end=np.concatenate(ends),
        length_m=length_m, time_s=time_s, name=list(info["name"]), ref=list(info["ref"]),
        road_class=_CLASS_FOR_NARRATIVE[klass], is_roundabout=(flags & T.F_ROUNDABOUT) != 0,
        is_ferry=(flags & T.F_FERRY) != 0, is_link=(flags & T.F_LINK) != 0, node_degree=deg,
        stops=stops, origin_point=points[0], destination_point=points[-1],
    )
    extra = {"flags": flags, "class": klass, "edges": ed, "length_m": length_m, "time_s": time_s, "covered": cov}
    return path, extra


def prof_usable_out(prof) -> np.ndarray:
    cached = getattr(prof, "_usable_out", None)
    if cached is None:
        g = prof.graph
        cached = np.bincount(np.asarray(g.edge_src)[prof.usable], minlength=g.n_nodes)
        prof._usable_out = cached
    return cached


def build_trip(router, prof, req, cands, pieces: list[Leg], notes: list[str]) -> dict:
    opts = req.directions_options
    units = opts.units
    scale = _units_scale(units)
    locs = req.locations
    n = len(locs)
    # legs end at break / break_through locations (and the last)
    bounds = [0] + [i for i in range(1, n - 1) if locs[i].type in ("break", "break_through")] + [n - 1]
    legs = []
    total_time = total_len = 0.0
    total_climb = total_descent = 0.0
    grades = bool(router.graph.meta.get("grades"))
    all_lon, all_lat = [], []
    has = {"has_toll": False, "has_highway": False, "has_ferry": False}
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        leg_pieces = pieces[a:b]
        kinds = [locs[i].type for i in range(a + 1, b)]
        points = [(float(locs[i].lon), float(locs[i].lat)) for i in range(a, b + 1)]
        if opts.directions_type != "none":
            path, extra = leg_path(router, prof, leg_pieces, kinds, points)
            maneuvers = narrate(path, opts.language, units, opts.directions_type)
            leg_lon, leg_lat = path.lon, path.lat
        else:  # no maneuvers asked for: shape and summary only
            leg_lon, leg_lat, extra = leg_geometry(router, leg_pieces)
        wait = sum(float(locs[i].waiting_secs or 0) for i in range(a + 1, b + 1))
        if a == 0:
            wait += float(locs[0].waiting_secs or 0)
        # totals from the search's packed metric (turn delays included): the same numbers /matrix gives
        t = float(sum(p.time_s for p in leg_pieces)) + wait
        length = float(sum(p.length_m for p in leg_pieces))
        flags = extra["flags"]
        leg_has = {
            "has_toll": bool((flags & T.F_TOLL).any()),
            "has_highway": bool(_IS_HIGHWAY[extra["class"]].any()),
            "has_ferry": bool((flags & T.F_FERRY).any()),
        }
        for k, v in leg_has.items():
            has[k] = has[k] or v
        summary = {"time": round(t, 3), "length": round(length / scale, 3), **_bbox(leg_lon, leg_lat), **leg_has}
        if grades:  # metres climbed and descended, from the DEM grades of the traversed edges
            climb, descent = climb_descent(router.graph, extra["edges"], extra["covered"])
            if climb is not None:
                summary["climb"], summary["descent"] = round(climb, 1), round(descent, 1)
                total_climb += climb
                total_descent += descent
        leg_doc = {"summary": summary, "shape": _encode(leg_lon, leg_lat, req.shape_format)}
        if opts.directions_type != "none":
            leg_doc["maneuvers"] = maneuvers
        legs.append(leg_doc)
        total_time += t
        total_len += length
        all_lon.append(leg_lon)
        all_lat.append(leg_lat)
    lon = np.concatenate(all_lon)
    lat = np.concatenate(all_lat)
    locations = []
    for i, loc in enumerate(locs):
        c = cands[i]
        # the candidate the path actually uses (it arrives there, or leaves from there for the origin)
        k = pieces[i - 1].dst_index if i > 0 else pieces[0].src_index
        k = k if 0 <= k < len(c["distance"]) else 0
        doc = {"type": loc.type, "lat": round(float(loc.lat), 6), "lon": round(float(loc.lon), 6),
               "original_index": i,
               "snapped": {"lat": round(float(c["lat"][k]), 6), "lon": round(float(c["lon"][k]), 6),
                           "distance_m": round(float(c["distance"][k]), 1)}}
        for key in ("name", "street", "city"):
            if getattr(loc, key):
                doc[key] = getattr(loc, key)
        locations.append(doc)
    trip = {
        "locations": locations,
        "legs": legs,
        "summary": {"time": round(total_time, 3), "length": round(total_len / scale, 3), **_bbox(lon, lat), **has,
                    **({"climb": round(total_climb, 1), "descent": round(total_descent, 1)} if grades else {})},
        "status_message": "Found route between points",
        "status": 0,
        "units": units,
        "language": opts.language,
        "costing": prof.costing,
    }
    if notes:
        trip["warnings"] = notes
    doc = {"trip": trip}
    if req.id is not None:
        doc["id"] = req.id
    return doc
