"""The tile patch on an extract with coastlines (Helsinki: the sea splits `earth` and makes the `ocean`
polygon from every coastline). A change away from the coast leaves land and sea as they were: the tiles
are patched, and equal a full build's byte for byte. A change that moves a coastline's node declines the
patch (the split needs every coastline again), and the full run gives the full build's tiles."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import osmium
import pytest

from geoengine.bundle import Bundle
from geoengine.bundler.pipeline import BuildInputs, build
from geoengine.bundler.update import apply_changes, update
from geoengine.progress import NullProgress
from tests.conftest import data_file

from .conftest import archive_tiles, publish_copy

HELSINKI = "helsinki/helsinki.osm.pbf"
WHEN = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _change(src: Path, out: Path, centre, count: int, coast: bool) -> list[int]:
    """The `count` ways (coastlines only, or none of them) whose first node in the extract lies nearest
    `centre`, each with a new name and that node moved ~5 m, as a change file; returns the ways' ids."""
    loc = {}
    for n in osmium.FileProcessor(str(src), osmium.osm.NODE):
        loc[n.id] = (n.location.lon, n.location.lat)
    ways = []
    for w in osmium.FileProcessor(str(src), osmium.osm.WAY):
        first = next((n.ref for n in w.nodes if n.ref in loc), None)  # (a clipped way may lack some)
        if (w.tags.get("natural") == "coastline") == coast and len(w.nodes) >= 2 and first is not None:
            x, y = loc[first]
            d = math.hypot((x - centre[0]) * math.cos(math.radians(centre[1])), y - centre[1])
            ways.append((d, first, w.replace(version=w.version + 1, timestamp=WHEN, nodes=[n.ref for n in w.nodes],
                                             tags={**dict(w.tags), "name": "Päivitystie"})))
    ways.sort(key=lambda t: t[0])
    chosen = [w for _, _, w in ways[:count]]
    firsts = {f for _, f, _ in ways[:count]}
    writer = osmium.SimpleWriter(str(out))
    try:
        for n in osmium.FileProcessor(str(src), osmium.osm.NODE).with_filter(osmium.filter.IdFilter(firsts)):
            writer.add_node(n.replace(version=n.version + 1, timestamp=WHEN,
                                      location=(n.location.lon + 0.00005, n.location.lat + 0.00004)))
        for w in sorted(chosen, key=lambda w: w.id):
            writer.add_way(w)
    finally:
        writer.close()
    return [w.id for w in chosen]


@pytest.fixture(scope="module")
def coast_bundle(tmp_path_factory, upd_settings) -> Path:
    return build(BuildInputs(osm=data_file(HELSINKI)), tmp_path_factory.mktemp("coast") / "h", upd_settings,
                 progress=NullProgress())


@pytest.mark.parametrize("coast", [False, True], ids=["inland", "coastline"])
def test_tiles_of_an_extract_with_coastlines(coast_bundle, upd_settings, tmp_path, coast):
    src = data_file(HELSINKI)
    tiles_info = Bundle.open(coast_bundle).stages["tiles"]
    assert tiles_info["counts"]["features_water"] > 0
    changed = _change(src, tmp_path / "change.osc.gz", (24.93, 60.17), 1 if coast else 30, coast)
    assert changed
    out = publish_copy(coast_bundle, tmp_path)
    res = update(out, upd_settings, diffs=[tmp_path / "change.osc.gz"])
    new = tmp_path / "new.osm.pbf"
    apply_changes(src, [tmp_path / "change.osc.gz"], new, {})
    full = build(BuildInputs(osm=new), tmp_path / "full" / "h", upd_settings, progress=NullProgress())
    if coast:  # land and sea split again: the stage runs in full
        assert "tiles" in res["stages_rebuilt"]
    else:
        assert "tiles" in res["stages_patched"], res
        assert Bundle.open(out).stages["tiles"]["info"]["patch"]["tiles_recut"] > 0
    mine, theirs = archive_tiles(out), archive_tiles(full)
    assert mine == theirs
