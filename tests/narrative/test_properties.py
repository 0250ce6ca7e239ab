"""Property tests: random paths always give well-formed maneuvers that every language can render."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geoengine.narrative import ManeuverType as T
from geoengine.narrative import RoadClass, Stop, build_maneuvers, render

from .fixtures import edge, make_path

STARTS = {T.START, T.START_LEFT, T.START_RIGHT}
ENDS = {T.DESTINATION, T.DESTINATION_LEFT, T.DESTINATION_RIGHT}

edges_st = st.lists(st.builds(
    lambda b, length, name, ref, cls, link, rb, ferry, degree: edge(
        b, length, name=name, ref=ref, cls=cls, link=link, rb=rb, ferry=ferry, degree=degree),
    st.floats(0, 359.9), st.sampled_from([0.0, 5.0, 30.0, 120.0, 600.0]),
    st.sampled_from(["", "Carrer Major", "Avinguda Meritxell"]), st.sampled_from(["", "CG-1"]),
    st.sampled_from([RoadClass.MOTORWAY, RoadClass.TRUNK, RoadClass.PRIMARY, RoadClass.RESIDENTIAL]),
    st.booleans(), st.booleans(), st.booleans(), st.integers(1, 5)), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edges=edges_st, data=st.data())
def test_random_paths_give_well_formed_maneuvers(edges, data):
    n = len(edges)
    stops = []
    if n > 1:
        for e in data.draw(st.lists(st.integers(0, n - 2), max_size=3, unique=True)):
            stops.append(Stop(e, data.draw(st.sampled_from(["via", "through", "break", "break_through"])),
                              side=data.draw(st.sampled_from([None, "left", "right"]))))
    other = data.draw(st.none() | st.lists(st.lists(st.floats(0, 359.9), max_size=3), min_size=n, max_size=n))
    path = make_path(edges, stops=sorted(stops, key=lambda s: s.edge), other_bearings=other)
    units = data.draw(st.sampled_from(["kilometers", "miles"]))
    ms = build_maneuvers(path, units)
    assert ms[0].type in STARTS and ms[-1].type in ENDS
    assert sum(m.length_m for m in ms) == pytest.approx(path.length_m.sum(), abs=1e-6)
    assert sum(m.time_s for m in ms) == pytest.approx(path.time_s.sum(), abs=1e-6)
    # the maneuvers partition the edges and tile the shape
    assert ms[0].begin_edge == 0 and ms[-1].end_edge == n
    for a, b in pairwise(ms):
        assert b.begin_edge == a.end_edge
        assert b.begin_shape_index == a.end_shape_index
    for m in ms:
        assert m.begin_edge <= m.end_edge
        assert 0 <= m.bearing_before < 360 and 0 <= m.bearing_after < 360
        if m.roundabout_exit_count is not None:
            assert m.type == T.ROUNDABOUT_ENTER and m.roundabout_exit_count >= 1
        if m.type in (T.VIA,) or (m.type in ENDS and m is not ms[-1]):
            assert m.stop_index is not None and m.length_m == 0
    assert sum(1 for m in ms if m.type == T.VIA or m.stop_index is not None) == sum(
        1 for s in stops if s.kind != "through")
    for lang in ("en", "fr", "de", "es", "hi", "ar"):
        steps = render(ms, lang, units, "instructions")
        assert len(steps) == len(ms)
        for s in steps:
            assert s["instruction"] and "{" not in s["instruction"]
