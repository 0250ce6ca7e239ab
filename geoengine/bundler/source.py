"""The `source` stage: describe the OSM extract (bbox, centre, object counts) for the manifest."""

from __future__ import annotations

import json

import osmium

from geoengine.bundler.pbfscan import scan_pbf
from geoengine.bundler.pipeline import BuildContext, Stage, StageResult


class _Counter(osmium.SimpleHandler):
    def __init__(self):
        super().__init__()
        self.nodes = self.ways = self.relations = 0
        self.min_lon = self.min_lat = 1e9
        self.max_lon = self.max_lat = -1e9

    def node(self, n):
        self.nodes += 1
        loc = n.location
        if loc.valid():
            lon, lat = loc.lon, loc.lat
            if lon < self.min_lon:
                self.min_lon = lon
            if lon > self.max_lon:
                self.max_lon = lon
            if lat < self.min_lat:
                self.min_lat = lat
            if lat > self.max_lat:
                self.max_lat = lat

    def way(self, w):
        self.ways += 1

    def relation(self, r):
        self.relations += 1


def _count(path) -> _Counter:
    """Object counts and the nodes' bbox: from the PBF blocks (geoengine.bundler.pbfscan), else osmium."""
    scan = scan_pbf(path)
    counter = _Counter()
    if scan is None:
        counter.apply_file(str(path))
        return counter
    counter.nodes, counter.ways, counter.relations = scan["nodes"], scan["ways"], scan["relations"]
    if scan["bbox"]:
        counter.min_lon, counter.min_lat, counter.max_lon, counter.max_lat = scan["bbox"]
    return counter


def describe_extract(path) -> dict:
    """bbox [min_lon, min_lat, max_lon, max_lat] (the header's, else the nodes'), centre and counts."""
    counter = _count(path)
    reader = osmium.io.Reader(str(path), osmium.osm.osm_entity_bits.NOTHING)
    try:
        box = reader.header().box()
    finally:
        reader.close()
    if box.valid():
        bbox = [box.bottom_left.lon, box.bottom_left.lat, box.top_right.lon, box.top_right.lat]
        bbox_from = "header"
    elif counter.nodes:
        bbox = [counter.min_lon, counter.min_lat, counter.max_lon, counter.max_lat]
        bbox_from = "nodes"
    else:
        bbox, bbox_from = None, "none"
    center = None
    if bbox:
        center = [round((bbox[0] + bbox[2]) / 2, 6), round((bbox[1] + bbox[3]) / 2, 6)]
    return {
        "bbox": [round(v, 7) for v in bbox] if bbox else None,
        "bbox_from": bbox_from,
        "center": center,
        "counts": {"nodes": counter.nodes, "ways": counter.ways, "relations": counter.relations},
    }


def run(ctx: BuildContext) -> StageResult:
    desc = describe_extract(ctx.inputs.osm)
    out = ctx.stage_dir("source")
    (out / "extract.json").write_text(json.dumps({"file": ctx.inputs.osm.name, **desc}, indent=2))
    return StageResult(
        outputs=["source/extract.json"],
        counts=desc["counts"],
        info={"bbox": desc["bbox"], "bbox_from": desc["bbox_from"], "center": desc["center"], "file": ctx.inputs.osm.name},
    )


STAGE = Stage(name="source", run=run, describe="describe the OSM extract: bbox, centre, object counts", isolated=True)
