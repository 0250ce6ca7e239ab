"""/matrix honours the snapping hints of its locations (heading, preferred side) as /route does, on
Andorra: a source on a two-way street with a heading leaves in that direction."""

from __future__ import annotations

import pytest

from geoengine.errors import InvalidRequest

ON_STREET = (1.5333, 42.5107)  # Vial de la Uniò, two-way
TARGETS = [(1.5341, 42.5555), (1.5218, 42.5063)]


def _route_time(engine, src: dict, dst: tuple) -> float:
    doc = engine.route(locations=[src, {"lon": dst[0], "lat": dst[1]}], directions_options={"directions_type": "none"})
    return doc["trip"]["summary"]["time"]


@pytest.mark.parametrize("hints", [{"heading": 270, "heading_tolerance": 90}, {"heading": 90, "heading_tolerance": 90},
                                   {"preferred_side": "opposite"}])
def test_matrix_sources_with_hints_equal_routes_with_them(andorra, hints):
    src = {"lon": ON_STREET[0], "lat": ON_STREET[1], **hints}
    doc = andorra.matrix_request(sources=[src], targets=[{"lon": lo, "lat": la} for lo, la in TARGETS])
    for j, dst in enumerate(TARGETS):
        assert doc["sources_to_targets"][0][j]["time"] == round(_route_time(andorra, src, dst))


def test_a_heading_changes_the_matrix_as_it_changes_the_route(andorra):
    targets = [{"lon": lo, "lat": la} for lo, la in TARGETS]
    plain = andorra.matrix_request(sources=[{"lon": ON_STREET[0], "lat": ON_STREET[1]}], targets=targets)
    west = andorra.matrix_request(sources=[{"lon": ON_STREET[0], "lat": ON_STREET[1], "heading": 270,
                                            "heading_tolerance": 90}], targets=targets)
    times = [[c["time"] for c in doc["sources_to_targets"][0]] for doc in (plain, west)]
    assert times[0] != times[1]  # the heading forbids the plain answer's direction of departure


def test_a_target_heading_nobody_can_match_is_named(andorra):
    with pytest.raises(InvalidRequest) as exc:  # out of bounds: refused before any snapping
        andorra.matrix_request(sources=[{"lon": ON_STREET[0], "lat": ON_STREET[1]}],
                               targets=[{"lon": TARGETS[0][0], "lat": TARGETS[0][1], "heading": 400}])
    assert "targets[0].heading" in str(exc.value.errors)
