"""What the Valhalla dialect answers about the graph's edges, computed from the graph arrays: the
attributes of matched edges (road class, use, flags, surface, traversability: /trace_attributes), the
edges a location snaps to with the side of the street and the nodes at their ends (/locate), the edges
an isochrone search reached in its order (/expansion) with their shapes, and a line resampled at a
fixed step (/height).

The dialect (geoengine/dialects/valhalla.py) keeps Valhalla's request models and response shapes; this
module holds the computation (issue 27: dialects never compute). Valhalla's vocabulary (road_class,
use) is the one its clients read; docs/valhalla.md maps every field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geoengine.errors import InvalidRequest, Unprocessable
from geoengine.geo import bearing_deg, encode_polyline, haversine_m
from geoengine.graph import tags as T

# geoengine road class -> (Valhalla road_class, use); uses limited to the values Valhalla clients know
_ROAD = {
    "motorway": ("motorway", "road"), "trunk": ("trunk", "road"), "primary": ("primary", "road"),
    "secondary": ("secondary", "road"), "tertiary": ("tertiary", "road"),
    "unclassified": ("unclassified", "road"), "residential": ("residential", "road"),
    "service": ("service_other", "road"), "living_street": ("residential", "road"),
    "track": ("service_other", "track"), "road": ("unclassified", "road"),
    "pedestrian": ("service_other", "footway"), "footway": ("service_other", "footway"),
    "path": ("service_other", "footway"), "cycleway": ("service_other", "cycleway"),
    "bridleway": ("service_other", "footway"), "steps": ("service_other", "steps"),
    "ferry": ("service_other", "ferry"), "busway": ("service_other", "bus"),
}
_SERVICE_USE = ((T.F_DRIVEWAY, "driveway"), (T.F_ALLEY, "alley"), (T.F_PARKING_AISLE, "parking_aisle"),
                (T.F_DRIVE_THROUGH, "drive_through"))


def edge_attributes(graph, edges: list[dict]) -> list[dict]:
    """Valhalla edge attributes for matched edges (`id` = directed edge id): Valhalla's road_class and
    `use`, toll, tunnel, bridge, roundabout, surface, sidewalk, drive_on_right, traversability."""
    if not edges:
        return []
    e = np.array([x["id"] for x in edges], dtype=np.int64)
    k = e >> 1
    flags = np.asarray(graph.seg_flags)[k].astype(np.int64)
    klass = np.asarray(graph.seg_class)[k].astype(np.int64)
    surface = np.asarray(graph.seg_surface)[k].astype(np.int64)
    access_fwd = np.asarray(graph.edge_access)[e]
    access_rev = np.asarray(graph.edge_access)[e ^ 1]
    out = []
    for doc, fl, kl, su, af, ar in zip(edges, flags.tolist(), klass.tolist(), surface.tolist(),
                                       access_fwd.tolist(), access_rev.tolist(), strict=True):
        name = T.CLASS_NAMES[kl]
        road_class, use = _ROAD.get(name, ("service_other", "other"))
        if fl & T.F_LINK:
            use = "ramp"
        elif fl & T.F_FERRY:
            use = "ferry"
        else:
            for flag, service_use in _SERVICE_USE:
                if fl & flag:
                    use = service_use
                    break
        d = {**doc, "road_class": road_class, "use": use, "toll": bool(fl & T.F_TOLL),
             "tunnel": bool(fl & T.F_TUNNEL), "bridge": bool(fl & T.F_BRIDGE), "roundabout": bool(fl & T.F_ROUNDABOUT),
             "sidewalk": "both" if fl & T.F_SIDEWALK else "", "drive_on_right": True,
             "traversability": "both" if (af and ar) else "forward",
             "surface": T.SURFACE_NAMES[su] if 0 < su < len(T.SURFACE_NAMES) else ""}
        d["geoengine_road_class"] = name
        out.append(d)
    return out


def locate_documents(engine, locations: list, costing: str, costing_options: dict | None,
                     verbose: bool = False) -> list[dict]:
    """Per location: the edges it snaps to for the costing (nearest first), with the correlated point,
    the fraction along the edge, the side of the street; `verbose` adds the edge's names, shape, class,
    use and flags. A location that snaps to nothing has null edges and nodes."""
    router = engine.router
    prof = router.profile(costing, router.parse_options(costing, costing_options))
    g = engine.graph
    out = []
    for i, loc in enumerate(locations):
        doc: dict[str, Any] = {"input_lat": loc.lat, "input_lon": loc.lon}
        try:
            c = router.candidates(prof, loc, i)
        except Unprocessable as exc:
            doc.update(edges=None, nodes=None, reason=exc.detail)
            out.append(doc)
            continue
        e = np.asarray(c["edge"], dtype=np.int64)
        k = e >> 1
        bearing = np.asarray(g.edge_bearing_start)[e].astype(np.float64)
        to_input = np.asarray(bearing_deg(c["lat"], c["lon"], loc.lat, loc.lon), dtype=np.float64)
        rel = (to_input - bearing + 360.0) % 360.0
        side = np.where(c["distance"] < 1.0, "neither", np.where(rel < 180.0, "right", "left"))
        edges = []
        for j in range(len(e)):
            ed: dict[str, Any] = {"way_id": int(np.asarray(g.seg_way)[k[j]]),
                                  "correlated_lat": round(float(c["lat"][j]), 6),
                                  "correlated_lon": round(float(c["lon"][j]), 6),
                                  "side_of_street": str(side[j]), "percent_along": round(float(c["fraction"][j]), 5),
                                  "distance": round(float(c["distance"][j]), 2)}
            if verbose:
                ed.update(verbose_edge(g, int(e[j])))
            edges.append(ed)
        nodes = []
        for j in range(len(e)):
            f = float(c["fraction"][j])
            if f <= 0.0 or f >= 1.0:
                n = int(np.asarray(g.edge_src if f <= 0.0 else g.edge_dst)[e[j]])
                node = {"lat": round(float(g.node_lat[n]), 6), "lon": round(float(g.node_lon[n]), 6)}
                if node not in nodes:
                    nodes.append(node)
        doc.update(edges=edges, nodes=nodes)
        out.append(doc)
    return out


def verbose_edge(g, e: int) -> dict:
    """/locate verbose: the directed edge's id, shape, way, names, classification, speed and flags."""
    k = e >> 1
    a, b = int(g.shape_offsets[k]), int(g.shape_offsets[k + 1])
    lon = np.asarray(g.shape_lon[a:b], dtype=np.float64)
    lat = np.asarray(g.shape_lat[a:b], dtype=np.float64)
    if e & 1:
        lon, lat = lon[::-1], lat[::-1]
    attrs = edge_attributes(g, [{"id": e}])[0]
    return {
        "edge_id": {"id": e, "value": e},
        "edge_info": {"shape": encode_polyline(lat, lon, 6), "way_id": int(g.seg_way[k]),
                      "names": [x for x in (g.strings[int(g.seg_name[k])], g.strings[int(g.seg_ref[k])]) if x]},
        "edge": {"classification": {"classification": attrs["road_class"], "link": attrs["use"] == "ramp",
                                    "surface": attrs["surface"]},
                 "use": attrs["use"], "speed": int(round(float(g.edge_speed[e]))), "toll": attrs["toll"],
                 "tunnel": attrs["tunnel"], "bridge": attrs["bridge"], "round_about": attrs["roundabout"],
                 "forward": not (e & 1), "drive_on_right": True,
                 "geo_attributes": {"length": int(round(float(g.seg_length[k])))}},
    }


def expansion_edges(reach, limit: float, dedupe: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges of an isochrone search (`Engine.isochrone_reach`) within `limit`, in the order of the
    search: (edge ids, the value at which each was settled or reached, settled?). `dedupe`: of the two
    directions of a segment only the one reached first."""
    settled = np.isfinite(reach.end)
    reached = ~settled & (reach.start <= limit)
    edges = np.flatnonzero(settled | reached)
    value = np.where(settled[edges], reach.end[edges], np.maximum(reach.start[edges], 0.0))
    if dedupe:
        # of the two directions of a segment keep the one reached first
        order = np.lexsort((value, edges >> 1))
        seg = (edges >> 1)[order]
        first = np.concatenate([[True], seg[1:] != seg[:-1]]) if len(seg) else np.zeros(0, bool)
        keep = np.sort(order[first])
        edges, value = edges[keep], value[keep]
    order = np.argsort(value, kind="stable")  # in the order of the search
    edges, value = edges[order], value[order]
    return edges, value, settled[edges]


MAX_EXPANSION_EDGES = 200_000


def expansion_document(engine, loc, costing: str, costing_options: dict | None, metric: str, limit: float,
                       properties: list[str], dedupe: bool) -> dict:
    """Valhalla's /expansion FeatureCollection: the edges the search from `loc` reaches within `limit`
    (seconds or metres of `metric`), in its order, one LineString each with the asked `properties`
    (duration or distance as the metric's value, cost, edge_id, edge_status s/r, expansion_type), and a
    warning for each property the metric has not."""
    reach = engine.isochrone_reach(loc.lon, loc.lat, costing, costing_options, metric=metric, limit=limit)
    edges, value, settled = expansion_edges(reach, limit, dedupe=dedupe)
    if len(edges) > MAX_EXPANSION_EDGES:
        raise InvalidRequest.field("contours", f"the expansion has {len(edges)} edges; at most "
                                   f"{MAX_EXPANSION_EDGES} are returned: use a smaller contour")
    coords = edge_coordinates(engine.graph, edges)
    status_ = np.where(settled, "s", "r").tolist()
    columns: dict[str, list] = {}
    for p in properties:
        if p == "duration" and metric == "time" or p == "distance" and metric == "distance" or p == "cost":
            columns[p] = (np.round(value, 1) if metric == "time" else np.round(value)).tolist()
        elif p == "edge_id":
            columns[p] = edges.tolist()
        elif p == "edge_status":
            columns[p] = status_
        elif p == "expansion_type":
            columns[p] = [0] * len(edges)
    names = list(columns)
    features = [{"type": "Feature", "geometry": {"type": "LineString", "coordinates": cs},
                 "properties": {n: columns[n][i] for n in names}} for i, cs in enumerate(coords)]
    out: dict[str, Any] = {"type": "FeatureCollection", "features": features,
                           "properties": {"algorithm": "dijkstras", "metric": metric}}
    missing = [p for p in properties if p not in columns]
    if missing:
        out["warnings"] = [f"{p} is not available for a {metric} expansion" for p in missing]
    return out


def edge_coordinates(g, edges: np.ndarray) -> list[list]:
    """[lon, lat] lists of each directed edge's shape (reversed for odd edges), from the graph arrays."""
    if len(edges) == 0:
        return []
    k = edges >> 1
    so = np.asarray(g.shape_offsets)
    a, b = so[k], so[k + 1]
    counts = b - a
    starts = np.repeat(a, counts)
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    rev = np.repeat(edges & 1, counts).astype(bool)
    idx = np.where(rev, np.repeat(b - 1, counts) - within, starts + within)
    pts = np.round(np.column_stack([np.asarray(g.shape_lon)[idx], np.asarray(g.shape_lat)[idx]]), 6)
    return [p.tolist() for p in np.split(pts, np.cumsum(counts)[:-1])]


def resample(lats: np.ndarray, lons: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """The line through (lats, lons) resampled every `step` metres along it (its last point kept)."""
    seg = haversine_m(lats[:-1], lons[:-1], lats[1:], lons[1:]) if len(lats) > 1 else np.zeros(0)
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    if cum[-1] <= 0:
        return lats[:1], lons[:1]
    at = np.append(np.arange(0.0, cum[-1], step), cum[-1])
    return np.interp(at, cum, lats), np.interp(at, cum, lons)
