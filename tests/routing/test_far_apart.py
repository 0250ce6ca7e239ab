"""An extract with far-apart parts (issue 26, "Far-apart parts"): Andorra and Liechtenstein merged with
pyosmium into one .osm.pbf (their bounding box is 8 degrees by 5), built into one bundle. It opens,
routes in both parts as Dijkstra does, and its snapping grid is the size of the two parts' grids, not of
the box between them (a uniform 100 m grid over that box would hold 3 million cells)."""

from __future__ import annotations

import numpy as np
import osmium
import pytest

from geoengine.errors import NoRoute
from geoengine.routing.snapgrid import PieceGrid
from tests.conftest import data_file
from tests.services.test_route import Oracle, locs, random_points

SPLIT_LON = 5.0  # Andorra lies west of it, Liechtenstein east


def merge_extracts(paths, out) -> None:
    """One .osm.pbf of several extracts (sorted, objects in both written once), as `osmium merge` does."""
    reader = osmium.MergeInputReader()
    for p in paths:
        reader.add_file(str(p))
    writer = osmium.WriteHandler(str(out))
    try:
        reader.apply(writer, simplify=True)
    finally:
        writer.close()


@pytest.fixture(scope="module")
def two_parts(tmp_path_factory, settings):
    import geoengine
    from geoengine.bundler.pipeline import build, resolve_inputs
    from geoengine.progress import NullProgress

    tmp = tmp_path_factory.mktemp("far-apart")
    pbf = tmp / "andorra-liechtenstein.osm.pbf"
    merge_extracts([data_file("andorra/andorra.osm.pbf"),
                    data_file("liechtenstein/valhalla-liechtenstein-latest.osm.pbf")], pbf)
    inputs = resolve_inputs(str(pbf), settings, places=str(data_file("world/geonames-cities500.txt.gz")),
                            progress=NullProgress())
    inputs.admin1 = data_file("world/geonames_admin1.json")
    path = build(inputs, tmp / "bundle", settings, progress=NullProgress())
    engine = geoengine.open(path, settings=settings)
    engine.warm()  # the server's start-up: every structure it makes at start is made now
    return engine


def test_bundle_spans_both_parts(two_parts):
    lon0, lat0, lon1, lat1 = two_parts.bundle.bbox
    assert lon0 < 2.0 and lon1 > 9.0  # the box spans the 8 degrees between the parts


def test_routes_in_both_parts_equal_dijkstra(two_parts):
    router = two_parts.router
    prof = router.profile("auto")
    oracle = Oracle(prof)
    pts = random_points(two_parts.graph, prof.usable, 400, seed=17)
    checked = {"west": 0, "east": 0}
    for side, pick in (("west", pts[:, 0] < SPLIT_LON), ("east", pts[:, 0] > SPLIT_LON)):
        part = pts[pick][:40]
        for a, b in zip(part[0::2], part[1::2], strict=True):
            try:
                cands, pieces = router.route_legs(prof, locs([a, b]))
            except NoRoute:
                continue
            want = oracle.best(cands[0], cands[1])
            assert want is not None
            assert pieces[0].cost == pytest.approx(want[0], rel=1e-9, abs=1e-6)
            assert pieces[0].length_m == pytest.approx(want[2], abs=0.11)
            checked[side] += 1
    assert checked["west"] >= 8 and checked["east"] >= 8
    # and through the public API (the plain-route kernel), routes in each part
    for pick in (pts[:, 0] < SPLIT_LON, pts[:, 0] > SPLIT_LON):
        lengths = []
        for a, b in zip(pts[pick][0:20:2], pts[pick][1:20:2], strict=True):
            try:
                doc = two_parts.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}])
            except NoRoute:
                continue
            lengths.append(doc["trip"]["summary"]["length"])
        assert len(lengths) >= 5 and min(lengths) > 0


def test_no_route_between_the_parts(two_parts):
    prof = two_parts.router.profile("auto")
    pts = random_points(two_parts.graph, prof.usable, 200, seed=5)
    a = pts[pts[:, 0] < SPLIT_LON][0]
    b = pts[pts[:, 0] > SPLIT_LON][0]
    with pytest.raises(NoRoute):
        two_parts.route(locations=[{"lon": a[0], "lat": a[1]}, {"lon": b[0], "lat": b[1]}])


def test_snapping_grid_follows_the_data(two_parts):
    """The grid of the whole is the size of the grids of its two parts built alone (the same pieces),
    and the map matcher reads that same grid (no second one)."""
    sn = two_parts.router.snapper
    grid = sn.grid
    lon, lat, a = np.asarray(sn.lon), np.asarray(sn.lat), np.asarray(sn.piece_a)
    west = lon[a] < SPLIT_LON
    parts = [PieceGrid(lon, lat, a[west]), PieceGrid(lon, lat, a[~west])]
    assert west.any() and (~west).any()
    alone = sum(p.nbytes for p in parts)
    assert grid.nbytes <= 1.2 * alone
    assert grid.n_cells <= 1.2 * sum(p.n_cells for p in parts)
    # what a uniform 100 m grid over the box would be, for scale: a thousand times more cells
    box_cells = (np.ptp(lon) * 111_195 * np.cos(np.radians(lat.mean())) / 100) * (np.ptp(lat) * 111_195 / 100)
    assert grid.n_cells * 100 < box_cells
    assert two_parts.matcher._grid is grid.arrays
    assert two_parts.router.grid.grid is grid


def test_region_places_are_near_the_data(two_parts):
    """The GeoNames places the search stage counts as the bundle's region are those near its OSM data
    (Andorra's and Liechtenstein's), not every place of the box between them (Lyon, Geneva, Turin)."""
    from geoengine.search.documents import NEAR_DATA_DEG

    idx = two_parts.search_index
    region = np.load(two_parts.bundle.path / "search" / "region.npy").astype(bool)
    lon, lat = np.asarray(idx._lon, dtype=np.float64), np.asarray(idx._lat, dtype=np.float64)
    source = idx.cols["source"]
    geo = np.array([source[i] == "geonames" for i in range(len(lon))])
    osm = ~geo
    assert (region & geo).sum() >= 10  # Andorra la Vella, Vaduz, ...
    assert geo.sum() > (region & geo).sum()  # the world's important places, not of the region
    for i in np.flatnonzero(region & geo):
        d = np.maximum(np.abs(lon[osm] - lon[i]), np.abs(lat[osm] - lat[i])).min()
        assert d <= 2 * NEAR_DATA_DEG, (lon[i], lat[i])
