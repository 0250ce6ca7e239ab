"""Small hand-made paths (local metres around Andorra la Vella) for maneuver cases."""

from __future__ import annotations

import math

import numpy as np

from geoengine.narrative import PathInfo, RoadClass

LON0, LAT0 = 1.52, 42.51
M_PER_DEG_LAT = 111_132.0
M_PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT0))


def to_lonlat(x: float, y: float) -> tuple[float, float]:
    return LON0 + x / M_PER_DEG_LON, LAT0 + y / M_PER_DEG_LAT


def heading_step(x, y, bearing_deg, dist):
    b = math.radians(bearing_deg)
    return x + dist * math.sin(b), y + dist * math.cos(b)


def edge(bearing=None, length=200.0, *, pts=None, name="", ref="", cls=RoadClass.RESIDENTIAL, link=False, rb=False,
         ferry=False, degree=3, speed=10.0):
    """One edge: straight `length` metres on `bearing`, or through the relative points `pts` [(dx, dy)]."""
    return dict(bearing=bearing, length=length, pts=pts, name=name, ref=ref, cls=int(cls), link=link, rb=rb,
                ferry=ferry, degree=degree, speed=speed)


def make_path(edges: list[dict], **kw) -> PathInfo:
    x, y = 0.0, 0.0
    xs, ys = [x], [y]
    sb, se, lengths = [], [], []
    for e in edges:
        sb.append(len(xs) - 1)
        if e["pts"] is not None:
            seg = e["pts"]
        else:
            seg = [heading_step(0.0, 0.0, e["bearing"], e["length"])]
        total = 0.0
        px, py = x, y
        for dx, dy in seg:
            nx, ny = x + dx, y + dy
            total += math.hypot(nx - px, ny - py)
            xs.append(nx)
            ys.append(ny)
            px, py = nx, ny
        x, y = px, py
        se.append(len(xs) - 1)
        lengths.append(total)
    lon, lat = zip(*(to_lonlat(a, b) for a, b in zip(xs, ys, strict=True)), strict=True)
    lengths = np.array(lengths)
    return PathInfo(
        lon=np.array(lon), lat=np.array(lat), shape_begin=sb, shape_end=se, length_m=lengths,
        time_s=lengths / np.array([e["speed"] for e in edges]), name=[e["name"] for e in edges],
        ref=[e["ref"] for e in edges], road_class=[e["cls"] for e in edges], is_roundabout=[e["rb"] for e in edges],
        is_ferry=[e["ferry"] for e in edges], is_link=[e["link"] for e in edges],
        node_degree=[e["degree"] for e in edges], **kw)


def arc(radius, start_deg, end_deg, steps=6, clockwise=False):
    """Points along a circle arc as deltas from the arc's start point; angles are positions on the circle
    (bearing from its centre); counterclockwise (right-hand traffic roundabouts) unless `clockwise`."""
    pts = []
    sx = radius * math.sin(math.radians(start_deg))
    sy = radius * math.cos(math.radians(start_deg))
    span = (end_deg - start_deg) % 360 if clockwise else -((start_deg - end_deg) % 360)
    for k in range(1, steps + 1):
        a = math.radians(start_deg + span * k / steps)
        pts.append((radius * math.sin(a) - sx, radius * math.cos(a) - sy))
    return pts
