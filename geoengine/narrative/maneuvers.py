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
from . import kernels as K
from .kernels import SHORT_NAME_M  # noqa: F401  (the rule's constants live with the kernel)
from .path import STOP_KINDS, PathInfo, Stop

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


def name_ids(names: list[str], refs: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Per edge: the id of its name key (the stripped name, else the stripped ref) and of its street names
    (name then ref, stripped, without repeats; 0 for none), with the table of the stripped strings (id 0 is
    ""). Equal strings get equal ids, so comparing ids compares the strings."""
    ids: dict[str, int] = {"": 0}
    n = len(names)
    key = np.empty(n, np.int64)
    n1 = np.empty(n, np.int64)
    n2 = np.empty(n, np.int64)
    for i, (a, b) in enumerate(zip(names, refs, strict=True)):
        cn = ids.setdefault(a.strip(), len(ids))
        cr = ids.setdefault(b.strip(), len(ids))
        key[i] = cn or cr
        n1[i] = cn or cr
        n2[i] = cr if cn and cr != cn else 0
    return key, n1, n2, list(ids)


_SIDE_CODE = {None: K.NO_SIDE, "left": K.LEFT, "right": K.RIGHT}
SIDES = (None, "left", "right")  # by side code
_TYPES = {int(t): t for t in ManeuverType}


def street_names(strings: list[str], a: int, b: int) -> list[str]:
    """The street names of ids (a, b) of `strings` (0: none)."""
    if not a:
        return []
    return [strings[a], strings[b]] if b else [strings[a]]


def build_maneuvers(path: PathInfo, units: str = "kilometers") -> list[Maneuver]:
    """The maneuvers of one route or leg, in travel order: START first, DESTINATION last. The per-edge work
    is compiled (geoengine.narrative.kernels); Python makes one object per maneuver."""
    units = normalize_units(units)
    unit_m = 1000.0 if units == "kilometers" else METERS_PER_MILE
    n = path.n_edges
    key, n1, n2, strings = name_ids(path.name, path.ref)
    edge_i = np.empty((len(K.EDGE_INT_ROWS), n), np.int64)
    for row, a in enumerate((path.shape_begin, path.shape_end, path.road_class, path.is_roundabout, path.is_ferry,
                             path.is_link, path.node_degree, key, n1, n2)):
        edge_i[row] = a
    edge_f = np.zeros((len(K.EDGE_FLOAT_ROWS), n))
    edge_f[0], edge_f[1] = path.length_m, path.time_s
    # the origin, the destination, then the stops, with their sides as PathInfo resolved them
    stops_i = np.zeros((len(path.stops) + 2, len(K.STOP_COLUMNS)), np.int64)
    stops_i[0, 2], stops_i[1, 2] = _SIDE_CODE[path.origin_side], _SIDE_CODE[path.destination_side]
    for rank, s in enumerate(path.stops):
        stops_i[rank + 2, :4] = (s.edge, K.STOP_KIND_CODES[s.kind], _SIDE_CODE[s.side],
                                 s.index if s.index is not None else rank + 1)
    stops_f = np.zeros((len(path.stops) + 2, 2))
    other = None
    if path.other_bearings is not None:
        off = np.zeros(n + 1, np.int64)
        np.cumsum([len(b) for b in path.other_bearings], out=off[1:])
        other = (off, np.array([float(x) for b in path.other_bearings for x in b], np.float64).reshape(int(off[-1])))
    rows, vals = K.maneuver_table(path.lon, path.lat, K.haversine_sines(path.lon, path.lat), edge_f, edge_i,
                                  stops_i, stops_f, other)
    kinds = STOP_KINDS
    out = []
    for (mtype, a, b, bshape, eshape, bb, ba, bedge, eedge, rbc, x1, x2, p1, p2, side, sidx, skind), \
            (length_m, time_s, _) in zip(rows.tolist(), vals.tolist(), strict=True):
        out.append(Maneuver(
            type=_TYPES[mtype], street_names=street_names(strings, a, b), length=round(length_m / unit_m, 3),
            length_m=length_m, time_s=time_s, begin_shape_index=bshape, end_shape_index=eshape, bearing_before=bb,
            bearing_after=ba, begin_edge=bedge, end_edge=eedge, units=units,
            roundabout_exit_count=None if rbc < 0 else rbc, exit_street_names=street_names(strings, x1, x2),
            previous_street_names=street_names(strings, p1, p2), side=SIDES[side],
            stop_index=None if sidx < 0 else sidx, stop_kind=None if skind < 0 else kinds[skind]))
    return out


def warm_kernels() -> None:
    """Run the narrative's kernels once through `build_maneuvers` (a hand-made two-edge path), so that the
    entry the library's callers use is compiled into Numba's cache too (`geoengine warm`; a route compiles
    the rest)."""
    path = PathInfo(lon=[1.52, 1.5202, 1.5204], lat=[42.51, 42.5202, 42.5201], shape_begin=[0, 1], shape_end=[1, 2],
                    length_m=[20.0, 20.0], time_s=[2.0, 2.0], name=["A", "B"], ref=["", ""], road_class=[6, 6],
                    is_roundabout=[False, False], is_ferry=[False, False], is_link=[False, False],
                    node_degree=[2, 3], stops=[Stop(edge=0, kind="via", point=(1.5201, 42.5101))],
                    origin_point=(1.5201, 42.51), destination_point=(1.5205, 42.5201))
    build_maneuvers(path)
