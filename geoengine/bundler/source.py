"""The `source` stage: describe the OSM extract (bbox, centre, object counts, the data's replication
timestamp and sequence) for the manifest, and keep a copy of it in the bundle (`source/extract.osm.pbf`,
what `geoengine update` applies change files to) with its object store (`source/store/`,
geoengine.bundler.middle: what an update checks a change against and finds node locations in)."""

from __future__ import annotations

import json
import shutil

import osmium

from geoengine.bundler import middle
from geoengine.bundler.middle import EXTRACT  # noqa: F401  (the copy of the extract a bundle keeps)
from geoengine.bundler.middle import FOLDER as STORE
from geoengine.bundler.pbfscan import scan_pbf
from geoengine.bundler.pipeline import BuildContext, Stage, StageResult, link_file


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


def _count(path, scan=None) -> _Counter:
    """Object counts and the nodes' bbox: from the PBF blocks (geoengine.bundler.pbfscan, or its `scan`
    of the file), else osmium."""
    scan = scan or scan_pbf(path)
    counter = _Counter()
    if scan is None:
        counter.apply_file(str(path))
        return counter
    counter.nodes, counter.ways, counter.relations = scan["nodes"], scan["ways"], scan["relations"]
    if scan["bbox"]:
        counter.min_lon, counter.min_lat, counter.max_lon, counter.max_lat = scan["bbox"]
    return counter


def describe_extract(path, scan: dict | None = None, header_of: tuple | None = None) -> dict:
    """bbox [min_lon, min_lat, max_lon, max_lat] (the header's, else the nodes'), centre and counts.
    `scan`: pbfscan.scan_pbf's figures of the file when the caller has them. `header_of` (a file
    `geoengine update` is still writing, `path` unread): (a file whose header box it copies, the
    header fields it sets)."""
    counter = _count(path, scan)
    reader = osmium.io.Reader(str(header_of[0] if header_of else path), osmium.osm.osm_entity_bits.NOTHING)
    try:
        header = reader.header()
        box = header.box()
        replication = replication_header(header_of[1] if header_of else header)
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


def run(ctx: BuildContext) -> StageResult:
    pbf = ctx.inputs.osm.name.endswith(".pbf")  # an .osm/.osm.gz/.bz2 input is not kept (update needs a PBF)
    out = ctx.stage_dir("source")
    stored = []
    scan = None
    if pbf:
        writer = middle.StoreWriter(out / STORE)
        scan = scan_pbf(ctx.inputs.osm, sink=writer)
        if scan is not None:
            stored = [f"source/{STORE}/{f}" for f in writer.close()]
        else:  # not a PBF this scanner reads: osmium counts it, and the bundle has no store
            shutil.rmtree(out / STORE)
    return _finish(ctx, out, describe_extract(ctx.inputs.osm, scan), pbf, stored)


def _finish(ctx: BuildContext, out, desc: dict, pbf: bool, stored: list[str], link: bool = False,
            later: bool = False) -> StageResult:
    (out / "extract.json").write_text(json.dumps({"file": ctx.inputs.osm.name, **desc}, indent=2))
    outputs = ["source/extract.json"]
    links = {}
    if pbf:
        if later:  # the update's new extract, still being written: linked by the build when it is
            links[f"source/{EXTRACT}"] = str(ctx.inputs.osm)
        else:  # the update's own new extract is linked; a user's file is copied (it may be rewritten in place)
            (link_file if link else shutil.copyfile)(ctx.inputs.osm, out / EXTRACT)
        outputs.append(f"source/{EXTRACT}")
    outputs += stored
    info = {"bbox": desc["bbox"], "bbox_from": desc["bbox_from"], "center": desc["center"], "file": ctx.inputs.osm.name}
    info.update({k: desc[k] for k in ("data_timestamp", "replication_sequence", "replication_url")})
    return StageResult(outputs=outputs, counts=desc["counts"], info=info, links=links)


def patch(ctx: BuildContext, p) -> StageResult | None:
    """`geoengine update`'s partial rebuild: the object store patched with the change (no pass over the
    new extract: its counts and, without a header box, its bbox come from the patched store), the new
    extract linked. Where the update writes the new extract beside the stages (`PatchInputs.new_header`),
    its header is the old extract's box and the update's fields, and the build links the file once it
    is written (`StageResult.links`)."""
    if p.store is None or p.osc is None or not ctx.inputs.osm.name.endswith(".pbf"):
        return None
    out = ctx.stage_dir("source")
    stored = [f"source/{STORE}/{f}" for f in p.store.write_patched(out / STORE, p.osc)]
    new = middle.Store.open(out / STORE)
    scan = {"nodes": new.count("n"), "ways": new.count("w"), "relations": new.count("r"), "bbox": new.bbox()}
    later = p.new_header is not None
    header_of = (p.old_extract, p.new_header) if later else None
    return _finish(ctx, out, describe_extract(ctx.inputs.osm, scan, header_of), True, stored, link=True, later=later)


STAGE = Stage(name="source", run=run, describe="describe the OSM extract: bbox, centre, object counts; keep a copy "
              "and its object store", isolated=True, needs=("input:osm",), patch=patch)
