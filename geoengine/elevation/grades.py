"""Climb, descent and grade of every road segment, from the DEM along the segment's shape.

Computed once at build time by the `elevation` stage when the bundle has a graph, stored per segment
in the segment's forward (way) direction, and put on a `Graph` as per-edge arrays by
`attach_grades`. The bicycle and pedestrian costings read them (`use_hills`), and route summaries add
up `climb_descent` over a path. See docs/elevation.md ("Grades on the road graph").

How a segment's profile is taken (all segments at once, vectorised, in chunks):

1. The shape is resampled at equal steps of at most `STEP_M` (30 m) along its length, so a 500 m
   straight segment with two shape points is 17 pieces rather than one height difference.
2. Heights are bilinear DEM samples (`ElevationModel.sample`). Samples without a height (voids,
   outside coverage) are filled by linear interpolation from the segment's valid samples; a segment
   with none has no climb, descent or grade.
3. Tunnels and bridges do not follow the ground: their heights are the straight line between the
   segment's end heights.
4. Light smoothing against SRTM noise: a moving average over `SMOOTH_M` (about 90 m: one SRTM3 cell,
   the window shrinking at the ends) of the interior samples; the two end samples keep their DEM
   height, so segments meeting at a junction agree on its height and climb minus descent along any
   path equals the height difference between its ends.
5. Per segment: `climb` = sum of the rises, `descent` = sum of the falls (metres, forward direction),
   and for each of the two the **climb-weighted mean grade** of its pieces,
   `g = sum(dh_i * g_i) / sum(dh_i) = sum(dh_i**2 / l_i) / climb`. Steep pieces weigh more than
   gentle ones, and a segment is equivalent to a flat part plus one uniform climb of length
   `climb / g` at grade `g` (and one uniform descent): for any speed factor of the form
   `1 / (1 + a g + b g**2)` that stand-in gives exactly the time of the piecewise profile.
"""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from geoengine.errors import BundleError
from geoengine.geo import haversine_m

STEP_M = 30.0  # longest resampling step along a segment
SMOOTH_M = 90.0  # width of the moving average (about one SRTM3 cell)
CHUNK_SEGMENTS = 200_000  # segments per vectorised batch (bounds the memory of huge graphs)
GRADE_FILES = ("seg_climb.npy", "seg_descent.npy", "seg_grade.npy")


def _fill_gaps(h: np.ndarray, seg: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """NaN samples replaced by linear interpolation (in sample index) between the nearest valid
    samples of the same segment, or the nearest one when only one side has any."""
    n = h.size
    valid = np.isfinite(h)
    if valid.all():
        return h
    idx = np.arange(n)
    prev = np.maximum.accumulate(np.where(valid, idx, -1))
    nxt = np.minimum.accumulate(np.where(valid, idx, n)[::-1])[::-1]
    has_prev = prev >= first[seg]
    has_next = nxt <= last[seg]
    p = np.clip(prev, 0, n - 1)
    q = np.clip(nxt, 0, n - 1)
    hp, hq = h[p], h[q]
    span = np.maximum(q - p, 1)
    both = has_prev & has_next
    out = h.copy()
    fill = ~valid
    out[fill & both] = (hp + (hq - hp) * (idx - p) / span)[fill & both]
    out[fill & has_prev & ~has_next] = hp[fill & has_prev & ~has_next]
    out[fill & ~has_prev & has_next] = hq[fill & ~has_prev & has_next]
    return out  # NaN left only in segments without any valid sample


def _chunk_profiles(graph, model, s0: int, s1: int, flat: np.ndarray | None):
    """(climb, descent, up-grade, down-grade, has_height) for segments s0..s1-1."""
    so = np.asarray(graph.shape_offsets[s0 : s1 + 1], dtype=np.int64)
    a, b = int(so[0]), int(so[-1])
    lon = np.asarray(graph.shape_lon[a:b], dtype=np.float64)
    lat = np.asarray(graph.shape_lat[a:b], dtype=np.float64)
    so = so - a
    nseg = s1 - s0
    d = haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]) if lon.size > 1 else np.zeros(0)
    if d.size:
        d[so[1:-1] - 1] = 0.0  # no piece from the last point of one segment to the first of the next
    cum = np.concatenate([[0.0], np.cumsum(d)])
    start = cum[so[:-1]]
    length = cum[so[1:] - 1] - start
    npieces = np.maximum(np.ceil(length / STEP_M).astype(np.int64), 1)
    nsamp = npieces + 1
    first = np.cumsum(nsamp) - nsamp
    last = first + nsamp - 1
    seg = np.repeat(np.arange(nseg), nsamp)
    local = np.arange(int(nsamp.sum())) - first[seg]
    frac = local / npieces[seg]
    x = start[seg] + length[seg] * frac
    # the shape piece holding each sample, kept inside the sample's own segment
    lo = so[:-1][seg]
    hi = np.maximum(so[1:][seg] - 2, lo)
    p = np.clip(np.searchsorted(cum, x, side="right") - 1, lo, hi)
    q = np.minimum(p + 1, so[1:][seg] - 1)
    dp = cum[q] - cum[p]
    t = np.where(dp > 0, np.clip((x - cum[p]) / np.where(dp > 0, dp, 1.0), 0.0, 1.0), 0.0)
    slon = lon[p] + t * (lon[q] - lon[p])
    slat = lat[p] + t * (lat[q] - lat[p])
    h, _ = model.sample(slat, slon)
    h = _fill_gaps(h, seg, first, last)
    has_height = np.isfinite(h[first])
    h = np.where(np.isfinite(h), h, 0.0)
    h_first, h_last = h[first], h[last]
    if flat is not None:
        straight = flat[s0:s1][seg]
        h = np.where(straight, h_first[seg] + (h_last - h_first)[seg] * frac, h)
    # moving average over about SMOOTH_M, within each segment; the end samples keep their height
    step = length / npieces
    half = np.rint(np.divide(0.5 * SMOOTH_M, step, out=np.zeros_like(step), where=step > 0)).astype(np.int64)[seg]
    if half.max(initial=0) > 0:
        csum = np.concatenate([[0.0], np.cumsum(h)])
        j = np.arange(h.size)
        lo_w = np.maximum(j - half, first[seg])
        hi_w = np.minimum(j + half, last[seg])
        h = (csum[hi_w + 1] - csum[lo_w]) / (hi_w - lo_w + 1)
        h[first] = h_first
        h[last] = h_last
    dh = np.diff(h)
    inner = seg[1:] == seg[:-1]
    dh_seg = seg[:-1][inner]
    dh = dh[inner]
    piece = (length / npieces)[dh_seg]
    up = np.maximum(dh, 0.0)
    down = np.maximum(-dh, 0.0)
    safe = np.where(piece > 0, piece, 1.0)
    climb = np.bincount(dh_seg, weights=up, minlength=nseg)
    descent = np.bincount(dh_seg, weights=down, minlength=nseg)
    up_sq = np.bincount(dh_seg, weights=np.where(piece > 0, up * up / safe, 0.0), minlength=nseg)
    down_sq = np.bincount(dh_seg, weights=np.where(piece > 0, down * down / safe, 0.0), minlength=nseg)
    grade_up = np.divide(up_sq, climb, out=np.zeros(nseg), where=climb > 1e-9)
    grade_down = np.divide(down_sq, descent, out=np.zeros(nseg), where=descent > 1e-9)
    climb[~has_height] = descent[~has_height] = 0.0
    grade_up[~has_height] = grade_down[~has_height] = 0.0
    return climb, descent, grade_up, grade_down, has_height


def segment_grades(graph, model, straight_flags: int | None = None) -> dict[str, np.ndarray]:
    """Per segment of `graph` (forward direction): `climb`, `descent` (metres, float32[S]), `grade`
    (float32[S, 2]: climb-weighted mean grade of the rising pieces, then of the falling pieces, both
    positive fractions, 0.1 = 10 %) and `has_height` (bool[S]). `straight_flags`: segment flag bits
    whose height runs straight between the ends (default tunnel | bridge)."""
    from geoengine.graph import tags as T

    if straight_flags is None:
        straight_flags = T.F_TUNNEL | T.F_BRIDGE
    S = graph.n_segments
    flat = (np.asarray(graph.seg_flags) & straight_flags) != 0 if straight_flags else None
    climb = np.zeros(S, dtype=np.float32)
    descent = np.zeros(S, dtype=np.float32)
    grade = np.zeros((S, 2), dtype=np.float32)
    has = np.zeros(S, dtype=bool)
    for s0 in range(0, S, CHUNK_SEGMENTS):
        s1 = min(S, s0 + CHUNK_SEGMENTS)
        c, dsc, gu, gd, hh = _chunk_profiles(graph, model, s0, s1, flat)
        climb[s0:s1], descent[s0:s1], grade[s0:s1, 0], grade[s0:s1, 1], has[s0:s1] = c, dsc, gu, gd, hh
    return {"climb": climb, "descent": descent, "grade": grade, "has_height": has}


def write_grades(stage_dir: Path, grades: dict[str, np.ndarray]) -> list[str]:
    """Save the arrays as `seg_climb.npy`, `seg_descent.npy`, `seg_grade.npy`; returns the names."""
    np.save(stage_dir / "seg_climb.npy", np.ascontiguousarray(grades["climb"], dtype=np.float32))
    np.save(stage_dir / "seg_descent.npy", np.ascontiguousarray(grades["descent"], dtype=np.float32))
    np.save(stage_dir / "seg_grade.npy", np.ascontiguousarray(grades["grade"], dtype=np.float32))
    return list(GRADE_FILES)


def _per_edge(forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """Interleave: edge 2k takes forward[k], edge 2k+1 backward[k]."""
    out = np.empty(2 * forward.shape[0], dtype=np.float32)
    out[0::2] = forward
    out[1::2] = backward
    out.flags.writeable = False
    return out


def attach_grades(graph, bundle_dir: str | Path) -> bool:
    """Put the bundle's segment grades on `graph` (from `<bundle_dir>/elevation/seg_*.npy`, memory-
    mapped) and set `graph.meta["grades"] = True`. Per directed edge e (float32[E], read-only):
    `edge_climb`, `edge_descent` (metres climbed and descended travelling e), `edge_up_grade`,
    `edge_down_grade` (climb-weighted mean grades of its rising and falling stretches). Edge 2k is the
    segment's forward direction; edge 2k+1 swaps climb with descent and up with down grade.
    Returns False (graph untouched) when the bundle has no grade files; raises BundleError when they
    do not match the graph."""
    folder = Path(bundle_dir) / "elevation"
    paths = [folder / name for name in GRADE_FILES]
    if not all(p.exists() for p in paths):
        return False
    climb, descent, grade = (np.load(p, mmap_mode="r") for p in paths)
    S = graph.n_segments
    if climb.shape != (S,) or descent.shape != (S,) or grade.shape != (S, 2):
        raise BundleError(
            f"the grades in {folder} ({climb.shape[0]:,} segments) do not match the graph ({S:,} segments): "
            "rebuild the bundle")
    graph.seg_climb, graph.seg_descent, graph.seg_grade = climb, descent, grade
    graph.edge_climb = _per_edge(climb, descent)
    graph.edge_descent = _per_edge(descent, climb)
    graph.edge_up_grade = _per_edge(grade[:, 0], grade[:, 1])
    graph.edge_down_grade = _per_edge(grade[:, 1], grade[:, 0])
    graph.meta["grades"] = True
    return True


def climb_descent(graph, edges, covered_fraction=1.0) -> tuple[float | None, float | None]:
    """Metres climbed and descended along a path of directed `edges`, each counted for the share of it
    travelled (`covered_fraction`: one number or one per edge, e.g. the partial first and last edges of
    a route; the climb of a partly travelled edge is taken as spread evenly along it). (None, None) when
    the graph carries no grades."""
    if not graph.meta.get("grades") or getattr(graph, "edge_climb", None) is None:
        return None, None
    e = np.asarray(edges, dtype=np.int64)
    if e.size == 0:
        return 0.0, 0.0
    cov = np.asarray(covered_fraction, dtype=np.float64)
    if cov.shape != e.shape:  # one fraction for every edge (a route's legs pass one per edge)
        cov = np.ascontiguousarray(np.broadcast_to(cov, e.shape))
    climb, descent = path_climb(graph.edge_climb, graph.edge_descent, e, cov)
    return float(climb), float(descent)


@numba.njit(cache=True, nogil=True)
def path_climb(edge_climb, edge_descent, edges, covered):
    """(climb, descent) of directed `edges`, each counted for its `covered` share: sums in path order
    (the plain-route kernel adds up the same way, so both give the same numbers)."""
    climb = 0.0
    descent = 0.0
    for i in range(edges.shape[0]):
        climb += np.float64(edge_climb[edges[i]]) * covered[i]
        descent += np.float64(edge_descent[edges[i]]) * covered[i]
    return climb, descent
