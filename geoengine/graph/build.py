"""OSM extract -> road graph arrays (one pass of pyosmium with node locations, then numpy).

Ways are split at junctions (nodes shared by two or more routable ways, and way ends) into undirected
segments; segment k gives directed edges 2k (along the way) and 2k+1 (against it). Ways that reference
nodes missing from the extract (clipped extracts) are cut at the gap, not dropped.
"""

from __future__ import annotations

import json
from array import array
from itertools import repeat
from pathlib import Path

import numpy as np
import osmium

from geoengine import geo
from geoengine.arrays import member, unique
from geoengine.bundler.locations import LOCATION_INDEX
from geoengine.graph import tags as T
from geoengine.graph.store import GRAPH_FORMAT  # the format defined with the reader
from geoengine.osmtags import tag_dict


class _Strings:
    def __init__(self):
        self.index = {"": 0}
        self.items = [""]

    def add(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.items)
            self.items.append(s)
        return i


def _restriction_modes(rtags: dict) -> tuple[str | None, int]:
    """(restriction value, modes it applies to) of a restriction relation."""
    value = rtags.get("restriction")
    modes = T.VEHICLES
    if value is None:
        for key, bits in (("restriction:motorcar", T.AUTO | T.TAXI), ("restriction:hgv", T.TRUCK),
                          ("restriction:bus", T.BUS), ("restriction:bicycle", T.BICYCLE),
                          ("restriction:motorcycle", T.MOTORCYCLE), ("restriction:moped", T.MOTOR_SCOOTER),
                          ("restriction:motor_vehicle", T.MOTOR)):
            if key in rtags:
                value, modes = rtags[key], bits
                break
    exc = rtags.get("except")
    if exc:
        for item in exc.replace(",", ";").split(";"):
            item = item.strip()
            modes &= ~{"bicycle": T.BICYCLE, "hgv": T.TRUCK, "bus": T.BUS, "psv": T.BUS | T.TAXI,
                       "taxi": T.TAXI, "motorcar": T.AUTO, "moped": T.MOTOR_SCOOTER,
                       "motorcycle": T.MOTORCYCLE, "motor_vehicle": T.MOTOR}.get(item, 0)
    return value, modes


ATTR_COLUMNS = (("cls", "B"), ("flags", "L"), ("surface", "B"), ("sac", "B"), ("speed_fwd", "f"),
                 ("speed_bwd", "f"), ("access_fwd", "l"), ("access_bwd", "l"), ("dest_fwd", "B"),
                 ("dest_bwd", "B"), ("duration_s", "d"), ("name", "l"), ("ref", "l"), ("car_lua", "B"))
UNDEFINED_COORD = 2147483647  # osmium's x/y of a node reference without a location


def read_osm(path: str | Path) -> dict:
    """One pass over the extract: routable ways (with node locations), barrier nodes, restrictions.

    Memory is bounded by compact columns: way-node references, fixed-point coordinates and the way
    index are appended to typed arrays (8 + 4 + 4 + 4 bytes per way node), way attributes to one typed
    column per attribute; no Python object is kept per node, way node or way. Node locations come
    from osmium's own index (C++), so untagged nodes never reach Python."""
    strings = _Strings()
    way_ids = array("q")
    cols = {key: array(code) for key, code in ATTR_COLUMNS}
    limits = array("f")
    refs, xs, ys, way_of_point = array("q"), array("i"), array("i"), array("i")
    refs_append, xs_append, ys_append = refs.append, xs.append, ys.append
    barriers: dict[int, int] = {}
    borders: set[int] = set()
    signals: set[int] = set()
    obstacles: dict[int, tuple[float, float]] = {}  # car.lua's obstacle seconds (along, against the way)
    restrictions = []
    fp = osmium.FileProcessor(str(path)).with_locations(LOCATION_INDEX).with_filter(
        osmium.filter.KeyFilter(*READ_KEYS)
    )
    for obj in fp:
        if obj.is_way():
            attr = way_record(tag_dict(obj.tags))
            if attr is None:
                continue
            wi = len(way_ids)
            way_ids.append(obj.id)
            attr["name"] = strings.add(attr["name"])
            attr["ref"] = strings.add(attr["ref"])
            for key, col in cols.items():
                col.append(attr[key])
            limits.extend(attr["limits"])
            k = 0
            for n in obj.nodes:  # one NodeRef per node (each costs a C++ call), read once
                loc = n.location
                refs_append(n.ref)
                xs_append(loc.x)
                ys_append(loc.y)
                k += 1
            way_of_point.extend(repeat(wi, k))
        elif obj.is_node():
            signal, obs, border, modes = node_records(obj.tags)
            if signal:
                signals.add(obj.id)
            if obs is not None:
                obstacles[obj.id] = obs
            if border:
                borders.add(obj.id)
            if modes is not None:
                barriers[obj.id] = modes
        elif obj.is_relation():
            rtags = tag_dict(obj.tags)
            if rtags.get("type") == "restriction":  # the members of other relations are never read
                restrictions.append(restriction_record(obj.id, rtags, [(m.type, m.ref, m.role) for m in obj.members]))
    fp = obj = None  # osmium's node-location index (16 bytes per node of the extract) goes before the arrays grow
    n_ways = len(way_ids)
    return {
        "strings": strings.items,
        "way_ids": _np(way_ids, np.int64),
        "way_cols": {key: _np(col, None) for key, col in cols.items()},
        "way_limits": _np(limits, np.float32).reshape(n_ways, len(T.LIMIT_NAMES)),
        "refs": _np(refs, np.int64),
        "x": _np(xs, np.int32),
        "y": _np(ys, np.int32),
        "way_of_point": _np(way_of_point, np.int64),
        **node_sets(barriers, borders, signals, obstacles),
        "restrictions": restrictions,
    }


#: the keys a read keeps objects by (osmium.filter.KeyFilter): an object with none of them is not read
READ_KEYS = ("highway", "route", "type", "barrier")


def passes_filter(tags) -> bool:
    """Whether the read's KeyFilter lets an object with `tags` through (one of READ_KEYS)."""
    return any(k in tags for k in READ_KEYS)


def way_record(tags: dict) -> dict | None:
    """What the read keeps of a way with `tags` (a dict, the read's filter passed): its attribute
    columns (`ATTR_COLUMNS`; name and ref as strings), limits (inf when untagged), or None when the
    way is not routable."""
    attr = T.classify_way(tags)
    if attr is None:
        return None
    attr["car_lua"] = T.in_car_lua_graph(tags)
    attr["duration_s"] = attr["duration_s"] or 0.0
    attr["limits"] = [float("inf") if v is None else v for v in attr["limits"]]
    return attr


def node_records(tags) -> tuple[bool, tuple[float, float] | None, bool, int | None]:
    """What the read keeps of a node with `tags` (a pyosmium TagList or a dict; the read's filter
    passed): (a traffic signal, car.lua's obstacle seconds or None, a border control, the modes a
    barrier lets through or None when it restricts none)."""
    signal = tags.get("highway") == "traffic_signals" or tags.get("crossing") == "traffic_signals"
    obs = T.car_obstacle(tags)
    border = False
    modes = None
    if "barrier" in tags:
        border = tags.get("barrier") == "border_control"
        modes = T.barrier_modes(tags if isinstance(tags, dict) else tag_dict(tags))
        if modes == T.ALL_MODES:
            modes = None
    return signal, obs, border, modes


def restriction_record(rid: int, rtags: dict, members: list) -> tuple | None:
    """What the read keeps of a relation (the read's filter passed): (id, restriction value, modes,
    members) for a `type=restriction` relation, else None."""
    if rtags.get("type") != "restriction":
        return None
    value, modes = _restriction_modes(rtags)
    return (rid, value, modes, members)


def node_sets(barriers: dict, borders, signals, obstacles: dict) -> dict:
    """The read's node sets as arrays sorted by OSM id (`raw`'s barrier_ids/modes, border_ids,
    signal_ids, obstacle_ids and obstacle_s float64[n, 2])."""
    def ids_of(keys) -> np.ndarray:
        return np.sort(np.fromiter(keys, dtype=np.int64, count=len(keys)))

    b_ids = ids_of(barriers)
    o_ids = ids_of(obstacles)
    return {
        "barrier_ids": b_ids,
        "barrier_modes": np.array([barriers[i] for i in b_ids.tolist()], dtype=np.int64),
        "border_ids": ids_of(borders),
        "signal_ids": ids_of(signals),
        "obstacle_ids": o_ids,
        "obstacle_s": np.array([obstacles[i] for i in o_ids.tolist()], dtype=np.float64).reshape(-1, 2),
    }


def _np(buf: array, dtype) -> np.ndarray:
    """A typed array's contents as a numpy array: the buffer itself when the type is the same (a copy
    would double the largest column, the way-node references, at the read's peak), else converted."""
    a = np.frombuffer(buf, dtype=np.dtype(buf.typecode)) if len(buf) else np.zeros(0, dtype=np.dtype(buf.typecode))
    return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)


PIECE_CHUNK_SEGMENTS = 1 << 15


def _edge_obstacles(ids, sec, shape_osm_id, shape_offsets, seg_of_shape, S: int) -> np.ndarray:
    """float32[2S]: the seconds of car.lua's obstacles (`tags.car_obstacle`; node `ids`, seconds `sec`
    float64[n, 2]) each directed edge passes: on its shape after its start point (its interior points
    and its end node), each obstacle's seconds for the edge's direction along the way (edge 2k) or
    against it (2k+1)."""
    out = np.zeros(2 * S, np.float32)
    if not len(ids) or S == 0:
        return out
    ids = np.asarray(ids, dtype=np.int64)
    sec = np.asarray(sec, dtype=np.float64).reshape(-1, 2)
    order = np.argsort(ids)
    ids, sec = ids[order], sec[order]
    pos = np.minimum(np.searchsorted(ids, shape_osm_id), len(ids) - 1)
    hit = np.flatnonzero(ids[pos] == shape_osm_id)
    if not len(hit):
        return out
    seg = seg_of_shape[hit]
    first = hit == shape_offsets[seg]
    last = hit == shape_offsets[seg + 1] - 1
    # along the way (2k): every point but the first; against it (2k+1): every point but the last
    fw = ~first
    bw = ~last
    out += np.bincount(2 * seg[fw], weights=sec[pos[hit[fw]], 0], minlength=2 * S).astype(np.float32)
    out += np.bincount(2 * seg[bw] + 1, weights=sec[pos[hit[bw]], 1], minlength=2 * S).astype(np.float32)
    return out


def build_graph(osm_path: str | Path, out_dir: str | Path) -> dict:
    """Read `osm_path`, write the graph arrays into `out_dir` and what the read kept into
    `out_dir/raw` (geoengine.graph.raw: an update patches it instead of reading the extract again);
    return {"outputs", "counts", "info"}."""
    from geoengine.graph.raw import RAW_DIR, write_raw

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = read_osm(osm_path)
    kept = [f"{RAW_DIR}/{name}" for name in write_raw(raw, out_dir / RAW_DIR)]
    res = graph_arrays(raw, out_dir)
    res["outputs"] += kept
    return res


def graph_arrays(raw: dict, out_dir: Path) -> dict:
    """The array phase of the build: `raw` (what `read_osm` returns, or an update's patch of it) ->
    the graph arrays, strings.bin and graph.json in `out_dir`; {"outputs", "counts", "info"}. It takes
    the per-point arrays out of `raw` (so that each can be freed as soon as nothing needs it)."""
    # Per-point arrays are the stage's bulk (tens of bytes per way node): each is dropped as soon as
    # nothing further needs it, and `raw` gives up its references so that filtering frees the originals.
    refs, wop = raw.pop("refs"), raw.pop("way_of_point")
    x, y = raw.pop("x"), raw.pop("y")
    missing = (x == UNDEFINED_COORD) | (y == UNDEFINED_COORD)
    lon = x / 1e7
    lat = y / 1e7
    lon[missing] = np.nan
    lat[missing] = np.nan
    del x, y, missing
    cols = raw["way_cols"]
    n_ways = len(raw["way_ids"])
    valid = ~np.isnan(lon)
    n_missing = int((~valid).sum())
    ways_cut = int(unique(wop[~valid]).size) if n_missing else 0

    # Drop missing points and consecutive duplicates within a way; remember gaps as run breaks.
    keep = valid.copy()
    same_way_prev = np.zeros(len(refs), dtype=bool)
    same_way_prev[1:] = wop[1:] == wop[:-1]
    dup = np.zeros(len(refs), dtype=bool)
    dup[1:] = same_way_prev[1:] & (refs[1:] == refs[:-1])
    # a gap: a missing point between two kept points of the same way breaks the run
    gap_before = np.zeros(len(refs), dtype=bool)
    if n_missing:
        # cumulative count of missing points per position; a kept point whose previous kept point of the
        # same way has missing points in between starts a new run
        miss_cum = np.cumsum(~valid)
        idx_keep = np.flatnonzero(keep)
        prev = np.r_[-1, idx_keep[:-1]] if len(idx_keep) else np.zeros(0, dtype=np.int64)
        has_gap = np.zeros(len(idx_keep), dtype=bool)
        okp = prev >= 0
        has_gap[okp] = (miss_cum[idx_keep[okp]] - miss_cum[prev[okp]]) > 0
        gap_before[idx_keep[has_gap]] = True
    keep &= ~dup
    del valid, same_way_prev, dup
    if n_missing:
        del miss_cum, idx_keep, prev, has_gap, okp
    refs, lon, lat, wop, gap_before = refs[keep], lon[keep], lat[keep], wop[keep], gap_before[keep]
    del keep
    npts = len(refs)

    # Runs: maximal stretches of consecutive points of one way without a gap.
    run_start = np.ones(npts, dtype=bool)
    run_start[1:] = (wop[1:] != wop[:-1]) | gap_before[1:]
    run_end = np.ones(npts, dtype=bool)
    run_end[:-1] = run_start[1:]
    del gap_before
    single = run_start & run_end  # runs of one point carry no segment
    # Junctions: nodes used at least twice (counting only points in runs of >= 2 points), and run ends.
    usable = ~single
    del single
    uniq, inv = np.unique(refs, return_inverse=True)
    shared_pt = np.bincount(inv, weights=usable, minlength=len(uniq))[inv] >= 2  # a node of 2+ usable points
    del uniq, inv
    is_vertex = usable & (shared_pt | run_start | run_end)
    del run_start
    # Barrier nodes restrict the segment they lie on (see docs/graph.md).
    barrier_ids, barrier_modes = raw["barrier_ids"], raw["barrier_modes"]
    pt_barrier = member(refs, barrier_ids) & usable
    border_ids = raw["border_ids"]
    pt_border = member(refs, border_ids) & usable

    # Segments between consecutive points of a run.
    seg_ok = ~run_end  # point i -> i+1 is a piece of a segment
    del run_end, usable
    starts = is_vertex & seg_ok  # a segment starts at each vertex that has a next point in its run
    seg_of_piece = np.cumsum(starts) - 1
    S = int(starts.sum())
    start_pt = np.flatnonzero(starts)
    # end point of segment k: the first vertex after its start (within the run)
    vert_idx = np.flatnonzero(is_vertex)
    pos = np.searchsorted(vert_idx, start_pt, side="right")
    end_pt = vert_idx[pos]
    # Shape: points start_pt..end_pt inclusive.
    n_shape = end_pt - start_pt + 1
    shape_offsets = np.zeros(S + 1, dtype=np.int64)
    np.cumsum(n_shape, out=shape_offsets[1:])
    shape_idx = np.repeat(start_pt - shape_offsets[:-1], n_shape) + np.arange(shape_offsets[-1])
    shape_lon = lon[shape_idx]
    shape_lat = lat[shape_idx]

    # Segment lengths: piece lengths summed per segment, in chunks of whole segments (each sum is the
    # same sequence of additions as over all pieces at once; haversine's temporaries stay small).
    piece = np.flatnonzero(seg_ok)
    seg_of = seg_of_piece[piece]
    del seg_of_piece, seg_ok, starts
    seg_length = np.zeros(S)
    cuts = np.searchsorted(seg_of, np.arange(0, S + PIECE_CHUNK_SEGMENTS, PIECE_CHUNK_SEGMENTS))
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        if a < b:
            p = piece[a:b]
            seg_length += np.bincount(seg_of[a:b], weights=geo.haversine_m(lat[p], lon[p], lat[p + 1], lon[p + 1]),
                                      minlength=S)
    del piece, seg_of

    # Junction vertices: compact ids.
    vertex_ref = refs[is_vertex]
    node_osm, node_of_vertex = np.unique(vertex_ref, return_inverse=True)
    node_index = np.full(npts, -1, dtype=np.int64)
    node_index[is_vertex] = node_of_vertex
    N = len(node_osm)
    node_lon = np.zeros(N)
    node_lat = np.zeros(N)
    node_lon[node_of_vertex] = lon[is_vertex]
    node_lat[node_of_vertex] = lat[is_vertex]
    seg_u = node_index[start_pt].astype(np.int32)
    seg_v = node_index[end_pt].astype(np.int32)
    del node_index, node_of_vertex, vertex_ref, vert_idx, pos, is_vertex, lon, lat

    # Way attributes per segment.
    seg_wi = wop[start_pt]
    del wop, start_pt, end_pt
    A = lambda key, dt: cols[key].astype(dt, copy=False)[seg_wi]  # noqa: E731
    seg_way = raw["way_ids"][seg_wi]
    seg_class = A("cls", np.uint8)
    seg_flags = A("flags", np.uint32)
    seg_surface = A("surface", np.uint8)
    seg_sac = A("sac", np.uint8)
    seg_name = A("name", np.int32)
    seg_ref = A("ref", np.int32)
    seg_car_lua = A("car_lua", np.bool_)
    seg_limits = raw["way_limits"][seg_wi] if n_ways else np.zeros((0, len(T.LIMIT_NAMES)), np.float32)

    # Barriers and borders: points of a segment (shape including ends).
    seg_of_shape = np.repeat(np.arange(S), n_shape)
    bar_pts = pt_barrier[shape_idx]
    seg_barrier_block = np.zeros(S, dtype=np.int64)  # modes blocked
    n_barrier_at_junction = 0
    if bar_pts.any():
        bmode = dict(zip(barrier_ids.tolist(), barrier_modes.tolist(), strict=True))
        sp = np.flatnonzero(bar_pts)
        for p in sp.tolist():  # few barrier points (hundreds at most)
            r = int(refs[shape_idx[p]])
            k = int(seg_of_shape[p])
            is_end = p == shape_offsets[k] or p == shape_offsets[k + 1] - 1
            if is_end and shared_pt[shape_idx[p]]:
                n_barrier_at_junction += 1  # a barrier where ways meet: not applied (see docs/graph.md)
                continue
            seg_barrier_block[k] |= T.ALL_MODES & ~bmode[r]
        seg_flags[seg_barrier_block != 0] |= T.F_BARRIER
    border_seg = unique(seg_of_shape[pt_border[shape_idx]])
    seg_flags[border_seg] |= T.F_BORDER
    # Traffic signals passed by each directed edge: on its shape after its start point.
    signal_ids = raw["signal_ids"]
    del shared_pt, pt_barrier, pt_border, bar_pts
    sig_pt = member(refs, signal_ids)[shape_idx]
    is_first = np.zeros(len(shape_idx), dtype=bool)
    is_first[shape_offsets[:-1]] = True
    is_last = np.zeros(len(shape_idx), dtype=bool)
    is_last[shape_offsets[1:] - 1] = True
    interior = np.bincount(seg_of_shape[sig_pt & ~is_first & ~is_last], minlength=S)
    shape_osm_id = refs[shape_idx]  # OSM node id of every shape point (segment speeds by node pair)
    obstacle_s = _edge_obstacles(raw["obstacle_ids"], raw["obstacle_s"], shape_osm_id, shape_offsets, seg_of_shape, S)
    del refs, shape_idx, seg_of_shape, is_first, is_last
    at_u = sig_pt[shape_offsets[:-1]].astype(np.int64)
    at_v = sig_pt[shape_offsets[1:] - 1].astype(np.int64)

    # Directed edges.
    E = 2 * S
    edge_src = np.empty(E, dtype=np.int32)
    edge_dst = np.empty(E, dtype=np.int32)
    edge_src[0::2], edge_dst[0::2] = seg_u, seg_v
    edge_src[1::2], edge_dst[1::2] = seg_v, seg_u
    acc = np.empty(E, dtype=np.uint8)
    dest = np.empty(E, dtype=np.uint8)
    speed = np.empty(E, dtype=np.float32)
    block = (~seg_barrier_block) & 0xFF
    acc[0::2] = A("access_fwd", np.int64) & block
    acc[1::2] = A("access_bwd", np.int64) & block
    dest[0::2] = A("dest_fwd", np.uint8)
    dest[1::2] = A("dest_bwd", np.uint8)
    dest &= acc
    signals = np.empty(E, dtype=np.uint8)
    signals[0::2] = np.minimum(interior + at_v, 255)
    signals[1::2] = np.minimum(interior + at_u, 255)
    speed[0::2] = A("speed_fwd", np.float32)
    speed[1::2] = A("speed_bwd", np.float32)
    # Ferries with a duration: speed from the duration over the whole way's length.
    dur = cols["duration_s"].astype(np.float64)
    if (dur > 0).any():
        way_len = np.bincount(seg_wi, weights=seg_length, minlength=n_ways)
        wspeed = np.where(dur > 0, way_len / np.maximum(dur, 1.0) * 3.6, 0.0)
        fs = wspeed[seg_wi]
        has = fs > 0
        speed[0::2][has] = fs[has]
        speed[1::2][has] = fs[has]

    # Bearings of each directed edge at its start and its end.
    f0 = shape_offsets[:-1]
    f1 = shape_offsets[1:] - 1
    b_u = geo.bearing_deg(shape_lat[f0], shape_lon[f0], shape_lat[f0 + 1], shape_lon[f0 + 1])
    b_v = geo.bearing_deg(shape_lat[f1 - 1], shape_lon[f1 - 1], shape_lat[f1], shape_lon[f1])
    bearing_start = np.empty(E, dtype=np.float32)
    bearing_end = np.empty(E, dtype=np.float32)
    bearing_start[0::2], bearing_end[0::2] = b_u, b_v
    bearing_start[1::2], bearing_end[1::2] = (b_v + 180) % 360, (b_u + 180) % 360

    # Outgoing-edge CSR per node.
    order = np.argsort(edge_src, kind="stable").astype(np.int32)
    node_out_offsets = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_src, minlength=N), out=node_out_offsets[1:])

    # Turn restrictions.
    restr = _resolve_restrictions(raw["restrictions"], seg_way, edge_src, edge_dst, node_osm)

    arrays = {
        "node_lon": node_lon, "node_lat": node_lat, "node_osm_id": node_osm,
        "node_out_offsets": node_out_offsets, "node_out_edges": order,
        "seg_u": seg_u, "seg_v": seg_v, "seg_length": seg_length, "seg_way": seg_way,
        "seg_class": seg_class, "seg_flags": seg_flags, "seg_surface": seg_surface, "seg_sac": seg_sac,
        "seg_name": seg_name, "seg_ref": seg_ref, "seg_limits": seg_limits,
        "shape_offsets": shape_offsets, "shape_lon": shape_lon, "shape_lat": shape_lat,
        "shape_osm_id": shape_osm_id,
        "edge_src": edge_src, "edge_dst": edge_dst, "edge_access": acc, "edge_dest_only": dest,
        "seg_car_lua": seg_car_lua,
        "edge_speed": speed, "edge_signals": signals, "edge_obstacle_s": obstacle_s, "edge_bearing_start": bearing_start, "edge_bearing_end": bearing_end,
        "restr_from": restr["from"], "restr_to": restr["to"], "restr_only": restr["only"],
        "restr_modes": restr["modes"],
    }
    outputs = []
    for name, arr in arrays.items():
        np.save(out_dir / f"{name}.npy", np.ascontiguousarray(arr))
        outputs.append(f"{name}.npy")
    blob = "\x00".join(raw["strings"]).encode("utf-8")
    (out_dir / "strings.bin").write_bytes(blob)
    outputs.append("strings.bin")
    counts = {
        "nodes": N,
        "segments": S,
        "edges": E,
        "shape_points": int(shape_offsets[-1]),
        "ways": n_ways,
        "ways_cut": ways_cut,
        "ways_without_segments": int(n_ways - unique(seg_wi).size),
        "missing_node_refs": n_missing,
        "restrictions": restr["counts"]["relations"],
        "restrictions_resolved": restr["counts"]["resolved"],
        "restrictions_via_way_skipped": restr["counts"]["via_way"],
        "restrictions_unresolved": restr["counts"]["unresolved"],
        "forbidden_turn_pairs": int(len(restr["from"])),
        "barriers_applied": int((seg_barrier_block != 0).sum()),
        "barriers_at_junctions_ignored": n_barrier_at_junction,
        "border_segments": int(len(border_seg)),
        "traffic_signals": int(len(signal_ids)),
        "car_obstacles": int(len(raw["obstacle_ids"])),
    }
    meta = {
        "format": GRAPH_FORMAT,
        "counts": counts,
        "modes": T.MODE_BITS,
        "classes": T.CLASS_NAMES,
        "flags": T.FLAG_NAMES,
        "surfaces": T.SURFACE_NAMES,
        "limits": T.LIMIT_NAMES,
        "total_length_km": round(float(seg_length.sum()) / 1000, 3),
    }
    (out_dir / "graph.json").write_text(json.dumps(meta, indent=2))
    outputs.append("graph.json")
    return {"outputs": outputs, "counts": counts, "info": {"total_length_km": meta["total_length_km"]}}


def _resolve_restrictions(relations, seg_way, edge_src, edge_dst, node_osm) -> dict:
    """Via-node restrictions -> directed edge pairs (from, to). `only` marks only_* pairs."""
    counts = {"relations": len(relations), "resolved": 0, "via_way": 0, "unresolved": 0, "other": 0}
    E = len(edge_src)
    edge_way = np.repeat(seg_way, 2)
    # index: (way id, node idx) -> edges ending / starting there
    by_key_in: dict[tuple[int, int], list[int]] = {}
    by_key_out: dict[tuple[int, int], list[int]] = {}
    wanted_ways = set()
    for _rid, _value, _modes, members in relations:
        for mtype, ref, _role in members:
            if mtype == "w":
                wanted_ways.add(ref)
    if wanted_ways and E:
        sel = np.flatnonzero(np.isin(edge_way, np.fromiter(wanted_ways, dtype=np.int64)))
        for e, w, s, d in zip(sel.tolist(), edge_way[sel].tolist(), edge_src[sel].tolist(), edge_dst[sel].tolist(),
                              strict=True):
            by_key_in.setdefault((w, d), []).append(e)
            by_key_out.setdefault((w, s), []).append(e)
    pf, pt, po, pm = [], [], [], []
    for _rid, value, modes, members in relations:
        if not value or not (value.startswith("no_") or value.startswith("only_")) or not modes:
            counts["other"] += 1
            continue
        frm = [ref for t, ref, role in members if role == "from" and t == "w"]
        to = [ref for t, ref, role in members if role == "to" and t == "w"]
        via = [(t, ref) for t, ref, role in members if role == "via"]
        if any(t == "w" for t, _ in via):
            counts["via_way"] += 1
            continue
        if len(via) != 1 or not frm or not to:
            counts["unresolved"] += 1
            continue
        vpos = np.searchsorted(node_osm, via[0][1])
        if vpos >= len(node_osm) or node_osm[vpos] != via[0][1]:
            counts["unresolved"] += 1
            continue
        v = int(vpos)
        ins = [e for w in frm for e in by_key_in.get((w, v), [])]
        outs = [e for w in to for e in by_key_out.get((w, v), [])]
        if not ins or not outs:
            counts["unresolved"] += 1
            continue
        counts["resolved"] += 1
        only = value.startswith("only_")
        for a in ins:
            for b in outs:
                pf.append(a)
                pt.append(b)
                po.append(only)
                pm.append(modes)
    return {
        "from": np.asarray(pf, dtype=np.int32),
        "to": np.asarray(pt, dtype=np.int32),
        "only": np.asarray(po, dtype=np.bool_),
        "modes": np.asarray(pm, dtype=np.uint8),
        "counts": counts,
    }
