"""The points-and-lines stream drops ways without a line key in C++ (osmium's KeyFilter) and reads the
members of boundary relations that have none in a second, ways-only pass: its features are exactly those
of reading every way in the file's order, in the same order (Andorra has 10 such boundary ways)."""

from __future__ import annotations

import numpy as np
import osmium
import pytest
import shapely

from geoengine.tiles import features as F

from ..conftest import data_file


class _EveryWay(F._PointsAndLines):
    """The stream without the way filter: every way reaches `way` in one pass, in the file's order."""

    filters = F._PointsAndLines.filters[:1]  # the node filter only
    keyed = False

    def collect(self, osm_path) -> None:
        F._Collector.collect(self, osm_path)


@pytest.mark.parametrize("rel", ["andorra/andorra.osm.pbf", "liechtenstein/nominatim-apidb-test-data.osm.pbf"])
def test_filtered_ways_give_the_same_features_in_the_same_order(rel):
    osm = data_file(rel)
    levels = F.boundary_way_levels(osm)
    want, got = F.FeatureSet(), F.FeatureSet()
    _EveryWay(want, levels).collect(osm)
    stream = F._PointsAndLines(got, levels)
    stream.collect(osm)
    got.sort_from(0)
    keyless = sum(1 for i in levels if i not in stream._seen_boundary)
    assert keyless > 0  # the second pass had ways to look for
    assert len(got) == len(want) > 1000
    assert got.layer == want.layer and got.min_zoom == want.min_zoom and got.props == want.props
    assert bool(np.all(shapely.equals_exact(np.array(got.geoms), np.array(want.geoms), tolerance=0)))
    assert len(got.coastlines) == len(want.coastlines)


def test_the_key_filter_drops_ways_in_cpp():
    """Ways without a line key never reach Python (buildings, landuse: 746 of Andorra's 2,725 ways, two thirds of Liechtenstein's)."""
    osm = str(data_file("andorra/andorra.osm.pbf"))
    seen = []

    class Count(F._PointsAndLines):
        def way(self, w):
            seen.append(w.id)

    Count(F.FeatureSet(), {}).collect(osm)
    every = []

    class All(osmium.SimpleHandler):
        def way(self, w):
            every.append(any(k in w.tags for k in F._WAY_KEYS))

    All().apply_file(osm)
    assert len(seen) == sum(every) < len(every) - 500
