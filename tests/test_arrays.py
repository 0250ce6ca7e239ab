"""geoengine.arrays.unique equals np.unique on integer, boolean and other arrays."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from geoengine.arrays import unique


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
