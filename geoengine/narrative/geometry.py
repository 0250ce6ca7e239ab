"""Vectorised geometry of the narrative layer: distances, bearings at edge ends, side of the road."""

from __future__ import annotations

import numpy as np

from geoengine import geo

EARTH_RADIUS_M = geo.EARTH_RADIUS_M

#: distance along an edge over which its begin / end bearing is measured (a chord, so that a short kink
#: right at a junction does not decide the direction of a turn)
HEADING_SAMPLE_M = 20.0

#: a point closer than this to the road is "on" it (no left/right side)
SIDE_TOLERANCE_M = 1.5


def segment_lengths(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Haversine length in metres of each segment of a polyline (n - 1 values)."""
    return geo.segment_lengths_m(lat, lon)


def bearings(lon0, lat0, lon1, lat1) -> np.ndarray:
    """Initial great-circle bearing in degrees [0, 360) from points 0 to points 1 (arrays broadcast)."""
    return geo.bearing_deg(lat0, lon0, lat1, lon1)


def edge_bearings(lon, lat, begin, end, sample_m: float = HEADING_SAMPLE_M) -> tuple[np.ndarray, np.ndarray]:
    """(bearing leaving the start of each edge, bearing arriving at its end), degrees; NaN for an edge of
    zero length. Each is the chord to / from the shape point `sample_m` metres along the edge (or the
    edge's far end when it is shorter)."""
    begin = np.asarray(begin, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    cum = np.concatenate(([0.0], np.cumsum(segment_lengths(lon, lat))))
    # start bearing: from shape[begin] to the first point at least sample_m along (not past end)
    j = np.searchsorted(cum, cum[begin] + sample_m, side="left")
    j = np.minimum(np.maximum(j, begin + 1), end)
    # end bearing: from the last point at least sample_m before the end (not before begin) to shape[end]
    k = np.searchsorted(cum, cum[end] - sample_m, side="right") - 1
    k = np.maximum(np.minimum(k, end - 1), begin)
    b_start = bearings(lon[begin], lat[begin], lon[j], lat[j])
    b_end = bearings(lon[k], lat[k], lon[end], lat[end])
    zero = (end <= begin) | (cum[end] - cum[begin] <= 0.0)
    b_start = np.where(zero, np.nan, b_start)
    b_end = np.where(zero, np.nan, b_end)
    return b_start, b_end


def fill_nan_forward(a: np.ndarray, fallback: float = 0.0) -> np.ndarray:
    """Replace NaNs by the last valid value before them (then the first valid one, then `fallback`)."""
    a = np.asarray(a, dtype=np.float64).copy()
    valid = ~np.isnan(a)
    if not valid.any():
        a[:] = fallback
        return a
    idx = np.where(valid, np.arange(a.size), 0)
    np.maximum.accumulate(idx, out=idx)
    out = a[idx]
    first = np.flatnonzero(valid)[0]
    out[:first] = a[first]
    return out


def turn_angles(bearing_in: np.ndarray, bearing_out: np.ndarray) -> np.ndarray:
    """Clockwise turn in degrees [0, 360): 0 straight, 90 right, 180 U-turn, 270 left."""
    return (np.asarray(bearing_out) - np.asarray(bearing_in)) % 360.0


def side_of_point(plon: float, plat: float, lon: np.ndarray, lat: np.ndarray,
                  tolerance_m: float = SIDE_TOLERANCE_M) -> str | None:
    """Side ("left"/"right") of a point relative to a polyline travelled in its point order, from the
    nearest segment; None when the point lies on the line (within `tolerance_m`) or the line is degenerate."""
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    if lon.size < 2:
        return None
    # local equirectangular metres around the point
    kx = np.radians(1.0) * EARTH_RADIUS_M * np.cos(np.radians(plat))
    ky = np.radians(1.0) * EARTH_RADIUS_M
    x = (lon - plon) * kx
    y = (lat - plat) * ky
    ax, ay, bx, by = x[:-1], y[:-1], x[1:], y[1:]
    dx, dy = bx - ax, by - ay
    seg2 = dx * dx + dy * dy
    ok = seg2 > 0
    if not ok.any():
        return None
    t = np.where(ok, np.clip(-(ax * dx + ay * dy) / np.where(ok, seg2, 1.0), 0.0, 1.0), 0.0)
    cx, cy = ax + t * dx, ay + t * dy
    d2 = np.where(ok, cx * cx + cy * cy, np.inf)
    i = int(np.argmin(d2))
    if d2[i] <= tolerance_m * tolerance_m:
        return None
    # cross product of the segment direction with the vector from the segment start to the point (origin)
    cross = dx[i] * (0.0 - ay[i]) - dy[i] * (0.0 - ax[i])
    if cross == 0:
        return None
    return "left" if cross > 0 else "right"
