"""Maneuvers from hand-made paths: one case per maneuver type, plus lengths, indices and the contract."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from geoengine.errors import InvalidRequest
from geoengine.narrative import ManeuverType as T
from geoengine.narrative import PathInfo, RoadClass, Stop, build_maneuvers
from geoengine.narrative.maneuvers import Turn, classify_turn, classify_turns

from .fixtures import arc, edge, make_path


def types(path, units="kilometers"):
    return [m.type for m in build_maneuvers(path, units)]


def test_single_edge_is_start_and_destination():
    ms = build_maneuvers(make_path([edge(90, 300, name="Carrer Major")]))
    assert [m.type for m in ms] == [T.START, T.DESTINATION]
    assert ms[0].street_names == ["Carrer Major"]
    assert abs(ms[0].bearing_after - 90) <= 1
    assert ms[0].length == pytest.approx(0.3, abs=0.002)
    assert ms[-1].length == 0 and ms[-1].begin_shape_index == ms[-1].end_shape_index == 1


@pytest.mark.parametrize("angle,expected", [
    (0, T.CONTINUE), (25, T.SLIGHT_RIGHT), (90, T.RIGHT), (150, T.SHARP_RIGHT), (180, T.UTURN_LEFT),
    (175, T.UTURN_RIGHT), (212, T.SHARP_LEFT), (270, T.LEFT), (330, T.SLIGHT_LEFT),
])
def test_turn_at_junction_onto_another_street(angle, expected):
    ms = build_maneuvers(make_path([edge(90, 200, name="A"), edge(90 + angle, 200, name="B", degree=4)]))
    assert [m.type for m in ms] == [T.START, expected, T.DESTINATION]
    turn = ms[1]
    assert turn.street_names == ["B"]
    assert (turn.bearing_after - turn.bearing_before) % 360 == pytest.approx(angle % 360, abs=1.5)
    assert turn.begin_shape_index == 1 and turn.end_shape_index == 2


def test_classify_turn_bands_cover_the_circle():
    got = [classify_turn(a) for a in range(0, 360)]
    assert got[0] == got[10] == got[350] == Turn.STRAIGHT
    assert got[90] == Turn.RIGHT and got[270] == Turn.LEFT and got[180] == Turn.REVERSE
    # each band is one contiguous run going round the circle
    changes = sum(1 for a, b in pairwise(got) if a != b)
    assert changes == 8
    grid = np.arange(-720, 720, 0.25)
    assert [Turn(int(t)) for t in classify_turns(grid)] == [classify_turn(a) for a in grid]


@pytest.mark.parametrize("angle,degree", [(30, 2), (30, 3), (-30, 3), (90, 2), (-100, 2), (0, 3)])
def test_bends_of_the_same_street_start_nothing(angle, degree):
    path = make_path([edge(0, 150, name="Avinguda Meritxell"), edge(angle, 150, name="Avinguda Meritxell",
                                                                   degree=degree)])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.DESTINATION]
    assert ms[0].length_m == pytest.approx(300, rel=1e-3)


def test_real_turn_on_the_same_street_is_announced():
    path = make_path([edge(0, 150, name="Avinguda Meritxell"), edge(90, 150, name="Avinguda Meritxell", degree=3)])
    assert types(path) == [T.START, T.RIGHT, T.DESTINATION]


def test_name_change_without_junction_is_becomes():
    ms = build_maneuvers(make_path([edge(45, 200, name="Carrer A"), edge(50, 100, name="Carrer B", degree=2)]))
    assert [m.type for m in ms] == [T.START, T.BECOMES, T.DESTINATION]
    assert ms[1].previous_street_names == ["Carrer A"] and ms[1].street_names == ["Carrer B"]


def test_name_is_compared_with_ref_when_unnamed():
    same = make_path([edge(0, 100, ref="CG-1", cls=RoadClass.PRIMARY),
                      edge(5, 100, ref="CG-1", cls=RoadClass.PRIMARY, degree=2)])
    other = make_path([edge(0, 100, ref="CG-1", cls=RoadClass.PRIMARY),
                       edge(5, 100, ref="CG-2", cls=RoadClass.PRIMARY, degree=2)])
    assert types(same) == [T.START, T.DESTINATION]
    assert types(other) == [T.START, T.BECOMES, T.DESTINATION]


def test_short_name_changes_between_plain_name_changes_are_collapsed():
    aba = build_maneuvers(make_path([edge(0, 200, name="A"), edge(10, 40, name="Pont", degree=2),
                                     edge(0, 200, name="A", degree=2)]))
    assert [m.type for m in aba] == [T.START, T.DESTINATION]
    assert aba[0].length_m == pytest.approx(440, rel=1e-3) and aba[0].end_shape_index == 3
    abc = build_maneuvers(make_path([edge(0, 200, name="A"), edge(10, 40, name="Pont", degree=2),
                                     edge(0, 200, name="C", degree=2)]))
    assert [m.type for m in abc] == [T.START, T.BECOMES, T.DESTINATION]
    assert abc[1].previous_street_names == ["A"] and abc[1].street_names == ["C"]
    assert abc[1].begin_shape_index == 1 and abc[1].length_m == pytest.approx(240, rel=1e-3)
    long_bridge = make_path([edge(0, 200, name="A"), edge(10, 100, name="Pont", degree=2),
                             edge(0, 200, name="A", degree=2)])
    assert types(long_bridge) == [T.START, T.BECOMES, T.BECOMES, T.DESTINATION]
    # a short stretch that ends in a real turn is kept
    turn = make_path([edge(0, 200, name="A"), edge(10, 40, name="Pont", degree=2), edge(90, 200, name="A")])
    assert types(turn) == [T.START, T.BECOMES, T.RIGHT, T.DESTINATION]


def test_uturn_only_on_real_reversal_at_a_plain_node():
    back = make_path([edge(0, 100, name="A"), edge(180, 100, name="A", degree=1)])
    hairpin = make_path([edge(0, 100, name="A"), edge(165, 100, name="A", degree=2)])
    assert types(back) == [T.START, T.UTURN_LEFT, T.DESTINATION]
    assert types(hairpin) == [T.START, T.DESTINATION]


def test_ramp_on_then_merge():
    path = make_path([
        edge(0, 200, name="Avinguda", cls=RoadClass.SECONDARY),
        edge(30, 150, cls=RoadClass.MOTORWAY, link=True, degree=3),
        edge(30, 150, cls=RoadClass.MOTORWAY, link=True, degree=2),
        edge(5, 500, ref="A-1", cls=RoadClass.MOTORWAY, degree=3),
    ])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.RAMP_RIGHT, T.MERGE_LEFT, T.DESTINATION]
    assert ms[2].street_names == ["A-1"]
    assert ms[1].length_m == pytest.approx(300, rel=1e-3)


def test_left_ramp_and_straight_ramp():
    left = make_path([edge(0, 200, cls=RoadClass.PRIMARY), edge(300, 150, cls=RoadClass.TRUNK, link=True)])
    straight = make_path([edge(0, 200, cls=RoadClass.PRIMARY), edge(3, 150, cls=RoadClass.TRUNK, link=True)])
    assert types(left)[1] == T.RAMP_LEFT
    assert types(straight)[1] == T.RAMP_STRAIGHT


def test_exit_then_turn_at_end_of_ramp():
    path = make_path([
        edge(0, 500, ref="A-1", cls=RoadClass.MOTORWAY),
        edge(25, 200, cls=RoadClass.MOTORWAY, link=True, degree=3),
        edge(115, 300, name="Carrer Nou", cls=RoadClass.SECONDARY, degree=3),
    ])
    assert types(path) == [T.START, T.EXIT_RIGHT, T.RIGHT, T.DESTINATION]
    left = make_path([edge(0, 500, cls=RoadClass.MOTORWAY), edge(335, 200, cls=RoadClass.MOTORWAY, link=True)])
    assert types(left)[1] == T.EXIT_LEFT


def test_motorway_fork_is_keep_left_or_right():
    left = make_path([edge(0, 500, ref="A-1", cls=RoadClass.MOTORWAY),
                      edge(340, 500, ref="A-2", cls=RoadClass.MOTORWAY, degree=3)])
    right = make_path([edge(0, 500, ref="A-1", cls=RoadClass.MOTORWAY),
                       edge(20, 500, ref="A-1", cls=RoadClass.MOTORWAY, degree=3)])
    assert types(left) == [T.START, T.STAY_LEFT, T.DESTINATION]
    assert types(right) == [T.START, T.STAY_RIGHT, T.DESTINATION]


def test_fork_from_other_bearings_even_when_going_straight():
    base = [edge(0, 300, name="Carretera"), edge(5, 300, name="Carretera", degree=3)]
    fork = make_path(base, other_bearings=[[], [30.0]])
    cross = make_path(base, other_bearings=[[], [90.0, 270.0]])
    middle = make_path(base, other_bearings=[[], [330.0, 40.0]])
    assert types(fork) == [T.START, T.STAY_LEFT, T.DESTINATION]
    assert types(cross) == [T.START, T.DESTINATION]
    assert types(middle) == [T.START, T.STAY_STRAIGHT, T.DESTINATION]


def roundabout_path(degrees, exit_name="Carrer de la Sortida"):
    r = 20.0
    # approach heading north to the south point of the ring, ring counterclockwise, exit west
    return make_path([
        edge(0, 150, name="Avinguda d'Entrada", degree=1),
        edge(pts=arc(r, 180, 90), rb=True, degree=degrees[0]),
        edge(pts=arc(r, 90, 0), rb=True, degree=degrees[1]),
        edge(pts=arc(r, 0, 270), rb=True, degree=degrees[2]),
        edge(270, 150, name=exit_name, degree=degrees[3]),
    ])


@pytest.mark.parametrize("degrees,count", [((3, 3, 2, 3), 2), ((3, 3, 3, 3), 3), ((3, 2, 2, 3), 1),
                                           ((3, 4, 2, 3), 2)])
def test_roundabout_counts_exits_passed(degrees, count):
    ms = build_maneuvers(roundabout_path(degrees))
    assert [m.type for m in ms] == [T.START, T.ROUNDABOUT_ENTER, T.ROUNDABOUT_EXIT, T.DESTINATION]
    enter = ms[1]
    assert enter.roundabout_exit_count == count
    assert enter.exit_street_names == ["Carrer de la Sortida"]
    assert enter.begin_edge == 1 and enter.end_edge == 4
    assert ms[2].street_names == ["Carrer de la Sortida"]
    assert ms[2].roundabout_exit_count is None


def test_large_roundabout_with_gentle_curves_counts_every_exit():
    # 300 m radius, 10 degree arcs: the turn between ring edges is nearly straight
    ring = [edge(pts=arc(300, 180 - 10 * k, 170 - 10 * k, steps=3), rb=True, degree=3 if k % 2 else 2)
            for k in range(9)]
    ring[0]["degree"] = 3
    path = make_path([edge(0, 150, name="Entrada", degree=1), *ring, edge(0, 150, name="Sortida", degree=3)])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.ROUNDABOUT_ENTER, T.ROUNDABOUT_EXIT, T.DESTINATION]
    assert ms[1].roundabout_exit_count == 4 + 1


def test_ferry_on_and_off():
    path = make_path([edge(0, 200, name="Port"), edge(0, 2000, name="Ferry Line", ferry=True, cls=RoadClass.FERRY,
                                                      speed=5), edge(0, 200, name="Moll", degree=2)])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.FERRY_ENTER, T.FERRY_EXIT, T.DESTINATION]
    assert ms[1].time_s == pytest.approx(400, rel=1e-3)


def test_via_stop_is_a_zero_length_maneuver_and_break_restarts():
    edges = [edge(0, 200, name="A"), edge(0, 200, name="A", degree=2), edge(0, 200, name="A", degree=2)]
    via = build_maneuvers(make_path(edges, stops=[Stop(edge=0, kind="via")]))
    assert [m.type for m in via] == [T.START, T.VIA, T.CONTINUE, T.DESTINATION]
    assert via[1].stop_index == 1 and via[1].length == 0
    assert via[1].begin_shape_index == 1
    through = build_maneuvers(make_path(edges, stops=[Stop(edge=0, kind="through")]))
    assert [m.type for m in through] == [T.START, T.DESTINATION]
    brk = build_maneuvers(make_path(edges, stops=[Stop(edge=1, kind="break", index=1, side="right")]))
    assert [m.type for m in brk] == [T.START, T.DESTINATION_RIGHT, T.START, T.DESTINATION]
    assert brk[1].stop_index == 1 and brk[1].stop_kind == "break"
    assert brk[0].length_m + brk[2].length_m == pytest.approx(600, rel=1e-3)


def test_sides_from_geometry():
    # heading north; a point east of the road is on the right
    from .fixtures import to_lonlat
    right = make_path([edge(0, 200, name="A")], destination_point=to_lonlat(15, 190), origin_point=to_lonlat(-12, 5))
    left = make_path([edge(0, 200, name="A")], destination_point=to_lonlat(-15, 190))
    on = make_path([edge(0, 200, name="A")], destination_point=to_lonlat(0.2, 190))
    assert types(right) == [T.START_LEFT, T.DESTINATION_RIGHT]
    assert types(left)[-1] == T.DESTINATION_LEFT
    assert types(on)[-1] == T.DESTINATION
    stop = make_path([edge(0, 200), edge(0, 200, degree=2)], stops=[Stop(0, "via", point=to_lonlat(10, 150))])
    assert stop.stops[0].side == "right"


def test_lengths_times_and_indices_add_up():
    path = roundabout_path((3, 3, 2, 3))
    for units, per in (("kilometers", 1000.0), ("miles", 1609.344)):
        ms = build_maneuvers(path, units)
        assert sum(m.length_m for m in ms) == pytest.approx(path.length_m.sum())
        assert sum(m.time_s for m in ms) == pytest.approx(path.time_s.sum())
        for m in ms:
            assert m.length == pytest.approx(m.length_m / per, abs=6e-4)
            assert m.units == units
        # maneuvers tile the shape: each begins where the previous ended
        for a, b in pairwise(ms):
            assert b.begin_shape_index == a.end_shape_index
        assert ms[0].begin_shape_index == 0 and ms[-1].end_shape_index == path.lon.size - 1


def test_zero_length_edges_take_neighbouring_bearings():
    path = make_path([edge(0, 200, name="A"), edge(0, 0.0, name="A", degree=2), edge(90, 200, name="B", degree=3)])
    ms = build_maneuvers(path)
    assert [m.type for m in ms] == [T.START, T.RIGHT, T.DESTINATION]


def test_bad_units_is_invalid_request():
    with pytest.raises(InvalidRequest) as e:
        build_maneuvers(make_path([edge(0, 100)]), "furlongs")
    assert e.value.status == 400 and "kilometers" in e.value.detail


def test_pathinfo_rejects_inconsistent_arrays():
    good = dict(lon=[1.5, 1.51], lat=[42.5, 42.5], shape_begin=[0], shape_end=[1], length_m=[800.0], time_s=[80.0],
                name=["A"], ref=[""], road_class=[6], is_roundabout=[False], is_ferry=[False], is_link=[False],
                node_degree=[1])
    PathInfo(**good)
    for bad in (dict(shape_end=[2]), dict(length_m=[1.0, 2.0]), dict(name=[]), dict(lat=[42.5]),
                dict(stops=[Stop(3)]), dict(stops=[Stop(0, "sideways")]), dict(destination_side="up"),
                dict(shape_begin=[], shape_end=[], length_m=[], time_s=[], name=[], ref=[], road_class=[],
                     is_roundabout=[], is_ferry=[], is_link=[], node_degree=[])):
        with pytest.raises(ValueError):
            PathInfo(**{**good, **bad})
    p = PathInfo(**good)
    assert p.road_class.dtype == np.uint8 and p.node_degree.dtype == np.int32 and p.is_link.dtype == bool
