"""`geoengine update BUNDLE`: apply OpenStreetMap change files to a bundle and publish the result.

1. The change files: `--diff FILE.osc[.gz|.bz2]` (repeatable, applied together; where one object
   changes in several, its newest version wins), or the diffs a replication server
   (`--replication URL`, laid out as planet.openstreetmap.org/replication/minute/ and Geofabrik's
   updates: `state.txt`, `000/001/234.osc.gz` and `000/001/234.state.txt`) published after the
   bundle's sequence (pyosmium's `osmium.replication.server.ReplicationServer`).
2. Checked before anything is built (`check_changes`): every file reads to its end (a truncated
   download is refused), and every changed object must follow the bundle's data: an object the
   extract has must come with a higher version (a lower or equal one means the diff is older than the
   bundle's data, or was applied already), an object it lacks must be new (version 1) unless
   `--allow-unknown` (a regional diff stream brings objects that moved into the region that way).
   A replication server whose newest sequence is older than the bundle's is refused too.
3. Applied to the extract the bundle keeps (`source/extract.osm.pbf`) with pyosmium's
   MergeInputReader, in libosmium: a new extract whose header carries the data's timestamp, the
   replication sequence and URL (read back by the source stage into the manifest's `data_timestamp`,
   `replication_sequence`, `replication_url`).
4. Built with `geoengine.bundler.pipeline.build(..., reuse=old bundle)`: a stage whose inputs have the
   content hash they had in the old bundle is hard-linked from it, the others are rebuilt in full
   (the progress says which), and the result is published atomically like a build, except that the
   replaced version stays until the next publication (pipeline.publish's keep_replaced) for servers
   still on it. A running `geoengine serve` picks the new version up by itself in each worker
   (geoengine.server.lifecycle: a watch on the published path) and swaps it in between requests.

Nothing is published when any step fails: the published bundle stays as it was.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from geoengine.bundle import Bundle
from geoengine.bundler.osc import OscObjects
from geoengine.errors import BuildError, BundleError
from geoengine.progress import NullProgress, Progress

CHANGE_SUFFIXES = (".osc", ".osc.gz", ".osc.bz2")
#: at most this many replication diffs per update (a bundle days behind a minutely stream: run it again)
MAX_DIFFS = 1440
EXAMPLES = 5  # ids named in an error


class UpdateError(BuildError):
    title = "Update failed"


@dataclass
class Changes:
    """What the change files hold: per type (n, w, r) the lowest and highest version of each id, which
    ids end deleted, and the newest object timestamp."""

    files: list[Path]
    low: dict[str, dict[int, int]] = field(default_factory=lambda: {"n": {}, "w": {}, "r": {}})
    high: dict[str, dict[int, int]] = field(default_factory=lambda: {"n": {}, "w": {}, "r": {}})
    deleted: dict[str, set[int]] = field(default_factory=lambda: {"n": set(), "w": set(), "r": set()})
    newest: dt.datetime | None = None
    osc: OscObjects = field(default_factory=OscObjects)  # the objects themselves, newest version each

    def counts(self) -> dict[str, dict[str, int]]:
        out = {}
        for t, name in (("n", "nodes"), ("w", "ways"), ("r", "relations")):
            low = self.low[t]
            created = sum(1 for i, v in low.items() if v == 1 and i not in self.deleted[t])
            out[name] = {"changed": len(low), "created": created, "deleted": len(self.deleted[t])}
        return out

    @property
    def empty(self) -> bool:
        return not any(self.low.values())


_KIND = {"n": "node", "w": "way", "r": "relation"}


def read_changes(files: list[Path]) -> Changes:
    """Read every change file to its end (pyosmium); UpdateError names a file that cannot be read."""
    import osmium

    changes = Changes(files=list(files))
    for path in files:
        if not path.exists():
            raise UpdateError(f"change file {path} does not exist")
        if not path.name.endswith(CHANGE_SUFFIXES):
            raise UpdateError(f"change file {path} is not an OsmChange file (.osc, .osc.gz or .osc.bz2)")
        try:
            for obj in osmium.FileProcessor(str(path)):
                t = obj.type_str()
                i, v = obj.id, obj.version
                low, high = changes.low[t], changes.high[t]
                if i not in low or v < low[i]:
                    low[i] = v
                if i not in high or v >= high[i]:
                    high[i] = v
                    if obj.deleted:
                        changes.deleted[t].add(i)
                    else:
                        changes.deleted[t].discard(i)
                changes.osc.add(obj)
                ts = obj.timestamp
                if ts is not None and ts.year > 1970 and (changes.newest is None or ts > changes.newest):
                    changes.newest = ts
        except Exception as exc:  # libosmium: gzip, XML and format errors
            raise UpdateError(f"change file {path} cannot be read (truncated or not OsmChange XML?): "
                              f"{type(exc).__name__}: {exc}") from None
    return changes


def existing_versions(extract: Path, changes: Changes, store=None) -> dict[str, dict[int, int]]:
    """The version, in `extract`, of every object the changes name: from the bundle's object store
    (geoengine.bundler.middle) when it has one, else a scan filtered in libosmium."""
    if store is not None:
        return {t: store.versions(t, changes.osc.ids(t)) for t in "nwr"}
    import osmium
    from osmium.filter import IdFilter

    entity = {"n": osmium.osm.NODE, "w": osmium.osm.WAY, "r": osmium.osm.RELATION}
    found: dict[str, dict[int, int]] = {"n": {}, "w": {}, "r": {}}
    wanted = [t for t in "nwr" if changes.low[t]]
    if not wanted:
        return found
    types = entity[wanted[0]]
    for t in wanted[1:]:
        types = types | entity[t]
    fp = osmium.FileProcessor(str(extract), types)
    for t in wanted:
        fp.with_filter(IdFilter(changes.low[t].keys()).enable_for(entity[t]))
    for obj in fp:
        found[obj.type_str()][obj.id] = obj.version
    return found


def check_changes(changes: Changes, have: dict[str, dict[int, int]], *, allow_unknown: bool = False,
                  tolerate_applied: bool = False) -> set[tuple[str, int]]:
    """Raise UpdateError when the changes do not follow the extract's data (see the module's doc).
    `tolerate_applied` (a replication start found by timestamp overlaps the data a little): an object
    whose newest change the extract already has is returned, to be left out of the merge (which would
    otherwise write the change file's version over the extract's newer one)."""
    older, unknown = [], []
    applied: set[tuple[str, int]] = set()
    for t in "nwr":
        for i, low in changes.low[t].items():
            v = have[t].get(i)
            if v is None:
                if low > 1 and not allow_unknown:
                    unknown.append(f"{_KIND[t]} {i} v{low}")
            elif v:  # 0: the extract has no versions, nothing to compare
                if tolerate_applied:
                    if changes.high[t][i] <= v:
                        applied.add((t, i))
                elif low <= v:
                    older.append(f"{_KIND[t]} {i} v{low} (the extract has v{v})")
    if older:
        raise UpdateError(
            f"the change files are older than the bundle's data or were applied already: {len(older)} object(s) "
            f"come with a version the extract already has or passed (e.g. {', '.join(older[:EXAMPLES])})")
    if unknown:
        raise UpdateError(
            f"the change files do not apply to this bundle's extract: {len(unknown)} changed object(s) are not in it "
            f"and are not new (e.g. {', '.join(unknown[:EXAMPLES])}); a diff for another region? "
            "(--allow-unknown takes them as new)")
    return applied


def leave_out(files: list[Path], skip: set[tuple[str, int]], out: Path) -> Path:
    """One change file with every object of `files` but those in `skip` (type, id)."""
    import osmium

    writer = osmium.SimpleWriter(str(out))
    try:
        for path in files:
            for obj in osmium.FileProcessor(str(path)):
                if (obj.type_str(), obj.id) not in skip:
                    writer.add(obj)
    finally:
        writer.close()
    return out


def apply_changes(extract: Path, files: list[Path], out: Path, header: dict[str, str]) -> None:
    """`extract` + the change files -> `out` (PBF), merged in libosmium; `header` adds header fields."""
    import osmium

    reader = osmium.io.Reader(str(extract))
    try:
        old = reader.header()
        h = osmium.io.Header()
        box = old.box()
        if box.valid():
            h.add_box(box)
        h.set("generator", "geoengine update (pyosmium)")
        for k, v in header.items():
            h.set(k, v)
        merge = osmium.MergeInputReader()
        for path in files:
            merge.add_file(str(path))
        # written without compression: 2.3x the size of a zlib PBF, written (and read again by the stages
        # that run in full, and by the next update) in a third of the time (0.5 s against 1.5 s of CPU at 16
        # copies of Liechtenstein); geoengine.bundler.pbfscan and osmium read it alike
        writer = osmium.io.Writer(osmium.io.File(str(out), "pbf,pbf_compression=none"), h)
        try:
            merge.apply_to_reader(reader, writer, False)
        finally:
            writer.close()
    finally:
        reader.close()


class _ApplyBeside:
    """`apply_changes` in a forked child, beside the build's stages: no stage patch reads the new extract
    (they read the object store and the change), so it is needed only by a stage that runs in full and
    by the published bundle (`PatchInputs.wait_extract`)."""

    def __init__(self, job, started: float, steps: dict, progress: Progress, text: str):
        self.job, self.started, self.steps, self.progress, self.text = job, started, steps, progress, text
        self.done = False

    @classmethod
    def start(cls, extract: Path, files: list[Path], out: Path, header: dict, steps: dict, progress: Progress,
              text: str) -> _ApplyBeside | None:
        """Start writing `out`; None where this process may not fork (then the caller applies)."""
        from geoengine.bundler.isolate import fork_safe, start_forked

        if not fork_safe():
            return None
        progress.log(f"applying {len(files)} change file(s) to {extract} beside the stages: {text}")
        return cls(start_forked(_apply_yielding, extract, files, out, header), time.perf_counter(), steps, progress,
                   text)

    def wait(self) -> None:
        """Return when the new extract is written; raise the writer's error."""
        if self.done:
            return
        t0 = time.perf_counter()
        try:
            _, used = self.job.wait()
        except BuildError:
            raise
        except Exception as exc:
            raise UpdateError(f"the change files could not be applied to the extract: {type(exc).__name__}: {exc}") \
                from exc
        finally:
            self.done = True
        now = time.perf_counter()
        self.steps["apply"] = {"seconds": round(now - self.started, 3), "cpu_seconds": round(used.cpu_seconds, 3),
                               "peak_rss_mb": round(used.peak_rss_mb, 1), "waited_s": round(now - t0, 3),
                               "beside_stages": True}
        self.progress.log(f"applied the change file(s) in {now - self.started:.1f}s (beside the stages)")

    def stop(self) -> None:
        if not self.done:
            self.job.kill()
            self.done = True


def foreseen_bbox(manifest: dict, store, changes) -> tuple | None:
    """The new extract's bbox as its source stage will report it, known before that stage: the header's
    box (copied from the old extract) or the nodes' box (`Store.bbox_after`: from the change's nodes);
    None where only the new store tells (a changed node held an extreme of the old box)."""
    info = manifest.get("stages", {}).get("source", {}).get("info", {})
    bbox, origin = info.get("bbox"), info.get("bbox_from")
    if not bbox or origin not in ("header", "nodes"):
        return None
    if origin == "nodes":
        bbox = store.bbox_after(changes.osc, bbox) if store is not None else None
    return tuple(round(v, 7) for v in bbox) if bbox else None


def _apply_yielding(extract: Path, files: list[Path], out: Path, header: dict) -> None:
    """`apply_changes` at a lower scheduling priority: the new extract is needed only when the build
    publishes (or runs a stage in full), so the stages' patches come first on a busy machine."""
    import os

    try:
        os.nice(10)
    except OSError:
        pass
    apply_changes(extract, files, out, header)


def extract_identity(manifest: dict, files: list[Path], header: dict) -> str:
    """The new extract's content, named before it is written: the old extract's (the bundle's osm input's
    hash, or its own identity) and the change files' hashes, with the header fields the update sets."""
    from geoengine.bundler.fetch import sha256_file

    old = next((d.get("sha256") or d.get("derived_sha256") for d in manifest.get("inputs", []) if d.get("role") == "osm"),
               None)
    doc = {"extract": old, "changes": [sha256_file(f) for f in files], "header": header}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass
class Fetched:
    files: list[Path]
    first: int
    last: int
    newest: int
    timestamp: dt.datetime


def fetch_replication(url: str, manifest: dict, into: Path, max_diffs: int = MAX_DIFFS,
                      progress: Progress | None = None) -> Fetched | None:
    """Download the diffs published after the bundle's sequence (or, without one, after its data
    timestamp) into `into`. None when the bundle is up to date; UpdateError when the server cannot be
    reached or is behind the bundle."""
    import requests
    from osmium.replication.server import ReplicationServer

    progress = progress or NullProgress()
    url = url.rstrip("/") + "/"
    have = manifest.get("replication_sequence")
    if manifest.get("replication_url") and manifest["replication_url"].rstrip("/") + "/" != url:
        have = None  # another stream's numbers: start from the data's timestamp
    with ReplicationServer(url) as server:
        server.set_request_parameter("timeout", 30)
        state = server.get_state_info()
        if state is None:
            raise UpdateError(f"the replication server {url} cannot be reached or has no readable state.txt")
        if have is not None:
            if state.sequence < have:
                raise UpdateError(f"the replication server {url} is at sequence {state.sequence}, older than the "
                                  f"bundle's {have}: the bundle's data is newer than this server's")
            start = have + 1
        else:
            ts = manifest.get("data_timestamp")
            if not ts:
                raise UpdateError("the bundle records neither a replication sequence nor a data timestamp: "
                                  "there is no place to start the replication from (rebuild from an extract "
                                  "with an osmosis_replication_* header)")
            when = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            found = server.timestamp_to_sequence(when)
            if found is None:
                raise UpdateError(f"the replication server {url} has no diff for the bundle's data timestamp {ts}")
            start = found  # the diff that holds the timestamp: it overlaps the data (check_changes tolerates)
        if start > state.sequence:
            return None
        last = min(state.sequence, start + max_diffs - 1)
        files = []
        into.mkdir(parents=True, exist_ok=True)
        for seq in range(start, last + 1):
            progress.update(seq - start + 1, f"of {last - start + 1} diffs downloaded")
            try:
                data = server.get_diff_block(seq)
            except (requests.RequestException, OSError) as exc:
                raise UpdateError(f"diff {seq} of the replication server {url} cannot be downloaded: {exc}") from None
            path = into / f"{seq:09d}.osc.gz"
            path.write_bytes(data)
            files.append(path)
        info = server.get_state_info(last)
        if info is None:
            raise UpdateError(f"the state file of diff {last} of the replication server {url} cannot be read")
    return Fetched(files=files, first=start, last=last, newest=state.sequence, timestamp=info.timestamp)


def _iso(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def update(
    bundle: str | Path,
    settings,
    *,
    diffs: list[str | Path] = (),
    replication: str | None = None,
    sequence: int | None = None,
    allow_unknown: bool = False,
    max_diffs: int = MAX_DIFFS,
    progress: Progress | None = None,
    report: dict | None = None,
) -> dict:
    """Apply change files (or a replication server's new diffs) to the published bundle at `bundle`
    and publish the result there. Returns what was done: `published` (bool), `reason` when nothing
    was, the changes' counts, the data's timestamp and sequence, and the stages reused and rebuilt."""
    from geoengine.bundler.measure import StepMeter
    from geoengine.bundler.middle import EXTRACT, Store
    from geoengine.bundler.middle import FOLDER as STORE
    from geoengine.bundler.pipeline import BuildInputs, PatchInputs, build

    progress = progress or NullProgress()
    steps: dict = {} if report is None else report.setdefault("steps", {})
    if bool(diffs) == bool(replication):
        raise UpdateError("give change files (--diff FILE, repeatable) or a replication server (--replication URL)")
    out = Path(bundle).expanduser().absolute()
    try:
        old = Bundle.open(out)
    except BundleError as exc:
        raise UpdateError(f"cannot update: {exc.detail}") from None
    extract = old.path / "source" / EXTRACT
    store = Store.open(old.path / "source" / STORE)
    if not extract.exists():
        raise UpdateError(f"bundle {out} keeps no OSM extract (source/{EXTRACT}): it was built by a geoengine "
                          "before updates, or from a file that is not a PBF; rebuild it once with `geoengine build`")
    m = old.manifest
    have_seq = m.get("replication_sequence")
    if sequence is not None and have_seq is not None and sequence <= have_seq:
        raise UpdateError(f"the change files are sequence {sequence}, not newer than the bundle's {have_seq}: "
                          "already applied, or older than the bundle's data")
    inputs = BuildInputs(osm=extract, region=m.get("region"))
    for doc in m.get("inputs", []):
        role, path = doc.get("role"), Path(doc.get("path", ""))
        if role == "osm":
            continue
        if not path.exists():
            raise UpdateError(f"the bundle's {role} input {path} is gone; the update needs every input the bundle "
                              "was built from (fetch it again, or rebuild)")
        if role == "dem":
            inputs.dem.append(path)
        elif role in ("places", "admin1"):
            setattr(inputs, role, path)
    scratch = out.parent / f".{out.name}.update"
    lock_path = out.parent / f".{out.name}.update.lock"
    started = time.time()
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UpdateError(f"another update of {out} is running") from None
        if scratch.exists():
            shutil.rmtree(scratch)
        scratch.mkdir(parents=True)
        writing = None
        try:
            header: dict[str, str] = {}
            record: dict = {"from": old.path.name, "from_created": m.get("created"), "extract": f"source/{EXTRACT}"}
            tolerate = False
            with StepMeter() as meter:
                if replication:
                    progress.task("replication")
                    got = fetch_replication(replication, m, scratch / "diffs", max_diffs, progress)
                    if got is None:
                        progress.log(f"{out} is up to date with {replication} (sequence {have_seq})")
                        return {"published": False, "reason": "up to date", "replication_sequence": have_seq,
                                "data_timestamp": m.get("data_timestamp")}
                    files = got.files
                    tolerate = have_seq is None or (m.get("replication_url") or "").rstrip("/") != replication.rstrip("/")
                    header = {"osmosis_replication_base_url": replication,
                              "osmosis_replication_sequence_number": str(got.last),
                              "osmosis_replication_timestamp": _iso(got.timestamp)}
                    record.update({"replication_url": replication, "sequences": [got.first, got.last],
                                   "server_newest": got.newest})
                    progress.done(f"diffs {got.first}-{got.last} (server at {got.newest})")
                else:
                    files = [Path(d).expanduser().absolute() for d in diffs]
                    record["diffs"] = [p.name for p in files]
            steps["download"] = meter.record()
            with StepMeter() as meter:
                changes = read_changes(files)
                if changes.empty:
                    raise UpdateError("the change files hold no changes")
                applied = check_changes(changes, existing_versions(extract, changes, store), allow_unknown=allow_unknown,
                                        tolerate_applied=tolerate)
                if applied:
                    files = [leave_out(files, applied, scratch / "changes.osc.gz")]
                    changes.osc.drop(applied)
            steps["check"] = meter.record()
            record["objects"] = changes.counts()
            record["already_applied"] = len(applied)
            if not replication:
                newest = changes.newest
                before = m.get("data_timestamp")
                stamp = _iso(newest) if newest else before
                if before and stamp and stamp < before:
                    stamp = before
                if stamp:
                    header["osmosis_replication_timestamp"] = stamp
                if sequence is not None:
                    header["osmosis_replication_sequence_number"] = str(sequence)
                    if m.get("replication_url"):
                        header["osmosis_replication_base_url"] = m["replication_url"]
            name = m.get("stages", {}).get("source", {}).get("info", {}).get("file") or EXTRACT
            new_extract = scratch / name  # the extract's own name: a tile source is named after it
            what = "; ".join(f"{k} {v['changed']:,} changed ({v['created']:,} new, {v['deleted']:,} deleted)"
                             for k, v in record["objects"].items())
            writing = _ApplyBeside.start(extract, files, new_extract, header, steps, progress, what)
            if writing is None:
                with StepMeter() as meter:
                    apply_changes(extract, files, new_extract, header)
                steps["apply"] = meter.record()
                progress.log(f"applied {len(files)} change file(s) to {extract} in {steps['apply']['seconds']:.1f}s: "
                             + what)
            inputs.osm = new_extract
            build_report: dict = {"steps": steps}
            beside = {} if writing is None else {"wait_extract": writing.wait, "new_header": header,
                                                 "extract_id": extract_identity(m, files, header)}
            patch = PatchInputs(old=old, old_extract=extract, new_extract=new_extract, files=tuple(files),
                                changes=changes, osc=changes.osc, store=store, bbox=foreseen_bbox(m, store, changes),
                                **beside)
            build(inputs, out, settings, progress=progress, report=build_report, reuse=old,
                  manifest_extra={"update": record}, keep_replaced=True, patch=patch)
        finally:
            if writing is not None:
                writing.stop()
            shutil.rmtree(scratch, ignore_errors=True)
    new = Bundle.open(out)
    result = {
        "published": True,
        "bundle": str(new.path),
        "replaced": old.path.name,
        "data_timestamp": new.manifest.get("data_timestamp"),
        "replication_sequence": new.manifest.get("replication_sequence"),
        "objects": record["objects"],
        "stages_reused": build_report.get("stages_reused", []),
        "stages_rebuilt": build_report.get("stages_rebuilt", []),
        "stages_patched": build_report.get("stages_patched", []),
        "seconds": round(time.time() - started, 3),
    }
    if report is not None:
        report.update({k: v for k, v in result.items() if k != "bundle"})
    return result
