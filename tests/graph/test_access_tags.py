"""The access hierarchy's shortcut: a way without any access key takes its class default for every mode,
exactly what reading the keys one by one gives (and any access key, plain or directional, reads them)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from geoengine.graph import tags as T

KEYS = sorted({k for keys in T.ACCESS_KEYS.values() for k in keys}) + ["highway", "name", "surface", "oneway"]
VALUES = sorted(T.ALLOW | T.DESTINATION | T.DENY) + ["residential", "Yes ", "no;yes", "unknown", ""]


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from(KEYS), st.sampled_from(["", ":forward", ":backward"]))
                       .map("".join), st.sampled_from(VALUES), max_size=5),
       st.sampled_from(sorted(set(T.DEFAULT_ACCESS.values()))), st.sampled_from(["", ":forward", ":backward"]))
def test_mode_access_equals_reading_every_key(tags, default, suffix):
    assert T.mode_access(tags, default, suffix) == T._mode_access_keys(tags, default, suffix)


def test_a_way_with_an_access_key_is_read_key_by_key():
    default = T.DEFAULT_ACCESS["residential"]
    assert T.mode_access({"highway": "residential"}, default) == (default & T._ACCESS_BITS, 0)
    allowed, dest = T.mode_access({"highway": "residential", "motor_vehicle": "destination"}, default)
    assert dest & T.AUTO and allowed & T.AUTO and not dest & T.PEDESTRIAN
    allowed, _ = T.mode_access({"highway": "residential", "access:forward": "no"}, default, ":forward")
    assert not allowed & T.AUTO
