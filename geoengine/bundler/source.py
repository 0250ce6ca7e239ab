"""The `source` stage: describe the OSM extract (bbox, centre, object counts, the data's replication
timestamp and sequence) for the manifest, and keep a copy of it in the bundle (`source/extract.osm.pbf`,
what `geoengine update` applies change files to)."""

from __future__ import annotations

import json
import shutil

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
        header = reader.header()
        box = header.box()
        replication = replication_header(header)
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
        **replication,
    }


def replication_header(header) -> dict:
    """The data's timestamp (ISO 8601) and replication sequence and URL from an OSM file header (the
    osmosis_replication_* fields Geofabrik's extracts, pyosmium-up-to-date and `geoengine update` write);
    None where absent."""
    ts = header.get("osmosis_replication_timestamp") or header.get("timestamp") or None
    seq = header.get("osmosis_replication_sequence_number") or ""
    return {
        "data_timestamp": ts,
        "replication_sequence": int(seq) if seq.strip().isdigit() else None,
        "replication_url": header.get("osmosis_replication_base_url") or None,
    }


#: the copy of the extract a bundle keeps (geoengine update applies change files to it)
EXTRACT = "extract.osm.pbf"


def run(ctx: BuildContext) -> StageResult:
    desc = describe_extract(ctx.inputs.osm)
    out = ctx.stage_dir("source")
    (out / "extract.json").write_text(json.dumps({"file": ctx.inputs.osm.name, **desc}, indent=2))
    outputs = ["source/extract.json"]
    if ctx.inputs.osm.name.endswith(".pbf"):  # an .osm/.osm.gz/.bz2 input is not kept (update needs a PBF)
        shutil.copyfile(ctx.inputs.osm, out / EXTRACT)
        outputs.append(f"source/{EXTRACT}")
    info = {"bbox": desc["bbox"], "bbox_from": desc["bbox_from"], "center": desc["center"], "file": ctx.inputs.osm.name}
    info.update({k: desc[k] for k in ("data_timestamp", "replication_sequence", "replication_url")})
    return StageResult(outputs=outputs, counts=desc["counts"], info=info)


STAGE = Stage(name="source", run=run, describe="describe the OSM extract: bbox, centre, object counts; keep a copy",
              isolated=True, needs=("input:osm",))
