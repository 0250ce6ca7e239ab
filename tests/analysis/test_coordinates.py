"""One coordinate convention: (lon, lat) rows or lon=/lat= by name; the old (lat, lon) positional order of
elevation, elevation_at, elevation_profile and reverse fails with a clear InvalidRequest."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.errors import InvalidRequest

LON, LAT = 1.5218, 42.5063  # Andorra la Vella


def test_elevation_rows_and_keywords_agree(andorra):
    rows = andorra.elevation([[LON, LAT], [1.5981, 42.5435]])
    named = andorra.elevation(lon=[LON, 1.5981], lat=[LAT, 42.5435])
    assert rows.tobytes() == named.tobytes() and 900 < rows[0] < 1300
    assert andorra.elevation_at(lon=LON, lat=LAT) == andorra.elevation_at((LON, LAT)) == rows[0]
    prof = andorra.elevation_profile([[LON, LAT], [1.5981, 42.5435]])
    named = andorra.elevation_profile(lon=[LON, 1.5981], lat=[LAT, 42.5435])
    assert prof.heights.tobytes() == named.heights.tobytes() and np.array_equal(prof.lats, [LAT, 42.5435])


def test_reverse_keywords_and_pair_agree(andorra):
    a = andorra.reverse(lon=LON, lat=LAT, size=3)
    b = andorra.reverse((LON, LAT), size=3)
    assert [r["id"] for r in a["results"]] == [r["id"] for r in b["results"]] and a["results"]


@pytest.mark.parametrize("call", [
    lambda e: e.elevation([LAT], [LON]),
    lambda e: e.elevation_at(LAT, LON),
    lambda e: e.elevation_profile([LAT, 42.54], [LON, 1.59]),
    lambda e: e.reverse(LAT, LON),
])
def test_old_positional_order_is_a_clear_error(andorra, call):
    with pytest.raises(InvalidRequest) as exc:
        call(andorra)
    assert "ambiguous" in exc.value.errors[0].message and "lon=" in exc.value.errors[0].message


def test_bad_shapes_name_the_argument(andorra):
    with pytest.raises(InvalidRequest) as exc:
        andorra.elevation(np.zeros((3, 3)))
    assert exc.value.errors[0].field == "points"
    with pytest.raises(InvalidRequest) as exc:
        andorra.elevation(lon=[LON])
    assert exc.value.errors[0].field == "lat"
    with pytest.raises(InvalidRequest) as exc:
        andorra.reverse(lat=LAT)
    assert exc.value.errors[0].field == "lon"
