"""geoengine.arrays.unique equals np.unique, and member equals np.isin, on integer, boolean and other arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from geoengine.arrays import member, unique


@given(hnp.arrays(st.sampled_from([np.int64, np.int32, np.uint8, np.int16, np.bool_]),
                  hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=40)))
def test_unique_equals_numpy_on_integers(a):
    got, want = unique(a), np.unique(a)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("a", [np.array([2.0, np.nan, 1.0, np.nan, 2.0]), np.array(["b", "a", "b"]),
                               np.zeros(0, np.int64), [3, 1, 3]])
def test_unique_other_inputs(a):
    got, want = unique(a), np.unique(a)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


_ints = st.sampled_from([np.int64, np.int32, np.uint8, np.int16])


@given(hnp.arrays(_ints, hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=40),
                  elements=st.integers(0, 50)),
       hnp.arrays(np.int64, st.integers(0, 12), elements=st.integers(-60, 60)))
def test_member_equals_isin(values, table):
    got, want = member(values, table), np.isin(values, table)
    assert got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want)


def test_member_on_osm_ids_and_other_inputs():
    ids = np.array([1 << 40, 5, -3, 1 << 40, 7], np.int64)
    assert member(ids, [7, 1 << 40]).tolist() == [True, False, False, True, True]
    assert member(ids, np.zeros(0, np.int64)).tolist() == [False] * 5
    assert member(np.array([0.5, 1.0]), [1.0]).tolist() == [False, True]  # floats: np.isin
