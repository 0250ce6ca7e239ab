"""avoid_locations and avoid_polygons: the road edges a request must not use.

A shapely STRtree over every segment of the graph (built once per graph, vectorised) answers which
segments lie within `radius` metres of an avoided point (radius 0: the nearest segment) or cross an
avoided polygon; both directions of those segments are blocked.
"""

from __future__ import annotations

import threading

import numpy as np
import shapely

from geoengine.errors import FieldError, InvalidRequest

_M_PER_DEG = 111_320.0
_TREES: dict[int, tuple] = {}
_LOCK = threading.Lock()


def segment_tree(graph):
    key = id(graph)
    with _LOCK:
        hit = _TREES.get(key)
        if hit is None:
            so = np.asarray(graph.shape_offsets)
            counts = np.diff(so)
            idx = np.repeat(np.arange(len(counts)), counts)
            coords = np.column_stack([np.asarray(graph.shape_lon), np.asarray(graph.shape_lat)])
            lines = shapely.linestrings(coords, indices=idx)
            hit = (shapely.STRtree(lines), lines)
            _TREES[key] = hit
    return hit


def avoid_mask(graph, snapper, locations, polygons) -> np.ndarray:
    tree, _ = segment_tree(graph)
    blocked_segs: list[np.ndarray] = []
    for loc in locations:
        pt = shapely.Point(float(loc.lon), float(loc.lat))
        if loc.radius <= 0:
            blocked_segs.append(np.atleast_1d(tree.nearest(pt)))
            continue
        deg = float(loc.radius) / (_M_PER_DEG * max(np.cos(np.radians(float(loc.lat))), 1e-6))
        # an ellipse in degrees that is a circle of `radius` metres on the ground
        circle = shapely.affinity.scale(pt.buffer(deg, 16), 1.0, np.cos(np.radians(float(loc.lat))))
        blocked_segs.append(tree.query(circle, predicate="intersects"))
    for i, ring in enumerate(polygons):
        if len(ring) < 3:
            raise InvalidRequest(errors=[FieldError(f"avoid_polygons[{i}]", "a polygon needs at least 3 [lon, lat] points")])
        poly = shapely.Polygon(ring)
        if not poly.is_valid:
            poly = shapely.make_valid(poly)
        blocked_segs.append(tree.query(poly, predicate="intersects"))
    mask = np.zeros(graph.n_edges, dtype=bool)
    if blocked_segs:
        segs = np.concatenate(blocked_segs).astype(np.int64)
        mask[2 * segs] = True
        mask[2 * segs + 1] = True
    return mask
