"""From found pieces to the Valhalla-style `trip` document of POST /route: legs split at break
locations, each with summary, encoded (or GeoJSON) shape and maneuvers from the narrative layer."""

from __future__ import annotations

import numpy as np

from geoengine.graph import tags as T
from geoengine.graph.store import cut_polyline
from geoengine.narrative import PathInfo, Stop, narrate, road_class_of
from geoengine.routing.router import KM_PER_MILE, Leg

_CLASS_FOR_NARRATIVE = np.array([int(road_class_of(name, "ferry" if name == "ferry" else None)[0])
                                 for name in T.CLASS_NAMES], dtype=np.uint8)
HIGHWAY_CLASSES = {T.CLASS["motorway"], T.CLASS["trunk"]}
_IS_HIGHWAY = np.isin(np.arange(256), list(HIGHWAY_CLASSES))


def piece_geometry(graph, leg: Leg):
    """Shape (lon, lat) of a piece and, per traversed edge, its first/last shape index and the fraction
    of the edge it covers. Vectorised gather over the graph's shape arrays; only the two end edges are
    cut at the snapped positions. Consecutive edges share their junction point."""
    edges = leg.edges
    n = len(edges)
    k = edges >> 1
    rev = (edges & 1).astype(bool)
    so = np.asarray(graph.shape_offsets)
    a, b = so[k], so[k + 1]
    counts = (b - a).astype(np.int64)
    starts = np.where(rev, b - 1, a)
    steps = np.where(rev, -1, 1)
    first = np.cumsum(counts) - counts
    local = np.arange(int(counts.sum())) - np.repeat(first, counts)
    idx = np.repeat(starts, counts) + np.repeat(steps, counts) * local
    lon_all = np.asarray(graph.shape_lon)[idx]
    lat_all = np.asarray(graph.shape_lat)[idx]
    covered = np.ones(n)

    def cut(i, s, t):
        lo = lon_all[first[i]:first[i] + counts[i]]
        la = lat_all[first[i]:first[i] + counts[i]]
        covered[i] = t - s
        return cut_polyline(lo, la, s, t) if (s > 0.0 or t < 1.0) else (lo, la)

    head = cut(0, leg.f_first, leg.f_last if n == 1 else 1.0)
    parts_lon, parts_lat = [head[0]], [head[1]]
    sizes = [len(head[0])]
    if n > 2:
        mid_lo = lon_all[first[1]:first[n - 1]]
        mid_la = lat_all[first[1]:first[n - 1]]
        keep = np.ones(len(mid_lo), dtype=bool)
        keep[first[1:n - 1] - first[1]] = False
        parts_lon.append(mid_lo[keep])
        parts_lat.append(mid_la[keep])
        sizes.extend((counts[1:n - 1] - 1).tolist())
    if n > 1:
        tail = cut(n - 1, 0.0, leg.f_last)
        parts_lon.append(tail[0][1:])
        parts_lat.append(tail[1][1:])
        sizes.append(len(tail[0]) - 1)
    sizes = np.asarray(sizes, dtype=np.int64)
    end = np.cumsum(sizes) - 1
    begin = np.concatenate([[0], end[:-1]])
    return np.concatenate(parts_lon), np.concatenate(parts_lat), begin, end, covered


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
    lons, lats, edges = [], [], []
    for p_i, piece in enumerate(pieces):
        lo, la, _b, _e, _cov = piece_geometry(g, piece)
        if p_i > 0:
            lo, la = lo[1:], la[1:]
        lons.append(lo)
        lats.append(la)
        edges.append(piece.edges)
    ed = np.concatenate(edges)
    k = ed >> 1
    extra = {"flags": np.asarray(g.seg_flags)[k], "class": np.asarray(g.seg_class)[k].astype(np.int64), "edges": ed}
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
    extra = {"flags": flags, "class": klass, "edges": ed, "length_m": length_m, "time_s": time_s}
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
        k = k if 0 <= k < len(c["edge"]) else 0
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
        "summary": {"time": round(total_time, 3), "length": round(total_len / scale, 3), **_bbox(lon, lat), **has},
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
