"""OSRM's route document from a typed `geoengine.services.route.Route`: steps with their maneuver type,
modifier and bearings, the intersections of each step (every road arm at its maneuver point and at the
junctions it passes: narrative/junctions.py), per-segment annotations, the leg summary, the overview
geometry, and the waypoints with the names of the streets they snapped to.

This is the computation behind the OSRM dialect's answers (issue 27: the façade and the dialects never
compute): arrays of the route and the graph in, plain documents out. `q` is the dialect's parsed query
(`geoengine.dialects.osrm.parse_query`): the keys read here are geometries, overview, steps, annotations
and generate_hints. No HTTP, no OSRM error codes (the dialect maps the engine's errors).
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from geoengine.errors import GeoengineError
from geoengine.geo import encode_polyline, haversine_m, simplify_line
from geoengine.narrative.junctions import arms_table, met
from geoengine.routing.pieces import leg_osm_ids


def _geometry(coords: np.ndarray, fmt: str):
    """coords [k, 2] (lon, lat) -> OSRM geometry in `fmt`."""
    if fmt == "geojson":
        return {"type": "LineString", "coordinates": np.round(coords, 6).tolist()}
    return encode_polyline(coords[:, 1], coords[:, 0], 6 if fmt == "polyline6" else 5)


def _simplify(coords: np.ndarray) -> np.ndarray:
    """overview=simplified: Douglas-Peucker at a tolerance of 1/2000 of the route's bbox diagonal (OSRM
    simplifies for the zoom level at which the whole route is visible)."""
    if len(coords) < 3:
        return coords
    span = float(np.hypot(*(coords.max(axis=0) - coords.min(axis=0))))
    if span == 0:
        return coords[[0, -1]]
    return simplify_line(coords, span / 2000.0)


def _overview(coords: np.ndarray, q: dict):
    if q["overview"] == "false":
        return None
    return _geometry(coords if q["overview"] == "full" else _simplify(coords), q["geometries"])


def _modifier(turn: float) -> str:
    """Signed turn angle (degrees, right positive) -> OSRM direction modifier."""
    a = abs(turn)
    side = "right" if turn > 0 else "left"
    if a < 20:
        return "straight"
    if a < 60:
        return f"slight {side}"
    if a < 140:
        return side
    if a < 170:
        return f"sharp {side}"
    return "uturn"


# Valhalla maneuver type code -> (OSRM maneuver type, modifier); None modifier = from the bearings.
_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("turn", None), 1: ("depart", None), 2: ("depart", "right"), 3: ("depart", "left"),
    4: ("arrive", None), 5: ("arrive", "right"), 6: ("arrive", "left"),
    7: ("new name", "straight"), 8: ("continue", "straight"), 9: ("turn", "slight right"), 10: ("turn", "right"),
    11: ("turn", "sharp right"), 12: ("turn", "uturn"), 13: ("turn", "uturn"), 14: ("turn", "sharp left"),
    15: ("turn", "left"), 16: ("turn", "slight left"), 17: ("on ramp", "straight"), 18: ("on ramp", "right"),
    19: ("on ramp", "left"), 20: ("off ramp", "slight right"), 21: ("off ramp", "slight left"),
    22: ("fork", "straight"), 23: ("fork", "slight right"), 24: ("fork", "slight left"), 25: ("merge", "straight"),
    26: ("roundabout", None), 27: ("exit roundabout", None), 28: ("notification", None),
    29: ("notification", None), 37: ("merge", "slight right"), 38: ("merge", "slight left"),
    44: ("continue", None),
}


class LegJunctions:
    """The intersections of one leg's steps, made with two kernel calls (`junction_arms`): the arms at
    each maneuver point (with the maneuver's bearings on the route's own arms, as OSRM's) and at every
    junction with more than two roads that the route passes. Python visits the junctions found, never
    the leg's edges."""

    def __init__(self, leg, graph, usable, heads: list[tuple]):
        edges = np.asarray(leg.edges, np.int64)
        n = len(edges)
        self.n = n
        # per maneuver: (bearings, entry, in, out) at its point, or None
        self.first: list[tuple | None] = [None] * len(heads)
        at = [i for i, (kind, b, _, _) in enumerate(heads) if kind not in ("depart", "arrive") and 0 < b < n]
        if at:
            bs = np.array([heads[i][1] for i in at], np.int64)
            start, bear, entry, i_in, i_out = arms_table(
                graph, usable, edges[bs - 1], edges[bs], [heads[i][2] for i in at], [heads[i][3] for i in at], False)
            for r in met(start, i_in, i_out).tolist():
                s, t = start[r], start[r + 1]
                self.first[at[r]] = (bear[s:t].tolist(), entry[s:t].tolist(), int(i_in[r]), int(i_out[r]))
        self.js: list[int] = []  # the edge index at which each junction passed is entered, ascending
        self.passing: list[dict] = []
        if n > 1 and leg.shape_begin is not None:
            minus = np.full(n - 1, -1, np.int64)
            start, bear, entry, i_in, i_out = arms_table(graph, usable, edges[:-1], edges[1:], minus, minus, True)
            rows = met(start, i_in, i_out)
            k = np.asarray(leg.shape_begin)[rows + 1]
            lon, lat = np.asarray(leg.lon)[k].tolist(), np.asarray(leg.lat)[k].tolist()
            st, bl, el, il, ol = start.tolist(), bear.tolist(), entry.tolist(), i_in.tolist(), i_out.tolist()
            self.js = (rows + 1).tolist()
            self.passing = [{"location": [round(x, 6), round(y, 6)], "bearings": bl[st[r]:st[r + 1]],
                             "entry": el[st[r]:st[r + 1]], "in": il[r], "out": ol[r]}
                            for r, x, y in zip(rows.tolist(), lon, lat, strict=True)]

    def of_step(self, i: int, b: int, e: int, kind: str, location: list, before: int, after: int) -> list[dict]:
        """The intersections of step i (edges b..e): its maneuver point, then the junctions it passes."""
        first = self.first[i]
        if first is None:
            out = [_intersection(kind, location, before, after)]
        else:
            out = [{"location": location, "bearings": first[0], "entry": first[1], "in": first[2], "out": first[3]}]
        if kind == "arrive" or not self.js:
            return out
        lo, hi = bisect.bisect_left(self.js, max(b, 0) + 1), bisect.bisect_left(self.js, min(e, self.n))
        out.extend(self.passing[lo:hi])
        return out


def _head(m) -> tuple[str, str | None, int, int]:
    """(OSRM maneuver type, modifier, bearing before, bearing after) of a typed Maneuver."""
    kind, modifier = _TYPES.get(int(m.type), ("turn", None))
    before = 0 if kind == "depart" else int(round(float(m.bearing_before or 0))) % 360
    after = 0 if kind == "arrive" else int(round(float(m.bearing_after or 0))) % 360
    if modifier is None and kind not in ("notification", "depart", "arrive"):
        modifier = _modifier(((after - before + 540.0) % 360.0) - 180.0) \
            if m.bearing_before is not None and m.bearing_after is not None else "straight"
    return kind, modifier, before, after


def _step(m, lon: np.ndarray, lat: np.ndarray, q: dict, mode: str, junctions: LegJunctions | None = None,
          i: int = 0, head: tuple | None = None) -> dict:
    """An OSRM RouteStep from a typed Maneuver (`geoengine.services.route.Maneuver`) of a leg whose shape
    is (lon, lat), the i-th of its leg (`head`: its `_head` when already made); with the leg's
    `junctions`, its intersections list every road arm."""
    last = len(lon) - 1
    b, e = min(int(m.begin_shape_index), last), min(int(m.end_shape_index), last)
    kind, modifier, before, after = head or _head(m)
    idx = np.arange(b, e + 1) if e > b else np.array([b, b])
    location = [round(float(lon[b]), 6), round(float(lat[b]), 6)]
    maneuver: dict[str, Any] = {"type": kind, "bearing_before": before, "bearing_after": after, "location": location}
    if modifier is not None:
        maneuver["modifier"] = modifier
    if int(m.type) == 26 and m.roundabout_exit_count:
        maneuver["exit"] = int(m.roundabout_exit_count)
    names = list(m.street_names or [])
    step: dict[str, Any] = {
        "distance": round(float(m.length_m), 1),
        "duration": round(float(m.time_s), 1),
        "weight": round(float(m.time_s), 1),
        "name": names[0] if names else "",
        "mode": "ferry" if int(m.type) == 28 else mode,
        "driving_side": "right",
        "geometry": _geometry(np.column_stack([lon[idx], lat[idx]]), q["geometries"]),
        "maneuver": maneuver,
        "intersections": (junctions.of_step(i, int(m.begin_edge), int(m.end_edge), kind, location, before, after)
                          if junctions is not None else [_intersection(kind, location, before, after)]),
    }
    if len(names) > 1:
        step["ref"] = "; ".join(names[1:])
    if m.text.get("instruction"):
        step["instruction"] = m.text["instruction"]  # geoengine's own text (OSRM clients render their own)
    return step


def _intersection(kind: str, location: list, before: int, after: int) -> dict:
    """The maneuver point's intersection, with the arms the route uses: the way in (reversed bearing
    before) and the way out (bearing after)."""
    if kind == "depart":
        return {"location": location, "bearings": [after], "entry": [True], "out": 0}
    if kind == "arrive":
        return {"location": location, "bearings": [(before + 180) % 360], "entry": [True], "in": 0}
    arms = sorted({(before + 180) % 360, after})
    return {"location": location, "bearings": arms, "entry": [True] * len(arms),
            "in": arms.index((before + 180) % 360), "out": arms.index(after)}


def _segment_seconds(leg, seg_m: np.ndarray) -> np.ndarray:
    """Seconds per segment of the leg's shape: each traversed edge's time spread over its own segments
    in proportion to their length (so speeds are the edges' speeds), then scaled so that the segments
    add up to the leg's duration (which also holds turn delays and waiting). Without per-edge data the
    leg's duration is spread over all segments by length."""
    n = seg_m.shape[0]
    b, e, t_edge = leg.shape_begin, leg.shape_end, leg.edge_time_s
    counts = None if b is None or e is None or t_edge is None else np.asarray(e) - np.asarray(b)
    if counts is not None and len(counts) and int(b[0]) == 0 and int(counts.sum()) == n and (counts >= 0).all():
        edge_of = np.repeat(np.arange(len(counts)), counts)
        per_edge_m = np.bincount(edge_of, weights=seg_m, minlength=len(counts))
        share = np.divide(seg_m, per_edge_m[edge_of], out=np.zeros(n), where=per_edge_m[edge_of] > 0)
        t = np.where(np.isfinite(t_edge), t_edge, 0.0)[edge_of] * share
    else:
        t = seg_m.copy()
    total = float(t.sum())
    return t * (leg.time_s / total) if total > 0 else np.zeros(n)


def _annotation(leg, which: list[str], graph=None) -> dict:
    """Per-segment annotations of a leg's shape: distances from the coordinates; durations from the
    time of the edge each segment lies on (`_segment_seconds`); speed = distance / duration; `nodes`:
    the OSM node id of every shape point (`geoengine.routing.pieces.leg_osm_ids`), so each pair of
    consecutive ids is the OSM segment of one annotation (what OSRM's segment speed files are keyed
    by). `metadata` names the one data source, as OSRM's does when `datasources` is asked."""
    lon, lat = leg.lon, leg.lat
    d = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]) if len(lon) > 1 else np.zeros(0)
    t = _segment_seconds(leg, d)
    out: dict[str, Any] = {}
    if "distance" in which:
        out["distance"] = np.round(d, 1).tolist()
    if "duration" in which:
        out["duration"] = np.round(t, 1).tolist()
    if "weight" in which:
        out["weight"] = np.round(t, 1).tolist()
    if "speed" in which:
        out["speed"] = np.round(np.divide(d, t, out=np.zeros_like(d), where=t > 0), 1).tolist()
    if "datasources" in which:
        out["datasources"] = [0] * len(d)
    if "nodes" in which and graph is not None:
        ids = leg_osm_ids(graph, leg)
        if ids is not None:
            out["nodes"] = ids.tolist()
    if "datasources" in which:
        out["metadata"] = {"datasource_names": ["profile"]}
    return out


def _summary(steps: list[dict]) -> str:
    """The names of the two longest-driven streets of a leg, in route order."""
    by_name: dict[str, float] = {}
    for s in steps:
        if s["name"]:
            by_name[s["name"]] = by_name.get(s["name"], 0.0) + s["distance"]
    top = set(sorted(by_name, key=lambda k: -by_name[k])[:2])
    seen: list[str] = []
    for s in steps:
        if s["name"] in top and s["name"] not in seen:
            seen.append(s["name"])
    return ", ".join(seen)


def _spread_turn_delays(steps: list[dict], duration: float) -> None:
    """Maneuver times leave out the costing's turn delays, which the leg's duration includes: spread
    the difference over the steps in proportion to their time, so that the steps add up to the leg (as
    OSRM's do)."""
    total = sum(s["duration"] for s in steps)
    if total <= 0 or duration <= 0:
        return
    f = duration / total
    for s in steps:
        s["duration"] = s["weight"] = round(s["duration"] * f, 1)


def route_object(route, q: dict, mode: str, legs=None, graph=None) -> dict:
    """An OSRM Route from a typed `geoengine.services.route.Route` (or some of its `legs`): distances and
    durations are the route's own metres and seconds."""
    legs = route.legs if legs is None else legs
    out_legs = []
    for leg in legs:
        ms = leg.maneuvers or []
        heads = [_head(m) for m in ms]
        junctions = None
        if graph is not None and ms:
            junctions = LegJunctions(leg, graph, route.usable, [(h[0], int(m.begin_edge), h[2], h[3])
                                                                 for m, h in zip(ms, heads, strict=True)])
        steps = [_step(m, leg.lon, leg.lat, q, mode, junctions, i, h) for i, (m, h) in enumerate(zip(ms, heads, strict=True))]
        if steps:  # (without steps: nothing to spread, an empty summary)
            _spread_turn_delays(steps, leg.time_s)
        duration = round(leg.time_s, 1)
        out: dict[str, Any] = {"distance": round(leg.length_m, 1), "duration": duration,
                               "weight": duration, "summary": _summary(steps) if steps else "",
                               "steps": steps if q.get("steps") else []}
        if q.get("annotations"):
            out["annotation"] = _annotation(leg, q["annotations"], graph)
        out_legs.append(out)
    duration = round(float(sum(leg.time_s for leg in legs)), 1)
    result: dict[str, Any] = {
        "distance": round(float(sum(leg.length_m for leg in legs)), 1),
        "duration": duration,
        "weight": duration,
        "weight_name": "duration",
        "legs": out_legs,
    }
    if legs and q["overview"] != "false":  # no geometry asked for: none made
        lon = np.concatenate([leg.lon if i == 0 else leg.lon[1:] for i, leg in enumerate(legs)])
        lat = np.concatenate([leg.lat if i == 0 else leg.lat[1:] for i, leg in enumerate(legs)])
        geometry = _overview(np.column_stack([lon, lat]), q)
        if geometry is not None:
            result["geometry"] = geometry
    return result


def waypoint(lon: float, lat: float, distance: float, name: str, q: dict) -> dict:
    w = {"location": [round(float(lon), 6), round(float(lat), 6)], "distance": round(float(distance), 2),
         "name": name}
    if q.get("generate_hints", True):
        w["hint"] = ""
    return w


def edge_names(engine, edges) -> list[str]:
    g = engine.graph
    if type(edges) is list and len(edges) <= 4:  # a waypoint's few edges: no arrays made for them
        seg_name, strings = g.seg_name, g.strings
        return [strings[int(seg_name[int(e) >> 1])] for e in edges]
    seg = np.asarray(g.seg_name)[np.asarray(edges, dtype=np.int64) >> 1]
    return [g.strings[int(i)] for i in seg.tolist()]


def _street_names(engine, costing: str, points: list[tuple[float, float]]) -> list[str]:
    """Names of the streets at snapped positions: the edge under each point for the costing (one grid
    kernel call per point, a few microseconds)."""
    from types import SimpleNamespace

    router = engine.router
    prof = router.profile(costing)
    out = []
    for i, (lo, la) in enumerate(points):
        try:
            c = router.plain_candidates(prof, SimpleNamespace(lon=lo, lat=la, search_radius=5), i)
            out.append(edge_names(engine, c["edge"][:1])[0] if len(c["edge"]) else "")
        except GeoengineError:
            out.append("")
    return out


def waypoints(route, q: dict, engine, costing: str) -> list[dict]:
    """One Waypoint per location of the route: its snapped position, the distance to it and the name of
    the street it snapped to (the first edge of the leg it starts, the last of the leg it ends)."""
    locs = route.locations
    names = [""] * len(locs)
    breaks = [i for i, loc in enumerate(locs) if i in (0, len(locs) - 1) or loc.type in ("break", "break_through")]
    for k, leg in enumerate(route.legs):
        if len(leg.edges) and k < len(breaks):
            first, last = edge_names(engine, [leg.edges[0], leg.edges[-1]])
            names[breaks[k]] = names[breaks[k]] or first
            if k + 1 < len(breaks):
                names[breaks[k + 1]] = last
    missing = [i for i, loc in enumerate(locs) if i not in breaks]
    if missing:  # pass-through locations: look their streets up
        for i, name in zip(missing, _street_names(engine, costing, [(locs[i].snapped_lon, locs[i].snapped_lat)
                                                                     for i in missing]), strict=True):
            names[i] = name
    return [waypoint(loc.snapped_lon, loc.snapped_lat, loc.snapped_distance_m, names[i], q)
            for i, loc in enumerate(locs)]


def nearest_waypoints(engine, c, number: int, q: dict) -> list[dict]:
    """OSRM's /nearest waypoints from the snapper's candidates `c` (nearest first): one per road segment
    (both directions of a segment snap to the same point), at most `number`, each with the street's name
    and the OSM ids of the edge's two nodes."""
    g = engine.graph
    seg = np.asarray(c.edge, dtype=np.int64) >> 1
    # one waypoint per road segment (both directions of a segment snap to the same point), nearest first
    _, first = np.unique(seg, return_index=True)
    order = np.sort(first)[: number]
    names = edge_names(engine, np.asarray(c.edge)[order])
    nodes = np.asarray(g.node_osm_id)[np.column_stack([np.asarray(g.edge_src)[c.edge[order]],
                                                       np.asarray(g.edge_dst)[c.edge[order]]])]
    wps = []
    for k, i in enumerate(order.tolist()):
        w = waypoint(c.lon[i], c.lat[i], c.distance[i], names[k], q)
        w["nodes"] = [int(x) for x in nodes[k]]
        wps.append(w)
    return wps


def table_document(engine, coords: np.ndarray, costing: str, options: dict | None, q: dict, locations=None) -> dict:
    """OSRM's /table answer (without its code) from the router's matrix between `q`'s sources and
    destinations (indices into `coords`, all when None): durations (times scale_factor) and distances,
    crow-fly estimates at fallback_speed for the pairs without a route, and where each point snapped
    with the street's name. `locations`: a Location per coordinate when some carry bearings or approaches."""
    si = q["sources"] if q["sources"] is not None else list(range(len(coords)))
    di = q["destinations"] if q["destinations"] is not None else list(range(len(coords)))
    src, dst = coords[si], coords[di]
    radius = np.array([np.nan if r is None else min(max(r, 1.0), 100.0) for r in q["radius"]], dtype=np.float64)
    sr, dr = radius[si], radius[di]
    res = engine.router.matrix(src, dst, costing, options,
                               source_radius=None if np.isnan(sr).all() else sr,
                               target_radius=None if np.isnan(dr).all() else dr,
                               source_locations=None if locations is None else [locations[i] for i in si],
                               target_locations=None if locations is None else [locations[i] for i in di])
    time_s = np.asarray(res.time_s, dtype=np.float64) * q["scale_factor"]
    dist_m = np.asarray(res.distance_m, dtype=np.float64)
    out: dict[str, Any] = {}
    missing = ~np.isfinite(time_s)
    if q["fallback_speed"] is not None and missing.any():
        a = src if q["fallback_coordinate"] == "input" else np.asarray(res.sources)
        b = dst if q["fallback_coordinate"] == "input" else np.asarray(res.targets)
        crow = haversine_m(a[:, 1][:, None], a[:, 0][:, None], b[:, 1][None, :], b[:, 0][None, :])
        dist_m = np.where(missing, crow, dist_m)
        time_s = np.where(missing, crow / q["fallback_speed"], time_s)
        out["fallback_speed_cells"] = np.argwhere(missing).tolist()
        missing = ~np.isfinite(time_s)
    if "duration" in q["annotations"]:
        out["durations"] = _table_values(time_s, missing)
    if "distance" in q["annotations"]:
        out["distances"] = _table_values(dist_m, missing)
    if not q["skip_waypoints"]:  # each point where it snapped, the distance to it, the street's name
        for name, given, snapped, edges in (("sources", src, res.sources, res.edges[0]),
                                            ("destinations", dst, res.targets, res.edges[1])):
            snapped = np.asarray(snapped)
            d = haversine_m(given[:, 1], given[:, 0], snapped[:, 1], snapped[:, 0])
            out[name] = [waypoint(lo, la, di, street, q) for (lo, la), di, street in
                         zip(snapped.tolist(), np.atleast_1d(d).tolist(), edge_names(engine, edges), strict=True)]
    return out


def _table_values(a: np.ndarray, missing: np.ndarray) -> list:
    rows = np.round(np.where(missing, 0.0, a), 1).tolist()
    if missing.any():
        for i, j in np.argwhere(missing).tolist():
            rows[i][j] = None
    return rows


def matchings_and_tracepoints(engine, matched: list, res, q: dict, mode: str) -> tuple[list[dict], list[dict | None]]:
    """OSRM's /match answer parts from the matcher's result `res` and its `matched` routes (one per matched
    section): a Route per matching with its confidence (the share of its trace points matched), and per
    trace point its tracepoint (None when unmatched): where it matched, the street, the matching and its
    index there."""
    from geoengine.routing.matching import UNMATCHED

    # per trace point: its section (matching) and the edge it lies on
    sizes = [len(sec.edges) for sec in res.sections]
    sec_of_edge = np.repeat(np.arange(len(sizes)), sizes)
    all_edges = np.concatenate([sec.edges for sec in res.sections])
    kept = (res.type != UNMATCHED) & (res.edge_index >= 0)
    sec_of_point = np.where(kept, sec_of_edge[np.clip(res.edge_index, 0, len(sec_of_edge) - 1)], -1)
    names = edge_names(engine, all_edges[np.clip(res.edge_index, 0, len(all_edges) - 1)])
    matchings = []
    for k, route_k in enumerate(matched):
        r = route_object(route_k, q, mode, graph=engine.graph)
        in_sec = sec_of_point == k
        r["confidence"] = round(float((res.type[in_sec] != UNMATCHED).mean()) if in_sec.any() else 0.0, 3)
        matchings.append(r)
    tracepoints: list[dict | None] = []
    counters: dict[int, int] = {}
    dist = np.nan_to_num(res.distance).tolist()
    for i, s in enumerate(sec_of_point.tolist()):
        if s < 0:
            tracepoints.append(None)
            continue
        w = waypoint(res.lon[i], res.lat[i], dist[i], names[i], q)
        w.update(matchings_index=s, waypoint_index=counters.get(s, 0), alternatives_count=0)
        counters[s] = counters.get(s, 0) + 1
        tracepoints.append(w)
    return matchings, tracepoints
