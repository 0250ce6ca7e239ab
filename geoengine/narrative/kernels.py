"""Compiled passes of the narrative: the per-edge and per-junction work of `build_maneuvers` in three
kernels, so that Python only visits the maneuvers (a few per route), never the edges.

`leg_inputs` gathers what they read of one leg from the graph's and the profile's arrays; `maneuver_table`
chains them for one leg:

1. `haversine_sines`: per shape segment, the square root of the haversine term (`geo.haversine_m` up to
   its arcsine);
2. `chord_vectors`: the segment lengths (2R times the arcsine), their running sum, and per edge the
   (y, x) vectors of the chords over `HEADING_SAMPLE_M` at its start and its end, as `geo.bearing_deg`
   forms them before its arctangent;
3. `maneuver_rows`: bearings, turn angles and classes, the candidate junctions, the maneuvers, the short
   name changes folded, sides of the road, lengths, times and costs: one row per maneuver.

The arcsine and the arctangent between the kernels are numpy's own ufuncs on arrays of the same lengths
as `geometry.edge_bearings` gives them: numpy's vectorised `arcsin` / `arctan2` may differ from the C
library's in the last bit, and this keeps every bearing (so every rounded bearing and turn class) exactly
what the numpy formulation computed. Everything else is the same IEEE arithmetic in the same order.
"""

from __future__ import annotations

import numba
import numpy as np

from geoengine import geo
from geoengine.graph import tags as T

from .geometry import HEADING_SAMPLE_M, SIDE_TOLERANCE_M

__all__ = ["leg_inputs", "haversine_sines", "chord_vectors", "maneuver_rows", "maneuver_table", "INT_COLUMNS", "FLOAT_COLUMNS",
           "NO_SIDE", "LEFT", "RIGHT", "UNKNOWN_SIDE", "STOP_KIND_CODES", "SHORT_NAME_M",
           "EDGE_INT_ROWS", "EDGE_FLOAT_ROWS", "STOP_COLUMNS"]

_R = geo.EARTH_RADIUS_M
_TWO_R = 2.0 * geo.EARTH_RADIUS_M

# side codes (PathInfo / Maneuver `side`): None, "left", "right"; UNKNOWN_SIDE: compute it from the point
NO_SIDE, LEFT, RIGHT, UNKNOWN_SIDE = 0, 1, 2, -1
#: stop kind codes: the index in path.STOP_KINDS
STOP_KIND_CODES = {"via": 0, "through": 1, "break": 2, "break_through": 3}
_THROUGH, _BREAK, _BREAK_THROUGH = 1, 2, 3

#: columns of the int64 rows `maneuver_rows` returns (name ids index the caller's string table, 0 = none)
INT_COLUMNS = ("type", "name1", "name2", "begin_shape_index", "end_shape_index", "bearing_before", "bearing_after",
               "begin_edge", "end_edge", "roundabout_exit_count", "exit1", "exit2", "prev1", "prev2", "side",
               "stop_index", "stop_kind")
FLOAT_COLUMNS = ("length_m", "time_s", "cost")
#: rows of the per-edge arrays `maneuver_rows` reads: int64 `edge_i` (flags 0/1) and float64 `edge_f`
EDGE_INT_ROWS = ("shape_begin", "shape_end", "road_class", "is_roundabout", "is_ferry", "is_link", "node_degree",
                 "key", "name1", "name2")
EDGE_FLOAT_ROWS = ("length_m", "time_s", "cost")
_SBEGIN, _SEND, _CLASS, _RB, _FERRY, _LINK, _DEGREE, _KEY, _NAME1, _NAME2 = range(len(EDGE_INT_ROWS))
#: columns of `stops_i` (rows: origin, destination, then the stops; edge, kind and index unused for the first
#: two); `stops_f` has the columns lon, lat
STOP_COLUMNS = ("edge", "kind", "side", "index", "has_point")
(_TYPE, _N1, _N2, _BSHAPE, _ESHAPE, _BB, _BA, _BEDGE, _EEDGE, _RBC, _X1, _X2, _P1, _P2, _SIDE, _SIDX,
 _SKIND) = range(len(INT_COLUMNS))
_NCOL = len(INT_COLUMNS)

# ManeuverType codes (maneuvers.ManeuverType)
_START, _START_RIGHT, _START_LEFT = 1, 2, 3
_DEST, _DEST_RIGHT, _DEST_LEFT = 4, 5, 6
_BECOMES, _CONTINUE = 7, 8
_SLIGHT_RIGHT, _RIGHT, _SHARP_RIGHT, _UTURN_RIGHT, _UTURN_LEFT, _SHARP_LEFT, _LEFT, _SLIGHT_LEFT = range(9, 17)
_RAMP_STRAIGHT, _RAMP_RIGHT, _RAMP_LEFT, _EXIT_RIGHT, _EXIT_LEFT = 17, 18, 19, 20, 21
_STAY_STRAIGHT, _STAY_RIGHT, _STAY_LEFT, _MERGE = 22, 23, 24, 25
_RB_ENTER, _RB_EXIT, _FERRY_ENTER, _FERRY_EXIT = 26, 27, 28, 29
_MERGE_RIGHT, _MERGE_LEFT, _VIA = 37, 38, 44

# maneuvers.Turn codes
_STRAIGHT, _T_SLIGHT_RIGHT, _T_RIGHT, _T_SHARP_RIGHT, _REVERSE, _T_SHARP_LEFT, _T_LEFT, _T_SLIGHT_LEFT = range(8)
#: Turn -> ManeuverType of a plain turn at a junction (-1: none)
_TURN_TYPE = np.array([-1, _SLIGHT_RIGHT, _RIGHT, _SHARP_RIGHT, -1, _SHARP_LEFT, _LEFT, _SLIGHT_LEFT], np.int64)

#: a plain bend (node degree <= 2) is a U-turn only when the route really reverses on itself
_REVERSAL_TOLERANCE_DEG = 2.0
#: another branch within this many degrees of straight ahead makes a junction a fork
_FORK_BRANCH_DEG = 60.0
#: ... when it also leaves within this many degrees of the branch taken
_FORK_SPREAD_DEG = 40.0
#: a street name held for less than this between two name-only changes is not announced
SHORT_NAME_M = 60.0
_MOTORWAY, _TRUNK = 0, 1


@numba.njit(cache=True, nogil=True)
def _clip01(v):
    """np.clip(v, 0.0, 1.0) of one value."""
    v = v if v > 0.0 else 0.0
    return v if v < 1.0 else 1.0


@numba.njit(cache=True, nogil=True)
def haversine_sines(lon, lat):
    """Per segment of the polyline: sqrt(clip(a, 0, 1)) of the haversine term, computed as
    `geo.haversine_m` does; 2R * np.arcsin of it is the segment's length."""
    n = lon.shape[0] - 1
    out = np.empty(max(n, 0))
    if n <= 0:
        return out
    lat1 = np.radians(lat[0])
    lon1 = np.radians(lon[0])
    cos1 = np.cos(lat1)
    for i in range(n):  # a point's radians and cosine serve both its segments (the same values)
        lat2 = np.radians(lat[i + 1])
        lon2 = np.radians(lon[i + 1])
        cos2 = np.cos(lat2)
        s_dlat = np.sin((lat2 - lat1) * 0.5)
        s_dlon = np.sin((lon2 - lon1) * 0.5)
        a = s_dlat * s_dlat + cos1 * cos2 * s_dlon * s_dlon
        out[i] = np.sqrt(_clip01(a))
        lat1, lon1, cos1 = lat2, lon2, cos2
    return out


@numba.njit(cache=True, nogil=True)
def _chord(lon, lat, p, q, ys, xs, i):
    """(y, x) of `geo.bearing_deg` from shape point p to q, into ys[i], xs[i]."""
    phi1 = np.radians(lat[p])
    phi2 = np.radians(lat[q])
    dlon = np.radians(lon[q] - lon[p])
    ys[i] = np.sin(dlon) * np.cos(phi2)
    xs[i] = np.cos(phi1) * np.sin(phi2) - np.sin(phi1) * np.cos(phi2) * np.cos(dlon)


@numba.njit(cache=True, nogil=True)
def chord_vectors(lon, lat, arcsines, edge_i, sample_m):
    """`geometry.edge_bearings` up to the arctangent: the chords leaving the start of each edge (to the
    first shape point at least `sample_m` along, not past its end) and arriving at its end (from the last
    point at least `sample_m` before it, not before its start), as rows (y, x) start, (y, x) end of one
    array; and whether the edge has zero length (its bearings are NaN). `arcsines`: np.arcsin of
    `haversine_sines(lon, lat)`; `edge_i`: the `EDGE_INT_ROWS` of the edges."""
    begin, end = edge_i[_SBEGIN], edge_i[_SEND]
    npts = lon.shape[0]
    cum = np.empty(npts)
    cum[0] = 0.0
    acc = 0.0
    for s in range(npts - 1):
        acc = acc + _TWO_R * arcsines[s]
        cum[s + 1] = acc
    n = begin.shape[0]
    vec = np.empty((4, n))
    ys, xs, ye, xe = vec[0], vec[1], vec[2], vec[3]
    zero = np.empty(n, np.bool_)
    for i in range(n):
        b, e = begin[i], end[i]
        j = np.searchsorted(cum, cum[b] + sample_m, side="left")
        j = min(max(j, b + 1), e)
        k = np.searchsorted(cum, cum[e] - sample_m, side="right") - 1
        k = max(min(k, e - 1), b)
        _chord(lon, lat, b, j, ys, xs, i)
        _chord(lon, lat, k, e, ye, xe, i)
        zero[i] = (e <= b) or (cum[e] - cum[b] <= 0.0)
    return vec, zero


@numba.njit(cache=True, nogil=True)
def _bearings(atan, zero):
    """`geo.bearing_deg` after its arctangent, NaN where the edge has zero length."""
    n = atan.shape[0]
    out = np.empty(n)
    for i in range(n):
        if zero[i]:
            out[i] = np.nan
        else:
            deg = np.degrees(atan[i])
            out[i] = ((deg + 360.0) % 360.0) % 360.0
    return out


@numba.njit(cache=True, nogil=True)
def _fill_forward(a, reverse):
    """`geometry.fill_nan_forward(a)` (fallback 0.0); with `reverse`, of a[::-1], reversed back."""
    n = a.shape[0]
    out = np.empty(n)
    first = -1
    for t in range(n):
        i = n - 1 - t if reverse else t
        if not np.isnan(a[i]):
            first = i
            break
    if first < 0:
        out[:] = 0.0
        return out
    last = a[first]
    for t in range(n):
        i = n - 1 - t if reverse else t
        if not np.isnan(a[i]):
            last = a[i]
        out[i] = last
    return out


@numba.njit(cache=True, nogil=True)
def _turn_class(angle):
    """`maneuvers.classify_turn`."""
    a = angle % 360.0
    if a < 11 or a > 349:
        return _STRAIGHT
    if a < 45:
        return _T_SLIGHT_RIGHT
    if a < 136:
        return _T_RIGHT
    if a < 160:
        return _T_SHARP_RIGHT
    if a <= 200:
        return _REVERSE
    if a <= 224:
        return _T_SHARP_LEFT
    if a <= 315:
        return _T_LEFT
    return _T_SLIGHT_LEFT


@numba.njit(cache=True, nogil=True)
def _signed(a):
    return ((a + 180.0) % 360.0) - 180.0


@numba.njit(cache=True, nogil=True)
def _round_bearing(b):
    """int(round(b)) % 360 (round half to even, as Python's round)."""
    return np.int64(np.rint(b)) % 360


@numba.njit(cache=True, nogil=True)
def side_code(plon, plat, lon, lat, b, e):
    """`geometry.side_of_point(plon, plat, lon[b:e + 1], lat[b:e + 1])` as NO_SIDE / LEFT / RIGHT."""
    m = e + 1 - b
    if m < 2:
        return NO_SIDE
    kx = np.radians(1.0) * _R * np.cos(np.radians(plat))
    ky = np.radians(1.0) * _R
    best = np.inf
    bi = -1
    any_ok = False
    for s in range(b, e):
        ax = (lon[s] - plon) * kx
        ay = (lat[s] - plat) * ky
        dx = (lon[s + 1] - plon) * kx - ax
        dy = (lat[s + 1] - plat) * ky - ay
        seg2 = dx * dx + dy * dy
        if seg2 > 0:
            any_ok = True
            t = _clip01(-(ax * dx + ay * dy) / seg2)
            cx = ax + t * dx
            cy = ay + t * dy
            d2 = cx * cx + cy * cy
        else:
            d2 = np.inf
        if d2 < best or bi < 0:
            best = d2
            bi = s
    if not any_ok:
        return NO_SIDE
    tol = SIDE_TOLERANCE_M * SIDE_TOLERANCE_M
    if best <= tol:
        return NO_SIDE
    ax = (lon[bi] - plon) * kx
    ay = (lat[bi] - plat) * ky
    dx = (lon[bi + 1] - plon) * kx - ax
    dy = (lat[bi + 1] - plat) * ky - ay
    cross = dx * (0.0 - ay) - dy * (0.0 - ax)
    if cross == 0:
        return NO_SIDE
    return LEFT if cross > 0 else RIGHT


@numba.njit(cache=True, nogil=True)
def _fork_side(angle, other_val, lo, hi, bearing_in):
    """`maneuvers._fork_side`: 0 no fork, 1 right, 2 left, 3 straight."""
    if hi <= lo:
        return 0
    ours = _signed(angle)
    count = 0
    above = 0
    below = 0
    for t in range(lo, hi):
        a = _signed(other_val[t] - bearing_in)
        if abs(a) <= _FORK_BRANCH_DEG and abs(a - ours) <= _FORK_SPREAD_DEG:
            count += 1
            if ours > a:
                above += 1
            if ours < a:
                below += 1
    if count == 0 or abs(ours) > _FORK_BRANCH_DEG:
        return 0
    if above == count:
        return 1
    if below == count:
        return 2
    return 3


@numba.njit(cache=True, nogil=True)
def _open(rows, r, mtype, i, name1, name2, shape_begin, bin_, bout):
    """`build_maneuvers.new`: row r opens at the start of edge i."""
    rows[r, :] = 0
    rows[r, _TYPE] = mtype
    rows[r, _N1] = name1[i]
    rows[r, _N2] = name2[i]
    rows[r, _BSHAPE] = shape_begin[i]
    rows[r, _ESHAPE] = shape_begin[i]
    rows[r, _BB] = _round_bearing(bin_[i - 1]) if i > 0 else 0
    rows[r, _BA] = _round_bearing(bout[i])
    rows[r, _BEDGE] = i
    rows[r, _EEDGE] = i
    rows[r, _RBC] = -1
    rows[r, _SIDX] = -1
    rows[r, _SKIND] = -1


@numba.njit(cache=True, nogil=True)
def _close(rows, vals, r, end_edge, cumlen, cumtime, shape_end):
    """`build_maneuvers.close`: row r ends before edge `end_edge`."""
    b = rows[r, _BEDGE]
    rows[r, _EEDGE] = end_edge
    vals[r, 0] = cumlen[end_edge] - cumlen[b]
    vals[r, 1] = cumtime[end_edge] - cumtime[b]
    rows[r, _ESHAPE] = shape_end[end_edge - 1]


@numba.njit(cache=True, nogil=True)
def _point(rows, vals, r, mtype, edge, name1, name2, shape_end, bin_, side, stop_index, stop_kind):
    """`build_maneuvers.point`: a zero-length row at the end of `edge`."""
    rows[r, :] = 0
    s = shape_end[edge]
    rows[r, _TYPE] = mtype
    rows[r, _N1] = name1[edge]
    rows[r, _N2] = name2[edge]
    rows[r, _BSHAPE] = s
    rows[r, _ESHAPE] = s
    rows[r, _BB] = _round_bearing(bin_[edge])
    rows[r, _BEDGE] = edge + 1
    rows[r, _EEDGE] = edge + 1
    rows[r, _RBC] = -1
    rows[r, _SIDE] = side
    rows[r, _SIDX] = stop_index
    rows[r, _SKIND] = stop_kind
    vals[r, 0] = 0.0
    vals[r, 1] = 0.0


@numba.njit(cache=True, nogil=True)
def _side_of(code, has_point, plon, plat, lon, lat, b, e):
    if code != UNKNOWN_SIDE:
        return code
    if not has_point:
        return NO_SIDE
    return side_code(plon, plat, lon, lat, b, e)


@numba.njit(cache=True, nogil=True)
def _is_name_only(t):
    return t == _BECOMES or t == _CONTINUE


@numba.njit(cache=True, nogil=True)
def _is_stop(t):
    return t == _VIA or t == _DEST or t == _DEST_LEFT or t == _DEST_RIGHT


@numba.njit(cache=True, nogil=True)
def maneuver_rows(atan_start, atan_end, zero, lon, lat, edge_f, edge_i, stops_i, stops_f, other_off, other_val,
                  has_other):
    """The maneuvers of one leg as rows (`INT_COLUMNS` int64, `FLOAT_COLUMNS` float64), exactly as
    `build_maneuvers` made them before it was compiled (see maneuvers.py for the rules).

    Per edge: `edge_f` rows `EDGE_FLOAT_ROWS` (`cost` is summed per maneuver into the third float column)
    and `edge_i` rows `EDGE_INT_ROWS`, where `key` (the name, else the ref) and `name1`, `name2` (the
    street names: name then ref, without repeats) are ids of stripped strings, 0 for none, equal ids for
    equal strings. `stops_i` rows `STOP_COLUMNS` and `stops_f` rows (lon, lat): the origin, the
    destination, then the stops in `PathInfo.stops` order (side code UNKNOWN_SIDE: from the point when it
    has one). `other_off`, `other_val`: `PathInfo.other_bearings` as offsets and values (used when
    `has_other`)."""
    shape_begin, shape_end = edge_i[_SBEGIN], edge_i[_SEND]
    road_class, is_roundabout, is_ferry, is_link = edge_i[_CLASS], edge_i[_RB], edge_i[_FERRY], edge_i[_LINK]
    node_degree, key, name1, name2 = edge_i[_DEGREE], edge_i[_KEY], edge_i[_NAME1], edge_i[_NAME2]
    length_m, time_s, cost = edge_f[0], edge_f[1], edge_f[2]
    stop_edge, stop_kind, stop_side = stops_i[2:, 0], stops_i[2:, 1], stops_i[2:, 2]
    stop_index, stop_has_point = stops_i[2:, 3], stops_i[2:, 4]
    stop_lon, stop_lat = stops_f[2:, 0], stops_f[2:, 1]
    end_sides, end_has_point, end_lon, end_lat = stops_i[:2, 2], stops_i[:2, 4], stops_f[:2, 0], stops_f[:2, 1]
    n = shape_begin.shape[0]
    b_start = _bearings(atan_start, zero)
    b_end = _bearings(atan_end, zero)
    bin_ = _fill_forward(b_end, False)     # arriving at the end of edge i
    bout = _fill_forward(b_start, True)    # leaving the start of edge i
    cumlen = np.empty(n + 1)
    cumtime = np.empty(n + 1)
    cumcost = np.empty(n + 1)
    cumlen[0] = cumtime[0] = cumcost[0] = 0.0
    for i in range(n):
        cumlen[i + 1] = cumlen[i] + length_m[i]
        cumtime[i + 1] = cumtime[i] + time_s[i]
        cumcost[i + 1] = cumcost[i] + cost[i]
    # the stops that make maneuvers (not `through`, not at the end), by the edge they end
    n_stops = stop_edge.shape[0]
    stop_here = np.zeros(n, np.bool_)
    sides = np.zeros(n_stops, np.int64)
    for s in range(n_stops):
        e = stop_edge[s]
        if e < n - 1 and stop_kind[s] != _THROUGH:
            stop_here[e] = True
            sides[s] = _side_of(stop_side[s], stop_has_point[s], stop_lon[s], stop_lat[s], lon, lat,
                                shape_begin[e], shape_end[e])
    origin_side = _side_of(end_sides[0], end_has_point[0], end_lon[0], end_lat[0], lon, lat,
                           shape_begin[0], shape_end[0])
    dest_side = _side_of(end_sides[1], end_has_point[1], end_lon[1], end_lat[1], lon, lat,
                         shape_begin[n - 1], shape_end[n - 1])

    cap = n + n_stops + 2
    rows = np.zeros((cap, _NCOL), np.int64)
    vals = np.zeros((cap, 3))
    # `cur`: the row of build_maneuvers' `cur` (open, or closed just before a stop's rows); `nxt`: the
    # next free row
    cur = 0
    start_type = _START_RIGHT if origin_side == RIGHT else _START_LEFT if origin_side == LEFT else _START
    _open(rows, cur, start_type, 0, name1, name2, shape_begin, bin_, bout)
    rows[cur, _SIDE] = origin_side
    nxt = 1
    rb_exits = 0
    for i in range(1, n):
        p = i - 1
        angle = (bout[i] - bin_[p]) % 360.0
        turn = _turn_class(angle)
        rb_p, rb_i = is_roundabout[p], is_roundabout[i]
        fe_p, fe_i = is_ferry[p], is_ferry[i]
        ln_p, ln_i = is_link[p], is_link[i]
        deg = node_degree[i]
        # junctions where nothing can happen are skipped (the candidates of build_maneuvers)
        if not (key[i] != key[p] or rb_i != rb_p or fe_i != fe_p or ln_i != ln_p
                or (deg >= 3 and turn != _STRAIGHT) or turn == _REVERSE or (rb_i and rb_p and deg >= 3)
                or (has_other and deg >= 3) or stop_here[p]):
            continue
        forced = False
        if stop_here[p]:
            _close(rows, vals, cur, i, cumlen, cumtime, shape_end)
            is_break = False
            for s in range(n_stops):
                if stop_edge[s] != p or stop_kind[s] == _THROUGH:
                    continue
                if stop_kind[s] == _BREAK or stop_kind[s] == _BREAK_THROUGH:
                    is_break = True
                    mt = _DEST_RIGHT if sides[s] == RIGHT else _DEST_LEFT if sides[s] == LEFT else _DEST
                else:
                    mt = _VIA
                _point(rows, vals, nxt, mt, p, name1, name2, shape_end, bin_, sides[s], stop_index[s], stop_kind[s])
                nxt += 1
            if is_break:
                cur = nxt
                nxt += 1
                _open(rows, cur, _START, i, name1, name2, shape_begin, bin_, bout)
                rows[cur, _BB] = 0
                rb_exits = 0
                continue
            forced = True
        mtype = -1
        prev_names = False
        if rb_i and not rb_p:
            mtype = _RB_ENTER
            rb_exits = 0
        elif rb_i and rb_p:
            if deg >= 3:
                rb_exits += 1
        elif rb_p:
            if rows[cur, _TYPE] == _RB_ENTER:
                rows[cur, _RBC] = rb_exits + 1
                rows[cur, _X1] = name1[i]
                rows[cur, _X2] = name2[i]
            mtype = _RB_EXIT
        elif fe_i and not fe_p:
            mtype = _FERRY_ENTER
        elif fe_p and not fe_i:
            mtype = _FERRY_EXIT
        elif fe_i and fe_p:
            pass
        elif ln_i and not ln_p and (road_class[p] == _MOTORWAY or road_class[p] == _TRUNK):
            mtype = _EXIT_LEFT if _signed(angle) < 0 else _EXIT_RIGHT
        elif ln_i and not ln_p and (road_class[i] == _MOTORWAY or road_class[i] == _TRUNK):
            mtype = (_RAMP_STRAIGHT if turn == _STRAIGHT
                     else _RAMP_LEFT if _signed(angle) < 0 else _RAMP_RIGHT)
        elif ln_p and not ln_i and (road_class[i] == _MOTORWAY or road_class[i] == _TRUNK):
            sa = _signed(angle)
            mtype = _MERGE_LEFT if sa < -5 else _MERGE_RIGHT if sa > 5 else _MERGE
        else:
            same = key[i] == key[p]
            fork = 0
            if (turn == _STRAIGHT or turn == _T_SLIGHT_LEFT or turn == _T_SLIGHT_RIGHT) and deg >= 3:
                if has_other:
                    fork = _fork_side(angle, other_val, other_off[i], other_off[i + 1], bin_[p])
                elif turn != _STRAIGHT:
                    hw_i = is_link[i] or road_class[i] == _MOTORWAY or road_class[i] == _TRUNK
                    hw_p = is_link[p] or road_class[p] == _MOTORWAY or road_class[p] == _TRUNK
                    if hw_i or hw_p:
                        fork = 1 if turn == _T_SLIGHT_RIGHT else 2
            if fork == 1:
                mtype = _STAY_RIGHT
            elif fork == 2:
                mtype = _STAY_LEFT
            elif fork == 3:
                mtype = _STAY_STRAIGHT
            elif turn == _REVERSE:
                if deg >= 3 or abs(angle - 180.0) <= _REVERSAL_TOLERANCE_DEG:
                    mtype = _UTURN_LEFT if angle >= 180.0 else _UTURN_RIGHT
                elif not same:
                    mtype = _BECOMES
            elif (turn == _STRAIGHT or ((turn == _T_SLIGHT_LEFT or turn == _T_SLIGHT_RIGHT) and same)
                  or deg <= 2):
                if not same:
                    mtype = _CONTINUE if deg >= 3 else _BECOMES
            else:
                mtype = _TURN_TYPE[turn]
            prev_names = mtype == _BECOMES
        if mtype < 0 and forced:
            mtype = _CONTINUE
        if mtype >= 0:
            if not forced:
                _close(rows, vals, cur, i, cumlen, cumtime, shape_end)
            cur = nxt
            nxt += 1
            _open(rows, cur, mtype, i, name1, name2, shape_begin, bin_, bout)
            if prev_names:
                rows[cur, _P1] = name1[p]
                rows[cur, _P2] = name2[p]
    _close(rows, vals, cur, n, cumlen, cumtime, shape_end)
    m = nxt

    # `_collapse_short_name_changes`, in place: rows[:o] are the kept ones
    o = 0
    k = 0
    while k < m:
        if (o > 0 and not _is_stop(rows[o - 1, _TYPE]) and _is_name_only(rows[k, _TYPE])
                and vals[k, 0] < SHORT_NAME_M and k + 1 < m and _is_name_only(rows[k + 1, _TYPE])):
            q = o - 1
            nx = k + 1
            if rows[nx, _N1] == rows[q, _N1] and rows[nx, _N2] == rows[q, _N2]:
                for src in (k, nx):  # _absorb(prev, m), _absorb(prev, nxt)
                    rows[q, _EEDGE] = rows[src, _EEDGE]
                    rows[q, _ESHAPE] = rows[src, _ESHAPE]
                    vals[q, 0] = vals[q, 0] + vals[src, 0]
                    vals[q, 1] = vals[q, 1] + vals[src, 1]
                k += 2
                continue
            # _prepend(nxt, m)
            rows[nx, _BEDGE] = rows[k, _BEDGE]
            rows[nx, _BSHAPE] = rows[k, _BSHAPE]
            rows[nx, _BB] = rows[k, _BB]
            vals[nx, 0] = vals[nx, 0] + vals[k, 0]
            vals[nx, 1] = vals[nx, 1] + vals[k, 1]
            if rows[nx, _TYPE] == _BECOMES:
                rows[nx, _P1] = rows[q, _N1]
                rows[nx, _P2] = rows[q, _N2]
            k += 1
            continue
        if o != k:
            rows[o, :] = rows[k, :]
            vals[o, 0] = vals[k, 0]
            vals[o, 1] = vals[k, 1]
        o += 1
        k += 1
    dest_type = _DEST_RIGHT if dest_side == RIGHT else _DEST_LEFT if dest_side == LEFT else _DEST
    _point(rows, vals, o, dest_type, n - 1, name1, name2, shape_end, bin_, dest_side, -1, -1)
    o += 1
    for t in range(o):
        vals[t, 2] = cumcost[min(rows[t, _EEDGE], n)] - cumcost[min(rows[t, _BEDGE], n)]
    return rows[:o], vals[:o]


def maneuver_table(lon, lat, sines, edge_f, edge_i, stops_i, stops_f, other=None):
    """The rows of `maneuver_rows` for one leg: contiguous float64 lon, lat, `sines` (`haversine_sines`
    of them), edge_f (3, E), stops_f (S + 2, 2); int64 edge_i (10, E), stops_i (S + 2, 5); `other`:
    (offsets int64, values float64) or None."""
    arcsines = np.arcsin(sines)
    vec, zero = chord_vectors(lon, lat, arcsines, edge_i, HEADING_SAMPLE_M)
    # two calls of E values each, as edge_bearings makes them (see the module docstring)
    atan_start = np.arctan2(vec[0], vec[1])
    atan_end = np.arctan2(vec[2], vec[3])
    if other is None:
        other_off, other_val, has_other = _NO_OTHER_OFF, _NO_OTHER_VAL, False
    else:
        (other_off, other_val), has_other = other, True
    return maneuver_rows(atan_start, atan_end, zero, lon, lat, edge_f, edge_i, stops_i, stops_f, other_off,
                         other_val, has_other)


_NO_OTHER_OFF = np.zeros(1, np.int64)
_NO_OTHER_VAL = np.zeros(0, np.float64)


_F_ROUNDABOUT, _F_FERRY, _F_LINK = T.F_ROUNDABOUT, T.F_FERRY, T.F_LINK


@numba.njit(cache=True, nogil=True)
def leg_inputs(lon, lat, begin, end, edges, covered, seg_length, seg_class, seg_flags, seg_name, seg_ref, canon,
                edge_src, usable_out, usable, time, cost, class_map):
    """What the narrative's kernels read of a leg (`maneuver_table`), from the graph's and the profile's
    arrays (geoengine.services.route calls it): the shape's `haversine_sines`, and per
    traversed edge the `EDGE_FLOAT_ROWS` (length, seconds, cost with infinite as 0, each times the covered
    fraction) and `EDGE_INT_ROWS` (`PathInfo`'s arrays, names as ids of stripped strings); `ok` is False
    when the shape indices break `PathInfo`'s contract."""
    n = edges.shape[0]
    npts = lon.shape[0]
    edge_f = np.empty((3, n))
    edge_i = np.empty((10, n), np.int64)
    ok = True
    for i in range(n):
        e = edges[i]
        k = e >> 1
        edge_f[0, i] = seg_length[k] * covered[i]
        edge_f[1, i] = time[e] * covered[i]
        c = cost[e]
        edge_f[2, i] = (c if np.isfinite(c) else 0.0) * covered[i]
        b, t = begin[i], end[i]
        if b < 0 or t >= npts or t < b or (i > 0 and b < begin[i - 1]):
            ok = False
        edge_i[0, i] = b
        edge_i[1, i] = t
        edge_i[2, i] = class_map[seg_class[k]]
        f = seg_flags[k]
        edge_i[3, i] = (f & _F_ROUNDABOUT) != 0
        edge_i[4, i] = (f & _F_FERRY) != 0
        edge_i[5, i] = (f & _F_LINK) != 0
        # edges meeting at the start node: the usable ones leaving it, less the way back, plus the way in
        d = usable_out[edge_src[e]]
        if i > 0 and usable[edges[i - 1] ^ 1]:
            d -= 1
        edge_i[6, i] = d + 1
        cn, cr = canon[seg_name[k]], canon[seg_ref[k]]
        edge_i[7, i] = cn if cn != 0 else cr
        edge_i[8, i] = cn if cn != 0 else cr
        edge_i[9, i] = cr if cn != 0 and cr != cn else 0
    return haversine_sines(lon, lat), edge_f, edge_i, ok
