"""The build pipeline: named stages, a manifest, `--continue`, and atomic publication.

A build works in `<out parent>/.<out name>.build/`. After each stage it records the stage in
`progress.json` there, so `--continue` resumes after the last finished stage (when the inputs are
unchanged). When every stage is done it writes `manifest.json`, moves the work folder to a fresh
version folder `.<out name>.<build id>/`, and switches `out` (a symlink) to it with one atomic
rename. A failed or interrupted build never touches the published bundle.
"""

from __future__ import annotations

import fcntl
import gc
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from geoengine import __version__
from geoengine.bundle import FORMAT, FORMAT_VERSION, STAGE_VERSIONS, Bundle
from geoengine.bundler import heap
from geoengine.bundler.isolate import fork_safe, run_forked, share_kernel_context, start_forked
from geoengine.bundler.measure import StepMeter, dir_bytes, peak_mb, reset_peak, rss_mb
from geoengine.config import Settings
from geoengine.errors import BuildError, InvalidRequest
from geoengine.progress import NullProgress, Progress


@dataclass
class StageResult:
    """What a stage made: `outputs` (paths relative to the bundle), `counts`, and free-form `info`."""

    outputs: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    # files the build hard-links into the bundle (path relative to it -> file) once its inputs are all
    # written (`PatchInputs.wait_extract`: an update writes its new extract beside the stages)
    links: dict[str, str] = field(default_factory=dict)


@dataclass
class BuildInputs:
    osm: Path
    dem: list[Path] = field(default_factory=list)
    places: Path | None = None
    admin1: Path | None = None
    region: str | None = None

    def listed(self) -> list[tuple[str, Path]]:
        items = [("osm", self.osm)]
        items += [("dem", p) for p in self.dem]
        if self.places:
            items.append(("places", self.places))
        if self.admin1:
            items.append(("admin1", self.admin1))
        return items


@dataclass
class BuildContext:
    """Handed to each stage. `out` is the work folder; a stage writes only under `out / stage name`."""

    out: Path
    inputs: BuildInputs
    settings: Settings
    progress: Progress
    results: dict[str, dict]  # manifest entries of stages finished so far (source first)

    @property
    def bbox(self) -> tuple[float, float, float, float] | None:
        src = self.results.get("source", {})
        bbox = src.get("info", {}).get("bbox")
        return tuple(bbox) if bbox else None

    def stage_dir(self, name: str) -> Path:
        d = self.out / name
        d.mkdir(parents=True, exist_ok=True)
        return d


@dataclass(frozen=True)
class PatchInputs:
    """What a stage's `patch` gets besides the build context: the bundle being updated (`old`), the
    stage's folder and manifest entry there, the extract before and after, the change files applied,
    and what they hold (`changes`: geoengine.bundler.update.Changes; per type "n", "w", "r" the ids
    changed (`low`/`high`: lowest and highest version in the files, 1 = created) and `deleted`).

    `osc` (geoengine.bundler.osc.OscObjects): the changed objects themselves, newest version each, with
    tags, locations, refs and members. `store`: the old bundle's object store (geoengine.bundler.middle;
    None for a bundle built before it), behind `locations`.

    `wait_extract` (None: `new_extract` is written): the update writes the new extract in its own
    process beside the stages, which read it only to run in full; the build calls this before any stage
    runs in full and before it publishes (it returns when the file is written, or raises the writer's
    error). Meanwhile the extract's content is known by `extract_id` (a hash of the old extract's and the
    change files' hashes: stage keys use it) and its header by `new_header` (the fields the update sets;
    its box is the old extract's)."""

    old: Bundle
    old_extract: Path
    new_extract: Path
    files: tuple[Path, ...]
    changes: object
    osc: object = None
    store: object = None
    wait_extract: Callable[[], None] | None = None
    extract_id: str | None = None
    new_header: dict | None = None
    # the new extract's bbox where the update knows it before the source stage reports it (the old one,
    # or grown by new nodes: middle.Store.bbox_after): stages that read only the bbox of the source stage
    # may then be patched before it ends (checked against its result)
    bbox: tuple | None = None

    def locations(self, ids) -> tuple:
        """(lon, lat, found) of any nodes in the NEW extract (after the change): float64 arrays equal to
        osmium's Location.lon/.lat (NaN where not found) and a bool array. No pass over the extract: the
        old bundle's object store overlaid with the change's nodes. Raises LookupError when the old
        bundle keeps no store (a patch then declines)."""
        from geoengine.bundler.middle import locations

        if self.store is None or self.osc is None:
            raise LookupError(f"bundle {self.old.path.name} keeps no object store (source/store): built before it")
        return locations(self.store, self.osc, ids)

    def old_dir(self, stage: str) -> Path:
        return self.old.path / stage

    def old_entry(self, stage: str) -> dict:
        return self.old.stages.get(stage, {})


@dataclass(frozen=True)
class Stage:
    """A named build step. `isolated`: run it in a forked child process (geoengine.bundler.isolate), so
    the memory it leaves behind (heap fragments, loaded kernels, caches) goes with it; the built-in
    stages are, a stage that must change the building process's state is not."""

    name: str
    run: Callable[[BuildContext], StageResult]
    applies: Callable[[BuildContext], bool] = lambda ctx: True
    describe: str = ""
    isolated: bool = False
    # What the stage's output depends on, for reuse by `geoengine update` (stage_key): None (the
    # default, always safe) is every input file, the region, the settings and every earlier stage;
    # a stage that reads less names it: "input:ROLE" (the files of that role), "stage:NAME" (that
    # stage's output files, by content hash), "bbox" (the source stage's bbox), "region", "settings"
    # (the build settings, BUILD_SETTINGS). In an update, a stage that names what it reads may be
    # patched while earlier stages it does not read still run (`_ready`).
    needs: tuple[str, ...] | None = None
    # A partial rebuild for `geoengine update`: called instead of `run` when the stage's inputs changed
    # and the update has a bundle to patch; it writes the stage's full output (reusing what it can of
    # `patch.old_dir`) and returns its result, or None to fall back to `run` (the change is too large,
    # or not of a kind it can patch). Its output must equal what `run` would write on the new inputs.
    patch: Callable[[BuildContext, PatchInputs], StageResult | None] | None = None
    # Subfolders of the stage's folder that hold records it keeps for its `patch` (what it read from the
    # extract), not output another stage reads: left out of its `output_sha256`, so a rerun whose output
    # is the same still lets the stages that name it be reused.
    kept: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        return STAGE_VERSIONS[self.name]


#: the settings a build reads (a stage with the default `needs` is rebuilt when one of them changed)
BUILD_SETTINGS = ("search_places",)


def stage_key(stage: Stage, input_docs: list[dict], ctx: BuildContext) -> str:
    """The content hash of what `stage` reads (its `needs`): equal keys, equal outputs. Stages before it
    are in `ctx.results`; a named stage counts by its output files' hash, the default by their keys."""
    doc: dict = {"stage": stage.name, "version": stage.version, "geoengine": __version__}
    if stage.needs is None:
        doc["inputs"] = [(d["role"], Path(d["path"]).name, _content(d)) for d in input_docs]
        doc["region"] = ctx.inputs.region
        doc["settings"] = {k: getattr(ctx.settings, k, None) for k in BUILD_SETTINGS}
        doc["stages"] = {name: e.get("input_key") for name, e in ctx.results.items()}
    else:
        for need in stage.needs:
            kind, _, what = need.partition(":")
            if kind == "input":
                doc[need] = [(Path(d["path"]).name, _content(d)) for d in input_docs if d["role"] == what]
            elif kind == "stage":
                doc[need] = ctx.results.get(what, {}).get("output_sha256")
            elif need == "bbox":
                doc[need] = ctx.bbox
            elif need == "region":
                doc[need] = ctx.inputs.region
            elif need == "settings":
                doc[need] = {k: getattr(ctx.settings, k, None) for k in BUILD_SETTINGS}
            else:
                raise ValueError(f"stage {stage.name}: unknown need '{need}'")
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _content(doc: dict) -> str:
    """An input's content hash: its file's sha256, or the identity of an extract an update still writes."""
    return doc.get("sha256") or doc["derived_sha256"]


def tree_sha256(root: Path, skip: tuple[str, ...] = ()) -> str:
    """The content hash of every file under `root` (relative paths and bytes, in path order), but those
    under the subfolders `skip` names."""
    h = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    if skip:
        files = [p for p in files if p.relative_to(root).parts[0] not in skip]
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def link_tree(src: Path, dst: Path) -> None:
    """`dst` gets every file of `src` as a hard link (a bundle's files are never changed in place, so
    two versions may share them), or a copy across file systems."""
    for dirpath, _dirs, files in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            link_file(Path(dirpath) / name, dst / rel / name)


def link_file(src: Path, dst: Path) -> None:
    """`dst` as a hard link to `src`, or a copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False))
    os.replace(tmp, path)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"geoengine": __version__, "python": platform.python_version()}
    for dist in ("numpy", "numba", "scipy", "osmium", "rtree", "rapidfuzz", "mapbox-vector-tile", "shapely"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def resolve_inputs(
    target: str,
    settings: Settings,
    *,
    dem: list[str] | None = None,
    places: str | None = None,
    progress: Progress | None = None,
) -> BuildInputs:
    """A region name (fetched into the cache) or a path to an OSM extract, plus optional DEM/places."""
    from geoengine.bundler.fetch import fetch_region, load_regions

    path = Path(target).expanduser()
    catalog = load_regions()
    if path.suffix in (".pbf", ".osm", ".gz", ".bz2") or path.exists():
        if not path.exists():
            raise InvalidRequest.field("target", f"OSM extract {path} does not exist")
        inputs = BuildInputs(osm=path.resolve())
    elif target.lower() in catalog.regions:
        files = fetch_region(target.lower(), settings, progress)
        inputs = BuildInputs(
            osm=files["osm"][0],
            dem=files.get("dem", []),
            places=(files.get("places") or [None])[0],
            admin1=(files.get("admin1") or [None])[0],
            region=target.lower(),
        )
    else:
        known = ", ".join(sorted(catalog.regions))
        raise InvalidRequest.field("target", f"'{target}' is neither an OSM extract file nor a known region ({known})")
    if dem:
        for d in dem:
            if not Path(d).exists():
                raise InvalidRequest.field("dem", f"DEM file {d} does not exist")
        inputs.dem = [Path(d).resolve() for d in dem]
    if places:
        if not Path(places).exists():
            raise InvalidRequest.field("places", f"places file {places} does not exist")
        inputs.places = Path(places).resolve()
    return inputs


def default_out(inputs: BuildInputs, settings: Settings) -> Path:
    name = inputs.region or inputs.osm.name.split(".")[0]
    return Path(settings.bundles_dir) / name


def build(
    inputs: BuildInputs,
    out: Path,
    settings: Settings,
    *,
    resume: bool = False,
    progress: Progress | None = None,
    stages: list[Stage] | None = None,
    report: dict | None = None,
    reuse: Bundle | None = None,
    manifest_extra: dict | None = None,
    keep_replaced: bool = False,
    patch: PatchInputs | None = None,
) -> Path:
    """Run every applicable stage into a work folder and publish it at `out`. Returns `out`.

    With `reuse` (a published bundle), a stage whose inputs have the same content hash as that
    bundle's stage (`stage_key`) is not run: its files are hard-linked from there (`geoengine update`).
    With `patch` too (an update: the change files and the extracts), a stage whose inputs changed and
    that has a `patch` method tries it first (a partial rebuild), and runs in full when it returns None.
    `manifest_extra` adds top-level keys to the manifest; `keep_replaced`: see `publish`.

    Every step (hashing the inputs, each stage, the manifest, publication, removing the replaced
    version) is measured (wall, CPU, peak RSS, output bytes; see geoengine.bundler.measure): the stages'
    figures go into the manifest, and all of them into `report["steps"]` when a dict is passed."""
    from geoengine.bundler.fetch import sha256_file
    from geoengine.bundler.stages import all_stages

    progress = progress or NullProgress()
    steps: dict[str, dict] = {} if report is None else report.setdefault("steps", {})
    with StepMeter() as m:
        stages = stages if stages is not None else all_stages()  # imports the stage modules (numba, ...)
        if fork_safe() and any(s.isolated for s in stages):
            share_kernel_context()  # made once here, not in each forked stage
    steps["load_stages"] = m.record()
    out = Path(out).expanduser().absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.build"
    lock_path = out.parent / f".{out.name}.lock"
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BuildError(f"another build of {out} is running") from None
        started = time.time()
        with StepMeter() as m:
            input_docs = []
            for role, p in inputs.listed():
                if patch is not None and patch.wait_extract is not None and p == patch.new_extract:
                    # still being written: its identity (the old extract's and the changes'), its size later
                    input_docs.append({"role": role, "path": str(p), "size": None, "sha256": None,
                                       "derived_sha256": patch.extract_id})
                    continue
                input_docs.append({"role": role, "path": str(p), "size": p.stat().st_size, "sha256": sha256_file(p)})
        steps["inputs"] = m.record()
        links: dict[str, str] = {}

        def inputs_written() -> None:
            """Wait for an input the update still writes; then record its size and link what waited for it."""
            if patch is None or patch.wait_extract is None:
                return
            patch.wait_extract()
            for d in input_docs:
                if d["size"] is None:
                    d["size"] = Path(d["path"]).stat().st_size
            for rel, src in links.items():
                if not (work / rel).exists():
                    link_file(Path(src), work / rel)

        plan = {
            "inputs": [(d["role"], _content(d)) for d in input_docs],
            "stage_versions": {s.name: s.version for s in stages},
        }
        state_path = work / "progress.json"
        state = None
        if resume and state_path.exists():
            state = json.loads(state_path.read_text())
            if state.get("plan") != json.loads(json.dumps(plan)):
                progress.log(f"inputs or stage versions changed since the interrupted build of {out}; starting over")
                state = None
            else:
                done = ", ".join(state["stages"]) or "none"
                progress.log(f"continuing the build of {out}; finished stages: {done}")
        if state is None:
            if work.exists():
                shutil.rmtree(work)
            work.mkdir(parents=True)
            state = {"plan": plan, "stages": {}}
            _write_json_atomic(state_path, state)
        ctx = BuildContext(out=work, inputs=inputs, settings=settings, progress=progress, results=state["stages"])
        hashed = {need.partition(":")[2] for s in stages for need in (s.needs or ()) if need.startswith("stage:")}
        reused, rebuilt, patched = [], [], []
        # an update's patches are small next to a full run: a stage whose needs are met is patched in its
        # own process while the stages before it still run (at most EARLY_PATCHES at once)
        early: dict[str, tuple] = {}
        early_ok = reuse is not None and patch is not None and fork_safe()
        foreseen = early_ok and patch.bbox is not None  # the bbox is known before the source stage's result

        def start_early(after: int) -> None:
            for later in reversed(stages[after:]):  # the last stages first: tiles and search are the largest
                if len(early) >= EARLY_PATCHES:
                    return
                known = "source" in state["stages"] or not foreseen
                seen = ctx if known else replace(ctx, results={**ctx.results,
                                                               "source": {"info": {"bbox": list(patch.bbox)}}})
                if (later.name in early or later.name in state["stages"] or later.patch is None
                        or not later.isolated or not _ready(later, seen.results) or not later.applies(ctx)):
                    continue
                k = stage_key(later, input_docs, seen)
                prior = reuse.stages.get(later.name)
                if prior is not None and prior.get("input_key") == k:
                    continue  # reused, below
                if (work / later.name).exists():
                    shutil.rmtree(work / later.name)
                early[later.name] = (start_forked(_patch_early, later, seen, patch), k, time.perf_counter(),
                                     None if known else patch.bbox)

        def check_foreseen() -> None:
            """The source stage has reported the bbox: patches started with the foreseen one go on when
            it is the same, and start again otherwise."""
            for name in [n for n, job in early.items() if job[3] is not None]:
                job = early[name]
                if ctx.bbox is not None and list(ctx.bbox) == list(job[3]):
                    early[name] = job[:3] + (None,)
                else:
                    job[0].kill()
                    del early[name]
                    progress.log(f"[{name}] started again: the bbox is not the one foreseen")

        try:
            for i, stage in enumerate(stages):
                if early_ok:
                    if "source" in state["stages"]:
                        check_foreseen()
                    start_early(i + 1)
                if stage.name in state["stages"]:
                    progress.log(f"[{stage.name}] already built, skipped")
                    continue
                if not stage.applies(ctx):
                    progress.log(f"[{stage.name}] not applicable to these inputs, skipped")
                    continue
                stage_path = work / stage.name
                job = early.pop(stage.name, None)  # (its process, its key, when it started)
                if job is None and stage_path.exists():
                    shutil.rmtree(stage_path)
                key = job[1] if job is not None else stage_key(stage, input_docs, ctx)
                before = reuse.stages.get(stage.name) if reuse is not None else None
                if before is not None and before.get("input_key") == key:
                    with StepMeter() as m:
                        link_tree(reuse.path / stage.name, stage_path)
                    steps[stage.name] = cost = m.record()
                    state["stages"][stage.name] = {**before, "seconds": cost["seconds"], "cost": cost,
                                                   "reused_from": reuse.path.name}
                    _write_json_atomic(state_path, state)
                    reused.append(stage.name)
                    progress.log(f"[{stage.name}] inputs unchanged (content hash): reused from {reuse.path.name}")
                    continue
                progress.task(stage.name)
                child = None
                how = "built"
                with StepMeter() as m:
                    try:
                        result = None
                        if reuse is not None and patch is not None and stage.patch is not None:
                            if job is not None:
                                (result, shown, own, lines), child = job[0].wait()
                                for line in lines:
                                    progress.log(line)
                            elif stage.isolated and fork_safe():
                                (result, shown, own), child = run_forked(_patch_in_child, stage, ctx, patch)
                                progress.restore(shown)
                            else:
                                result = stage.patch(ctx, patch)
                            if result is not None:
                                how = "patched"
                            else:  # the stage declined: its folder starts again empty for the full run
                                child = None
                                if stage_path.exists():
                                    shutil.rmtree(stage_path)
                                progress.log(f"[{stage.name}] cannot be patched for these changes")
                        if result is None:
                            inputs_written()  # a full run reads the inputs
                            if reuse is not None:
                                progress.log(f"[{stage.name}] inputs changed: rebuilt in full")
                            if stage.isolated and fork_safe():
                                (result, shown, own), child = run_forked(_run_in_child, stage, ctx)
                                progress.restore(shown)
                            else:
                                result = stage.run(ctx)
                    except (BuildError, InvalidRequest):
                        raise
                    except Exception as exc:
                        raise BuildError(f"stage '{stage.name}' failed: {type(exc).__name__}: {exc}") from exc
                if reuse is not None:
                    (patched if how == "patched" else rebuilt).append(stage.name)
                    if how == "patched":
                        progress.log(f"[{stage.name}] inputs changed: patched from {reuse.path.name}")
                if child is None:  # (a forked stage's memory went with its process)
                    heap.release()  # what the stage freed goes back to the system before the next stage
                cost = m.record()
                if child is not None:  # the stage's own process (and its workers): its peak is the step's
                    cost["build_process_peak_rss_mb"] = cost["peak_rss_mb"]  # the waiting parent's, unchanged
                    cost["peak_rss_mb"] = round(max(child.peak_rss_mb, own["peak_mb"]), 1)  # the kernel's is lazy
                    cost["forked"] = True
                    cost["process_rss_start_mb"] = round(own["rss_start_mb"], 1)
                    cost["process_peak_rss_mb"] = round(own["peak_mb"], 1)
                if job is not None and how == "patched":  # patched in its own process while earlier stages ran
                    cost["waited_s"] = cost["seconds"]
                    cost["seconds"] = round(time.perf_counter() - job[2], 3)
                    cost["early"] = True
                cost["output_bytes"] = dir_bytes(stage_path)
                steps[stage.name] = cost
                secs = cost["seconds"]
                counts = ", ".join(f"{k}={v:,}" for k, v in result.counts.items())
                progress.done(counts, seconds=secs)  # the whole stage, even when it restarted the progress task
                state["stages"][stage.name] = {
                    "version": stage.version,
                    "outputs": result.outputs,
                    "counts": result.counts,
                    "info": result.info,
                    "seconds": secs,
                    "cost": cost,
                    "input_key": key,
                    **({"patched_from": reuse.path.name} if how == "patched" else {}),
                }
                links.update(result.links)
                if stage.name in hashed:  # a later stage reads it by content (early cut-off of an update)
                    if result.links:
                        inputs_written()
                    state["stages"][stage.name]["output_sha256"] = tree_sha256(stage_path, stage.kept)
                _write_json_atomic(state_path, state)
        finally:
            for job in early.values():  # a stage failed: the patches started early go too
                job[0].kill()
        inputs_written()
        m = StepMeter().__enter__()
        source_info = state["stages"].get("source", {}).get("info", {})
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "geoengine_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": inputs.region,
            "bbox": source_info.get("bbox"),
            "center": source_info.get("center"),
            "inputs": input_docs,
            # the OSM data's age: the extract's replication header (geoengine update writes it)
            "data_timestamp": source_info.get("data_timestamp"),
            "replication_sequence": source_info.get("replication_sequence"),
            "replication_url": source_info.get("replication_url"),
            **(manifest_extra or {}),
            "stages": state["stages"],
            "versions": _versions(),
            "timings": {
                "total_seconds": round(time.time() - started, 3),
                **{name: s["seconds"] for name, s in state["stages"].items()},
            },
        }
        _write_json_atomic(work / "manifest.json", manifest)
        state_path.unlink()
        m.__exit__(None, None, None)
        steps["manifest"] = m.record()
        with StepMeter() as m:
            published = publish(work, out, steps=steps, keep_replaced=keep_replaced)
        steps["publish"] = m.record()
        total = time.time() - started
        if report is not None:
            report["build_seconds"] = round(total, 3)
            if reuse is not None:
                report["stages_reused"], report["stages_rebuilt"] = reused, rebuilt
                report["stages_patched"] = patched
        named = ", ".join(f"{k} {v['seconds']:.1f}" for k, v in steps.items() if k != "remove_replaced_version")
        progress.log(f"built {out} in {total:.1f}s: {named}")
        return published


def _run_in_child(stage: Stage, ctx: BuildContext) -> tuple[StageResult, dict, dict]:
    """A stage in its forked process: its result, what its progress line showed last, and the
    process's own RSS at its start and peak (MiB; the start is what it shares with the parent)."""
    reset_peak()
    rss0 = rss_mb()
    result = stage.run(ctx)
    return result, ctx.progress.shown(), {"rss_start_mb": rss0, "peak_mb": max(peak_mb(), rss0)}


EARLY_PATCHES = 2  # stage patches run at once beside the stage in the foreground (an update)


def _ready(stage: Stage, done: dict) -> bool:
    """Whether everything `stage` reads exists: it names what it reads (`needs`), the stages it names
    are done, and the source stage (its bbox) is, where it reads that. A stage that names nothing reads
    every earlier stage."""
    if stage.needs is None:
        return False
    for need in stage.needs:
        kind, _, what = need.partition(":")
        if (kind == "stage" and what not in done) or (need == "bbox" and "source" not in done):
            return False
    return True


class _Recorder(Progress):
    """The progress of a stage patched early (beside another stage): its log lines, shown when the
    build reaches the stage; its updates are not shown."""

    def __init__(self, name: str):
        super().__init__(quiet=True)
        self.restore({"name": name, "total": None, "last": 0.0})
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


def _patch_early(stage: Stage, ctx: BuildContext, patch: PatchInputs):
    """`_patch_in_child` for a stage patched early: its log lines recorded, returned with its result."""
    rec = _Recorder(stage.name)
    result, shown, own = _patch_in_child(stage, replace(ctx, progress=rec), patch)
    return result, shown, own, rec.lines


def _patch_in_child(stage: Stage, ctx: BuildContext, patch: PatchInputs) -> tuple[StageResult | None, dict, dict]:
    """`_run_in_child` for a stage's `patch`."""
    reset_peak()
    rss0 = rss_mb()
    # a patch's own process: the cyclic collector off while it runs (its objects are freed by reference
    # counting; a patch makes hundreds of thousands of strings and tuples, none in a cycle, and each
    # collection walked them: about 6 % of the search patch's CPU). The process ends with the patch.
    gc.disable()
    result = stage.patch(ctx, patch)
    return result, ctx.progress.shown(), {"rss_start_mb": rss0, "peak_mb": max(peak_mb(), rss0)}


def _version_dirs(out: Path) -> list[Path]:
    """The version folders `publish` made for `out` (`.NAME.YYYYmmddTHHMMSS-hex`)."""
    pat = re.compile(rf"^\.{re.escape(out.name)}\.\d{{8}}T\d{{6}}-[0-9a-f]{{6}}$")
    return [p for p in out.parent.iterdir() if pat.match(p.name) and p.is_dir()]


def publish(work: Path, out: Path, steps: dict | None = None, keep_replaced: bool = False) -> Path:
    """Move `work` to a new version folder and point `out` at it atomically.

    The replaced version (and any older one) is removed, unless `keep_replaced` (`geoengine update`):
    then it stays until the next publication, so a server still on the replaced version may open files
    of it (a tile thread's first connection, say) until it has switched."""
    build_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{secrets.token_hex(3)}"
    version_dir = out.parent / f".{out.name}.{build_id}"
    os.replace(work, version_dir)
    old_target = None
    if out.is_symlink():
        old_target = out.parent / os.readlink(out)
    elif out.exists():
        # A real folder from elsewhere: move it aside, then take its place.
        aside = out.parent / f".{out.name}.replaced-{build_id}"
        os.replace(out, aside)
        old_target = aside
    link_tmp = out.parent / f".{out.name}.link-{build_id}"
    os.symlink(version_dir.name, link_tmp)
    os.replace(link_tmp, out)
    keep = {version_dir.resolve()}
    if keep_replaced and old_target is not None:
        keep.add(old_target.resolve())
    stale = [p for p in _version_dirs(out) if p.resolve() not in keep]
    if old_target is not None and old_target.exists() and old_target.resolve() not in keep and old_target not in stale:
        stale.append(old_target)  # a real folder moved aside, or a link to a folder named otherwise
    if stale:
        # Servers holding the old version keep their open (memory-mapped) files until they reopen.
        with StepMeter() as m:
            for p in stale:
                shutil.rmtree(p, ignore_errors=True)
        if steps is not None:
            steps["remove_replaced_version"] = m.record()
    return out
