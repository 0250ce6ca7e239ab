"""Maneuvers from a `PathInfo`: where the traveller has to act, and what to do there.

One linear pass over the edges of the route. At each junction between edge i-1 and edge i the turn angle
(clockwise, from the bearing arriving at the end of i-1 to the bearing leaving the start of i, both
measured as chords over `HEADING_SAMPLE_M`) is classified like Valhalla's turn degrees, and a new
maneuver starts when something the traveller must know happens there: a turn at a junction, a fork, a
change of street name, a ramp, a merge, a roundabout, a ferry, a stop. Bends of the same street, at plain
shape points or at junctions, start nothing. Type names and integer codes follow Valhalla's
DirectionsLeg.Maneuver.Type (0-43); `VIA` (44) is a geoengine extension for via/through stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from ..errors import InvalidRequest
from .geometry import edge_bearings, fill_nan_forward, turn_angles
from .path import HIGHWAY_CLASSES, PathInfo

__all__ = ["ManeuverType", "Maneuver", "Turn", "classify_turn", "classify_turns", "build_maneuvers", "normalize_units",
           "UNITS", "METERS_PER_MILE"]

METERS_PER_MILE = 1609.344
UNITS = ("kilometers", "miles")
_UNIT_ALIASES = {"km": "kilometers", "kilometres": "kilometers", "kilometer": "kilometers",
                 "mi": "miles", "mile": "miles"}


class ManeuverType(IntEnum):
    """Valhalla's maneuver type codes (names in snake case); VIA is a geoengine extension."""

    NONE = 0
    START = 1
    START_RIGHT = 2
    START_LEFT = 3
    DESTINATION = 4
    DESTINATION_RIGHT = 5
    DESTINATION_LEFT = 6
    BECOMES = 7
    CONTINUE = 8
    SLIGHT_RIGHT = 9
    RIGHT = 10
    SHARP_RIGHT = 11
    UTURN_RIGHT = 12
    UTURN_LEFT = 13
    SHARP_LEFT = 14
    LEFT = 15
    SLIGHT_LEFT = 16
    RAMP_STRAIGHT = 17
    RAMP_RIGHT = 18
    RAMP_LEFT = 19
    EXIT_RIGHT = 20
    EXIT_LEFT = 21
    STAY_STRAIGHT = 22
    STAY_RIGHT = 23
    STAY_LEFT = 24
    MERGE = 25
    ROUNDABOUT_ENTER = 26
    ROUNDABOUT_EXIT = 27
    FERRY_ENTER = 28
    FERRY_EXIT = 29
    MERGE_RIGHT = 37
    MERGE_LEFT = 38
    VIA = 44

    @property
    def key(self) -> str:
        return self.name.lower()


class Turn(IntEnum):
    STRAIGHT = 0
    SLIGHT_RIGHT = 1
    RIGHT = 2
    SHARP_RIGHT = 3
    REVERSE = 4
    SHARP_LEFT = 5
    LEFT = 6
    SLIGHT_LEFT = 7


def classify_turn(angle: float) -> Turn:
    """Turn class of a clockwise turn angle in degrees (Valhalla's bands)."""
    a = float(angle) % 360.0
    if a < 11 or a > 349:
        return Turn.STRAIGHT
    if a < 45:
        return Turn.SLIGHT_RIGHT
    if a < 136:
        return Turn.RIGHT
    if a < 160:
        return Turn.SHARP_RIGHT
    if a <= 200:
        return Turn.REVERSE
    if a <= 224:
        return Turn.SHARP_LEFT
    if a <= 315:
        return Turn.LEFT
    return Turn.SLIGHT_LEFT


def classify_turns(angles: np.ndarray) -> np.ndarray:
    """`classify_turn` over an array of angles (int8 `Turn` codes)."""
    a = np.asarray(angles, dtype=np.float64) % 360.0
    conds = [(a < 11) | (a > 349), a < 45, a < 136, a < 160, a <= 200, a <= 224, a <= 315]
    codes = [Turn.STRAIGHT, Turn.SLIGHT_RIGHT, Turn.RIGHT, Turn.SHARP_RIGHT, Turn.REVERSE, Turn.SHARP_LEFT, Turn.LEFT]
    return np.select(conds, [int(c) for c in codes], int(Turn.SLIGHT_LEFT)).astype(np.int8)


_TURN_TYPE = {
    Turn.SLIGHT_RIGHT: ManeuverType.SLIGHT_RIGHT, Turn.RIGHT: ManeuverType.RIGHT,
    Turn.SHARP_RIGHT: ManeuverType.SHARP_RIGHT, Turn.SHARP_LEFT: ManeuverType.SHARP_LEFT,
    Turn.LEFT: ManeuverType.LEFT, Turn.SLIGHT_LEFT: ManeuverType.SLIGHT_LEFT,
}

#: a plain bend (node degree <= 2) is a U-turn only when the route really reverses on itself
_REVERSAL_TOLERANCE_DEG = 2.0
#: another branch within this many degrees of straight ahead makes a junction a fork
_FORK_BRANCH_DEG = 60.0
#: ... when it also leaves within this many degrees of the branch taken
_FORK_SPREAD_DEG = 40.0
#: a street name held for less than this between two name-only changes is not announced
SHORT_NAME_M = 60.0


def normalize_units(units: str | None, field: str = "directions_options.units") -> str:
    u = "kilometers" if units is None else _UNIT_ALIASES.get(str(units).lower(), str(units).lower())
    if u not in UNITS:
        raise InvalidRequest.field(field, f"unsupported units '{units}'; use one of: {', '.join(UNITS)}")
    return u


@dataclass
class Maneuver:
    """One maneuver. `length` is in `units` (3 decimals), `length_m` in metres; edges [begin_edge, end_edge)."""

    type: ManeuverType
    street_names: list[str]
    length: float
    length_m: float
    time_s: float
    begin_shape_index: int
    end_shape_index: int
    bearing_before: int
    bearing_after: int
    begin_edge: int
    end_edge: int
    units: str = "kilometers"
    roundabout_exit_count: int | None = None
    #: street names after the roundabout (on ROUNDABOUT_ENTER) or the previous names (on BECOMES)
    exit_street_names: list[str] = field(default_factory=list)
    previous_street_names: list[str] = field(default_factory=list)
    #: for START / DESTINATION / VIA: the side of the road ("left", "right" or None)
    side: str | None = None
    #: for VIA and for DESTINATION at a break stop: the stop's number and kind
    stop_index: int | None = None
    stop_kind: str | None = None

    @property
    def type_name(self) -> str:
        return self.type.key


def _names(path: PathInfo, i: int) -> list[str]:
    out: list[str] = []
    for s in (path.name[i], path.ref[i]):
        s = s.strip()
        if s and s not in out:
            out.append(s)
    return out


def _name_key(path: PathInfo, i: int) -> str:
    return path.name[i].strip() or path.ref[i].strip()


def _signed(a: float) -> float:
    return ((a + 180.0) % 360.0) - 180.0


def _fork_side(angle: float, other: list[float] | None, bearing_in: float) -> str | None:
    """'right' / 'left' / 'straight' when the junction is a fork given the other branches' bearings."""
    if not other:
        return None
    ours = _signed(angle)
    near = [_signed(b - bearing_in) for b in other]
    near = [a for a in near if abs(a) <= _FORK_BRANCH_DEG and abs(a - ours) <= _FORK_SPREAD_DEG]
    if not near or abs(ours) > _FORK_BRANCH_DEG:
        return None
    if all(ours > a for a in near):
        return "right"
    if all(ours < a for a in near):
        return "left"
    return "straight"


_NAME_ONLY = (ManeuverType.BECOMES, ManeuverType.CONTINUE)
_STOPS = (ManeuverType.VIA, ManeuverType.DESTINATION, ManeuverType.DESTINATION_LEFT, ManeuverType.DESTINATION_RIGHT)


def _absorb(a: Maneuver, b: Maneuver, unit_m: float) -> None:
    """Extend maneuver `a` over the following maneuver `b`."""
    a.end_edge, a.end_shape_index = b.end_edge, b.end_shape_index
    a.length_m += b.length_m
    a.time_s += b.time_s
    a.length = round(a.length_m / unit_m, 3)


def _prepend(b: Maneuver, a: Maneuver, unit_m: float) -> None:
    """Start maneuver `b` where the preceding maneuver `a` starts."""
    b.begin_edge, b.begin_shape_index, b.bearing_before = a.begin_edge, a.begin_shape_index, a.bearing_before
    b.length_m += a.length_m
    b.time_s += a.time_s
    b.length = round(b.length_m / unit_m, 3)


def _collapse_short_name_changes(ms: list[Maneuver], unit_m: float) -> list[Maneuver]:
    """A name held for less than `SHORT_NAME_M` between two name-only changes (a named bridge, a short
    renamed stretch) is not announced: A -> B -> A becomes nothing, A -> B -> C becomes A -> C."""
    out: list[Maneuver] = []
    k = 0
    while k < len(ms):
        m = ms[k]
        if (out and out[-1].type not in _STOPS and m.type in _NAME_ONLY and m.length_m < SHORT_NAME_M
                and k + 1 < len(ms) and ms[k + 1].type in _NAME_ONLY):
            prev, nxt = out[-1], ms[k + 1]
            if nxt.street_names == prev.street_names:
                _absorb(prev, m, unit_m)
                _absorb(prev, nxt, unit_m)
                k += 2
                continue
            _prepend(nxt, m, unit_m)
            if nxt.type == ManeuverType.BECOMES:
                nxt.previous_street_names = list(prev.street_names)
            k += 1
            continue
        out.append(m)
        k += 1
    return out


def build_maneuvers(path: PathInfo, units: str = "kilometers") -> list[Maneuver]:
    """The maneuvers of one route or leg, in travel order: START first, DESTINATION last."""
    units = normalize_units(units)
    unit_m = 1000.0 if units == "kilometers" else METERS_PER_MILE
    n = path.n_edges
    b_start, b_end = edge_bearings(path.lon, path.lat, path.shape_begin, path.shape_end)
    bin_ = fill_nan_forward(b_end)                  # arriving at the end of edge i
    bout = fill_nan_forward(b_start[::-1])[::-1]    # leaving the start of edge i
    angle = np.zeros(n)
    angle[1:] = turn_angles(bin_[:-1], bout[1:])
    cumlen = np.concatenate(([0.0], np.cumsum(path.length_m)))
    cumtime = np.concatenate(([0.0], np.cumsum(path.time_s)))
    highwayish = path.is_link | np.isin(path.road_class, np.array(HIGHWAY_CLASSES, dtype=np.uint8))
    stops_at: dict[int, list] = {}
    for rank, s in enumerate(path.stops):
        # a `through` location only shapes the route: passed silently, like Valhalla
        if s.edge < n - 1 and s.kind != "through":
            stops_at.setdefault(s.edge, []).append((s.index if s.index is not None else rank + 1, s))

    out: list[Maneuver] = []

    def new(mtype: ManeuverType, i: int, **kw) -> Maneuver:
        return Maneuver(type=mtype, street_names=_names(path, i), length=0.0, length_m=0.0, time_s=0.0,
                        begin_shape_index=int(path.shape_begin[i]), end_shape_index=int(path.shape_begin[i]),
                        bearing_before=int(round(bin_[i - 1])) % 360 if i > 0 else 0,
                        bearing_after=int(round(bout[i])) % 360, begin_edge=i, end_edge=i, units=units, **kw)

    def close(m: Maneuver, end_edge: int) -> None:
        m.end_edge = end_edge
        m.length_m = float(cumlen[end_edge] - cumlen[m.begin_edge])
        m.time_s = float(cumtime[end_edge] - cumtime[m.begin_edge])
        m.length = round(m.length_m / unit_m, 3)
        m.end_shape_index = int(path.shape_end[end_edge - 1])
        out.append(m)

    def point(mtype: ManeuverType, edge: int, **kw) -> Maneuver:
        """A zero-length maneuver at the end of `edge` (destination, via)."""
        s = int(path.shape_end[edge])
        return Maneuver(type=mtype, street_names=_names(path, edge), length=0.0, length_m=0.0, time_s=0.0,
                        begin_shape_index=s, end_shape_index=s, bearing_before=int(round(bin_[edge])) % 360,
                        bearing_after=0, begin_edge=edge + 1, end_edge=edge + 1, units=units, **kw)

    # Junctions where nothing can happen (same street, same kind of road, no stop, straight or a plain bend)
    # are skipped in numpy; the loop below visits only the candidates.
    keys = np.array([_name_key(path, i) for i in range(n)], dtype=object)
    turns = classify_turns(angle)
    deg = path.node_degree
    rb, fe, ln = path.is_roundabout, path.is_ferry, path.is_link
    cand = np.zeros(n, dtype=bool)
    cand[1:] = ((keys[1:] != keys[:-1]) | (rb[1:] != rb[:-1]) | (fe[1:] != fe[:-1]) | (ln[1:] != ln[:-1])
                | ((deg[1:] >= 3) & (turns[1:] != Turn.STRAIGHT)) | (turns[1:] == Turn.REVERSE)
                | (rb[1:] & rb[:-1] & (deg[1:] >= 3)))  # exits passed on a roundabout are counted
    if path.other_bearings is not None:
        cand[1:] |= deg[1:] >= 3
    for p in stops_at:
        cand[p + 1] = True
    angle_l = angle.tolist()
    deg_l = deg.tolist()
    rb_l, fe_l, ln_l = rb.tolist(), fe.tolist(), ln.tolist()
    cls_l = path.road_class.tolist()
    hw_l = highwayish.tolist()
    bin_l = bin_.tolist()
    highway_codes = {int(c) for c in HIGHWAY_CLASSES}

    start_type = {"right": ManeuverType.START_RIGHT, "left": ManeuverType.START_LEFT}.get(
        path.origin_side or "", ManeuverType.START)
    cur = new(start_type, 0, side=path.origin_side)
    rb_exits = 0

    for i in np.flatnonzero(cand).tolist():
        p = i - 1
        forced = False
        if p in stops_at:
            close(cur, i)
            is_break = False
            for index, s in stops_at[p]:
                if s.kind in ("break", "break_through"):
                    is_break = True
                    mt = {"right": ManeuverType.DESTINATION_RIGHT, "left": ManeuverType.DESTINATION_LEFT}.get(
                        s.side or "", ManeuverType.DESTINATION)
                else:
                    mt = ManeuverType.VIA
                out.append(point(mt, p, side=s.side, stop_index=index, stop_kind=s.kind))
            if is_break:
                cur = new(ManeuverType.START, i)
                cur.bearing_before = 0
                rb_exits = 0
                continue
            forced = True

        a = angle_l[i]
        turn = Turn(int(turns[i]))
        mtype: ManeuverType | None = None
        extra: dict = {}
        rb_p, rb_i = rb_l[p], rb_l[i]
        fe_p, fe_i = fe_l[p], fe_l[i]
        ln_p, ln_i = ln_l[p], ln_l[i]
        if rb_i and not rb_p:
            mtype = ManeuverType.ROUNDABOUT_ENTER
            rb_exits = 0
        elif rb_i and rb_p:
            if deg_l[i] >= 3:
                rb_exits += 1
        elif rb_p:
            if cur.type == ManeuverType.ROUNDABOUT_ENTER:
                cur.roundabout_exit_count = rb_exits + 1
                cur.exit_street_names = _names(path, i)
            mtype = ManeuverType.ROUNDABOUT_EXIT
        elif fe_i and not fe_p:
            mtype = ManeuverType.FERRY_ENTER
        elif fe_p and not fe_i:
            mtype = ManeuverType.FERRY_EXIT
        elif fe_i and fe_p:
            pass
        elif ln_i and not ln_p and cls_l[p] in highway_codes:
            mtype = ManeuverType.EXIT_LEFT if _signed(a) < 0 else ManeuverType.EXIT_RIGHT
        elif ln_i and not ln_p and cls_l[i] in highway_codes:
            mtype = (ManeuverType.RAMP_STRAIGHT if turn == Turn.STRAIGHT
                     else ManeuverType.RAMP_LEFT if _signed(a) < 0 else ManeuverType.RAMP_RIGHT)
        elif ln_p and not ln_i and cls_l[i] in highway_codes:
            sa = _signed(a)
            mtype = (ManeuverType.MERGE_LEFT if sa < -5 else ManeuverType.MERGE_RIGHT if sa > 5
                     else ManeuverType.MERGE)
        else:
            same = keys[i] == keys[p]
            degree = deg_l[i]
            fork = None
            if turn in (Turn.STRAIGHT, Turn.SLIGHT_LEFT, Turn.SLIGHT_RIGHT) and degree >= 3:
                if path.other_bearings is not None:
                    fork = _fork_side(a, path.other_bearings[i], bin_l[p])
                elif turn != Turn.STRAIGHT and (hw_l[i] or hw_l[p]):
                    fork = "right" if turn == Turn.SLIGHT_RIGHT else "left"
            if fork is not None:
                mtype = {"right": ManeuverType.STAY_RIGHT, "left": ManeuverType.STAY_LEFT,
                         "straight": ManeuverType.STAY_STRAIGHT}[fork]
            elif turn == Turn.REVERSE:
                if degree >= 3 or abs(a - 180.0) <= _REVERSAL_TOLERANCE_DEG:
                    mtype = ManeuverType.UTURN_LEFT if a >= 180.0 else ManeuverType.UTURN_RIGHT
                elif not same:
                    mtype = ManeuverType.BECOMES
            elif turn == Turn.STRAIGHT or (turn in (Turn.SLIGHT_LEFT, Turn.SLIGHT_RIGHT) and same) or degree <= 2:
                if not same:
                    mtype = ManeuverType.CONTINUE if degree >= 3 else ManeuverType.BECOMES
            else:
                mtype = _TURN_TYPE[turn]
            if mtype == ManeuverType.BECOMES:
                extra["previous_street_names"] = _names(path, p)
        if mtype is None and forced:
            mtype = ManeuverType.CONTINUE
        if mtype is not None:
            if not forced:
                close(cur, i)
            cur = new(mtype, i, **extra)

    close(cur, n)
    out = _collapse_short_name_changes(out, unit_m)
    dest_type = {"right": ManeuverType.DESTINATION_RIGHT, "left": ManeuverType.DESTINATION_LEFT}.get(
        path.destination_side or "", ManeuverType.DESTINATION)
    out.append(point(dest_type, n - 1, side=path.destination_side))
    return out
