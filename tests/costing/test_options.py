"""Costing option tables: validation (flat, nested, unknown, types, ranges), defaults, fingerprints,
the listing body and the generated docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from geoengine.costing import (
    COSTINGS,
    TABLES,
    costing_options_schema,
    default_options,
    parse_costing_options,
)
from geoengine.costing.docs import render
from geoengine.errors import InvalidRequest

SPEC_FIELDS = {
    "auto": "use_highways, use_tolls, use_ferry, use_living_streets, use_tracks, service_penalty, "
            "country_crossing_penalty, shortest, height, width, exclude_unpaved, top_speed",
    "truck": "height, width, length, weight, axle_load, axle_count, hazmat, use_highways, use_tolls, use_ferry, "
             "shortest, top_speed",
    "bicycle": "bicycle_type, cycling_speed, use_roads, use_hills, use_ferry, avoid_bad_surfaces, shortest",
    "pedestrian": "walking_speed, walkway_factor, sidewalk_factor, alley_factor, driveway_factor, step_penalty, "
                  "use_ferry, use_living_streets, use_tracks, use_hills, use_lit, shortest, max_hiking_difficulty",
    "motorcycle": "use_highways, use_tolls, use_ferry, use_trails, shortest",
    "motor_scooter": "use_highways, use_tolls, use_ferry, use_trails, shortest",
}


@pytest.mark.parametrize("costing", sorted(SPEC_FIELDS))
def test_tables_have_exactly_the_spec_fields(costing):
    assert [o.name for o in TABLES[costing]] == [s.strip() for s in SPEC_FIELDS[costing].split(",")]


def test_every_costing_has_a_table_with_complete_rows():
    assert set(TABLES) == set(COSTINGS)
    for costing, table in TABLES.items():
        for o in table:
            assert o.type in ("number", "integer", "boolean", "string") and o.description
            if o.type in ("number", "integer"):
                assert o.minimum is not None and o.maximum is not None
                assert o.default is None or o.minimum <= o.default <= o.maximum, (costing, o.name)


def test_flat_and_nested_are_equivalent():
    flat = parse_costing_options("auto", {"use_highways": 0.3, "shortest": True})
    nested = parse_costing_options("auto", {"auto": {"use_highways": 0.3, "shortest": True}})
    assert flat == nested and flat["use_highways"] == 0.3 and flat.given == {"use_highways", "shortest"}
    assert flat["use_tolls"] == 0.5  # defaults filled
    assert not flat.is_default and flat.fingerprint == nested.fingerprint


def test_defaults_and_fingerprint():
    for costing in COSTINGS:
        d = default_options(costing)
        assert d.is_default and parse_costing_options(costing, None).fingerprint == d.fingerprint
        assert parse_costing_options(costing, {}).is_default
    # setting an option to its default value keeps the defaults (the prebuilt CH applies)
    assert parse_costing_options("auto", {"use_highways": 0.5}).is_default
    assert parse_costing_options("auto", {"use_highways": 0.51}).fingerprint != default_options("auto").fingerprint
    assert default_options("auto").fingerprint != default_options("taxi").fingerprint
    assert default_options("bicycle")["cycling_speed"] == 18.0
    assert parse_costing_options("bicycle", {"bicycle_type": "Road"})["cycling_speed"] == 25.0
    assert parse_costing_options("auto_shorter", None)["shortest"] is True


def _errors(costing, raw):
    with pytest.raises(InvalidRequest) as exc:
        parse_costing_options(costing, raw)
    assert exc.value.status == 400
    return {e.field: e.message for e in exc.value.errors}


def test_unknown_option_lists_allowed_names():
    errs = _errors("auto", {"use_hils": 0.5})
    assert "costing_options.use_hils" in errs
    assert "use_highways" in errs["costing_options.use_hils"] and "top_speed" in errs["costing_options.use_hils"]
    # an option of another costing is unknown here
    assert "costing_options.walking_speed" in _errors("auto", {"walking_speed": 5})
    assert "costing_options.bicycle.use_highways" in _errors("bicycle", {"bicycle": {"use_highways": 1}})


@pytest.mark.parametrize(
    ("costing", "raw", "field"),
    [
        ("auto", {"use_highways": 1.5}, "costing_options.use_highways"),
        ("auto", {"use_highways": -0.1}, "costing_options.use_highways"),
        ("auto", {"use_highways": "high"}, "costing_options.use_highways"),
        ("auto", {"use_highways": True}, "costing_options.use_highways"),
        ("auto", {"shortest": "yes"}, "costing_options.shortest"),
        ("auto", {"auto": {"top_speed": 5}}, "costing_options.auto.top_speed"),
        ("truck", {"axle_count": 2.5}, "costing_options.axle_count"),
        ("truck", {"height": float("nan")}, "costing_options.height"),
        ("bicycle", {"bicycle_type": "Tandem"}, "costing_options.bicycle_type"),
        ("pedestrian", {"walking_speed": 0}, "costing_options.walking_speed"),
        ("pedestrian", {"max_hiking_difficulty": 7}, "costing_options.max_hiking_difficulty"),
    ],
)
def test_bad_values_name_the_field(costing, raw, field):
    assert field in _errors(costing, raw)


def test_other_costings_options_are_ignored_as_valhalla_does():
    opts = parse_costing_options("auto", {"bicycle": {"use_roads": 0.2}, "auto": {"use_tolls": 0.1}})
    assert opts.given == {"use_tolls"} and opts["use_tolls"] == 0.1
    assert not parse_costing_options("auto", {"pedestrian": {"walking_speed": 4}}).given
    # still validated for the request's own costing
    assert "costing_options.auto.use_tolls" in _errors("auto", {"bicycle": {}, "auto": {"use_tolls": 7}})


def test_structure_errors():
    assert "costing_options" in _errors("auto", [1, 2])
    assert "costing_options.auto" in _errors("auto", {"auto": 3})
    assert "costing_options.use_tolls" in _errors("auto", {"auto": {}, "use_tolls": 0.2})
    errs = _errors("auto", {"use_highways": 2, "use_tolls": 3, "nope": 1})
    assert len(errs) == 3  # every problem reported at once
    with pytest.raises(InvalidRequest) as exc:
        parse_costing_options("hovercraft", {})
    assert exc.value.errors[0].field == "costing" and "auto" in exc.value.errors[0].message


def test_integer_option_accepts_integral_float():
    assert parse_costing_options("truck", {"axle_count": 3.0})["axle_count"] == 3


def test_schema_listing_body():
    body = costing_options_schema("truck")
    assert body["costing"] == "truck" and "costing_options" in body["usage"]
    props = body["options"]["properties"]
    assert props["height"] == {"type": "number", "minimum": 0.0, "maximum": 10.0, "default": 4.11,
                               "description": props["height"]["description"]}
    assert props["hazmat"]["type"] == "boolean"
    assert costing_options_schema("bicycle")["options"]["properties"]["bicycle_type"]["enum"][0] == "Road"
    with pytest.raises(InvalidRequest):
        costing_options_schema("boat")


def test_docs_are_generated_from_the_tables():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "costing.md").read_text()
    assert render() in doc, "docs/costing.md is stale: run python -m geoengine.costing.docs"
