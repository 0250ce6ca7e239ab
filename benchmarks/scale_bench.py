"""Scale benchmark: how the whole build's time, memory and output grow with the input, against OSRM.

    PYTHONPATH=. .venv/bin/python benchmarks/scale_bench.py [--copies 1 4 16 64] [--cache DIR]
        [--json FILE] [--no-osrm] [--valhalla] [--check] [--keep DIR]

For each N in --copies it makes an N-copy stitched extract of Liechtenstein with
../shared/tools/replicate_extract.py (a square grid of copies joined by trunk links: a simulation for
measuring cost growth only; N must be a square), cached in --cache (default /work/scale-cache, outside
the repo). Then, in the same run and on the same file:

- geoengine: `python -m geoengine build FILE --report R.json` in a child process. Per build step (the
  report's steps: startup, inputs, source, graph, elevation, routing, search, tiles, manifest, publish,
  plus `exit`: the child's wall after the report's last step), wall, CPU (workers included), peak RSS
  (each step's own high-water mark, see geoengine.bundler.measure; a stage runs in a process forked from
  the build, and its peak is that process's, workers included) and output bytes; the child's peak RSS
  from wait4, and the peak PSS of the whole process tree (the tiles workers share pages with the
  parent) polled from /proc every 0.2 s.
- OSRM (osrm-bindings, benchmarks/.peers/venv, car profile): osrm-extract then osrm-contract, each
  measured with wait4 (wall, CPU, peak RSS), and the size of the files they write.
- Valhalla (--valhalla; pyvalhalla in benchmarks/.peers/valhalla-venv): valhalla_build_tiles, wall,
  CPU, peak RSS and tile folder size.

Costs are also given per million input OSM nodes (memory net of the start-up footprint: for a forked
stage, of its own process's RSS when it started). `--check`
opens the largest bundle in a fresh process and checks it end to end (open time, a corner-to-corner
route, a proximity-biased search, a tile of the last copy). Figures go to --json (default
benchmarks/results/scale.json) and a table to stdout. Run it on an otherwise idle machine when you
can; when the machine is shared, only the ratios of the same run mean much.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BASE_PBF = SHARED / "data" / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf"
REPLICATE = SHARED / "tools" / "replicate_extract.py"
PEER_PY = ROOT / "benchmarks" / ".peers" / "venv" / "bin" / "python"
VALHALLA_PY = ROOT / "benchmarks" / ".peers" / "valhalla-venv" / "bin" / "python"
MB = 1 << 20


def extract_for(n: int, cache: Path) -> Path:
    if n == 1:
        return BASE_PBF
    side = math.isqrt(n)
    if side * side != n:
        raise SystemExit(f"--copies {n}: the replicated extract is a square grid, use a square number")
    dst = cache / f"liechtenstein-x{n}.osm.pbf"
    if not dst.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp.pbf")
        t = time.perf_counter()
        subprocess.run([sys.executable, str(REPLICATE), str(BASE_PBF), str(tmp), str(side)], check=True)
        os.replace(tmp, dst)
        print(f"  made {dst} in {time.perf_counter() - t:.0f} s", flush=True)
    return dst


def _tree_pids(root: int) -> list[int]:
    """root and its descendants (from /proc/*/stat parent ids)."""
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    parent[int(d)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, pp in parent.items() if pp == p)
    return out


def _pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# how often the tree's PSS is read: a read walks each process's page tables (smaps_rollup), about 18 ms of
# CPU a poll of an update's five processes at 16 copies; every 0.2 s it took about 9 % of a core from what
# it measured (0.3 s of an update's 4.5 s wall)
POLL_SECONDS = 0.5


def run_measured(cmd: list[str], *, env=None, cwd=None, log: Path | None = None) -> dict:
    """Run `cmd`; wall, CPU (children included), peak RSS of the child (wait4) and peak tree PSS."""
    out = open(log, "wb") if log else subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    peak = [0.0]
    stop = threading.Event()

    def poll():
        while not stop.wait(POLL_SECONDS):
            total = sum(_pss_mb(p) for p in _tree_pids(proc.pid))
            peak[0] = max(peak[0], total)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if log:
        out.close()
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log else ""
        raise RuntimeError(f"{cmd[0]} {' '.join(cmd[1:3])} failed ({proc.returncode}): {tail}")
    return {"seconds": round(wall, 3), "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3),
            "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "tree_peak_pss_mb": round(peak[0], 1)}


def dir_bytes(paths) -> int:
    total = 0
    for p in paths:
        p = Path(p)
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def run_geoengine(pbf: Path, work: Path) -> dict:
    env = dict(os.environ)
    env.setdefault("GEOENGINE_HOME", str(work / "home"))
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".geoengine" / "numba-cache"))
    env["PYTHONPATH"] = str(ROOT)
    report = work / "report.json"
    bundle = work / "bundle"
    res = run_measured([sys.executable, "-m", "geoengine", "build", str(pbf), "--out", str(bundle),
                        "--report", str(report)], env=env, log=work / "geoengine.log")
    rep = json.loads(report.read_text())
    steps = rep["steps"]
    accounted = sum(s["seconds"] for k, s in steps.items() if k != "remove_replaced_version")
    if "process_seconds" in rep:  # between named steps (argument parsing, resolving inputs) and at exit
        steps["unnamed"] = {"seconds": round(max(0.0, rep["process_seconds"] - accounted), 3)}
        steps["exit"] = {"seconds": round(max(0.0, res["seconds"] - rep["process_seconds"]), 3)}
    else:
        steps["exit"] = {"seconds": round(max(0.0, res["seconds"] - accounted), 3)}
    manifest = json.loads((bundle / "manifest.json").read_text())
    res["steps"] = steps
    _whole_peak(res)
    res["startup_rss_mb"] = _baseline_mb(steps)
    res["bundle_bytes"] = dir_bytes([bundle.resolve()])
    res["input_nodes"] = manifest["stages"]["source"]["counts"]["nodes"]
    res["graph_counts"] = {k: manifest["stages"]["graph"]["counts"][k] for k in ("nodes", "edges")}
    res["bundle"] = str(bundle)
    return res


def run_osrm(pbf: Path, work: Path) -> dict:
    if not PEER_PY.exists():
        return {"error": f"{PEER_PY} missing: python -m venv benchmarks/.peers/venv && "
                         "benchmarks/.peers/venv/bin/pip install osrm-bindings"}
    base = Path(subprocess.run([str(PEER_PY), "-c", "import osrm, os; print(os.path.dirname(osrm.__file__))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    d = work / "osrm"
    d.mkdir(parents=True, exist_ok=True)
    src = d / "region.osm.pbf"
    src.symlink_to(pbf)
    threads = str(os.cpu_count() or 1)
    ext = run_measured([str(base / "bin/osrm-extract"), "-p", str(base / "share/profiles/car.lua"), str(src),
                        "-t", threads], log=d / "extract.log")
    con = run_measured([str(base / "bin/osrm-contract"), str(d / "region.osrm"), "-t", threads],
                       log=d / "contract.log")
    files = [p for p in d.iterdir() if p.name.startswith("region.osrm")]
    return {"extract": ext, "contract": con, "seconds": round(ext["seconds"] + con["seconds"], 3),
            "cpu_seconds": round(ext["cpu_seconds"] + con["cpu_seconds"], 3),
            "peak_rss_mb": max(ext["peak_rss_mb"], con["peak_rss_mb"]), "output_bytes": dir_bytes(files),
            "threads": int(threads)}


def run_valhalla(pbf: Path, work: Path) -> dict:
    if not VALHALLA_PY.exists():
        return {"error": f"{VALHALLA_PY} missing (pip install pyvalhalla there)"}
    d = work / "valhalla"
    (d / "tiles").mkdir(parents=True, exist_ok=True)
    cfg = d / "valhalla.json"
    subprocess.run([str(VALHALLA_PY), "-c", (
        "import json, sys\nfrom valhalla import get_config\n"
        f"c = get_config(tile_extract='', tile_dir={str(d / 'tiles')!r}, verbose=False)\n"
        f"c['mjolnir']['concurrency'] = {os.cpu_count() or 1}\n"
        f"open({str(cfg)!r}, 'w').write(json.dumps(c))")], check=True)
    binary = subprocess.run([str(VALHALLA_PY), "-c", "import valhalla, os; print(os.path.join("
                             "os.path.dirname(valhalla.__file__), 'bin', 'valhalla_build_tiles'))"],
                            check=True, capture_output=True, text=True).stdout.strip()
    res = run_measured([binary, "-c", str(cfg), str(pbf)], log=d / "build.log")
    res["output_bytes"] = dir_bytes([d / "tiles"])
    return res


CHECK = r"""
import json, sys, time
t0 = time.perf_counter()
import geoengine
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
eng = geoengine.open(sys.argv[1])
info = eng.info()
t_open = time.perf_counter() - t0
n = int(sys.argv[2]); side = int(n ** 0.5)
out = {"open_seconds": round(t_open, 3), "import_seconds": round(t_import, 3)}
# Vaduz (the same place in every copy): first and last copy
vaduz = (9.5209, 47.1410)
sys_span = (float(sys.argv[3]), float(sys.argv[4]))
def copy_point(i, j):
    return {"lon": vaduz[0] + i * sys_span[0], "lat": vaduz[1] + j * sys_span[1]}
a, b = copy_point(0, 0), copy_point(side - 1, side - 1)
eng.route(locations=[a, copy_point(0, 0) | {"lat": a["lat"] + 0.01}], costing="auto")  # compile/load kernels once
t0 = time.perf_counter()
try:
    r = eng.route(locations=[a, b], costing="auto")
    s = r["trip"]["summary"]
    out["route"] = {"ok": True, "length_km": s["length"], "time_s": s["time"], "seconds": round(time.perf_counter() - t0, 3)}
except Exception as exc:
    out["route"] = {"ok": False, "error": repr(exc)[:300]}
last = copy_point(side - 1, side - 1)
try:
    res = eng.search("Landstrasse", lat=last["lat"], lon=last["lon"], size=5)
    hits = res.get("results", [])
    top = [hits[0]["location"]["lon"], hits[0]["location"]["lat"]] if hits else None
    out["search"] = {"ok": bool(top) and abs(top[0] - last["lon"]) < sys_span[0] / 2 and abs(top[1] - last["lat"]) < sys_span[1] / 2,
                     "top": top, "name": hits[0]["name"] if hits else None, "total": res.get("total")}
except Exception as exc:
    out["search"] = {"ok": False, "error": repr(exc)[:300]}
try:
    import gzip, math
    import mapbox_vector_tile
    z = 14
    lon, lat = last["lon"], last["lat"]
    x = int((lon + 180) / 360 * 2 ** z)
    y = int((1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * 2 ** z)
    sid = json.load(open(sys.argv[1] + "/manifest.json"))["stages"]["tiles"]["info"]["source"]
    data = eng.tiles.get(sid, z, x, y)
    tile = mapbox_vector_tile.decode(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    out["tile"] = {"ok": bool(tile), "z": z, "x": x, "y": y, "layers": sorted(tile)}
except Exception as exc:
    out["tile"] = {"ok": False, "error": repr(exc)[:300]}
print(json.dumps(out))
"""


def check_bundle(bundle: Path, n: int) -> dict:
    """Open the bundle in a fresh process and check it end to end (see CHECK)."""
    span = _copy_span()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("NUMBA_CACHE_DIR", str(ROOT / ".geoengine" / "numba-cache"))  # compiled kernels, as a server has
    p = subprocess.run([sys.executable, "-c", CHECK, str(bundle), str(n), str(span[0]), str(span[1])],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": p.stderr[-1500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _copy_span() -> tuple[float, float]:
    """The replicator's shift between copies: the road nodes' span times 1.02 (see replicate_extract.py)."""
    import numpy as np
    import osmium

    road = ("primary", "secondary", "tertiary", "trunk", "motorway", "unclassified", "residential")
    ids = []
    for w in osmium.FileProcessor(str(BASE_PBF), osmium.osm.WAY):
        if w.tags.get("highway") in road:
            ids.extend(n.ref for n in w.nodes)
    want = set(ids)
    xs, ys = [], []
    for nd in osmium.FileProcessor(str(BASE_PBF), osmium.osm.NODE):
        if nd.id in want:
            xs.append(nd.location.lon)
            ys.append(nd.location.lat)
    return float(np.ptp(xs)) * 1.02, float(np.ptp(ys)) * 1.02


def _whole_peak(ge: dict) -> None:
    """The build's peak RSS: the largest step peak. wait4's ru_maxrss alone is not it, because the
    pipeline resets the high-water mark at each step (it then reports the last steps' peak)."""
    steps = ge["steps"]
    ge.setdefault("wait4_peak_rss_mb", ge["peak_rss_mb"])
    ge["peak_rss_mb"] = max([ge["wait4_peak_rss_mb"]] + [s["peak_rss_mb"] for k, s in steps.items()
                                                         if "peak_rss_mb" in s and k != "startup"])


def _baseline_mb(steps: dict) -> float:
    """The process's start-up footprint: its RSS once the stage modules are imported (numpy, numba,
    shapely...), i.e. when the first stage starts."""
    for name in ("source", "inputs", "load_stages"):
        if "rss_start_mb" in steps.get(name, {}):
            return steps[name]["rss_start_mb"]
    return steps.get("startup", {}).get("peak_rss_mb", 0.0)


def per_million(res: dict, nodes: int) -> dict:
    m = nodes / 1e6
    base = _baseline_mb(res["steps"])
    out = {}
    for name, s in res["steps"].items():
        row = {"seconds_per_mnode": round(s["seconds"] / m, 3)}
        if "cpu_seconds" in s:
            row["cpu_seconds_per_mnode"] = round(s["cpu_seconds"] / m, 3)
        if "peak_rss_mb" in s and name not in ("startup", "load_stages", "exit", "unnamed"):
            # a stage forked from the build process starts from what it shares with it (its own start)
            start = s.get("process_rss_start_mb", base)
            row["net_peak_mb_per_mnode"] = round(max(0.0, s["peak_rss_mb"] - start) / m, 2)
        out[name] = row
    return out


def fmt_row(cells, widths):
    return " ".join(str(c).rjust(w) for c, w in zip(cells, widths, strict=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--cache", type=Path, default=Path("/work/scale-cache"))
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "scale.json")
    ap.add_argument("--no-osrm", action="store_true")
    ap.add_argument("--valhalla", action="store_true", help="also run valhalla_build_tiles (slow)")
    ap.add_argument("--check", action="store_true", help="check the largest bundle end to end")
    ap.add_argument("--keep", type=Path, help="keep work folders (bundles, OSRM files) under this folder")
    ap.add_argument("--check-bundle", type=Path, metavar="BUNDLE", help="only check BUNDLE (made from --copies N)")
    ap.add_argument("--markdown", type=Path, metavar="JSON",
                    help="print the tables of an earlier run's JSON as Markdown (for docs/scale.md) and exit")
    args = ap.parse_args(argv)
    if args.check_bundle:
        print(json.dumps(check_bundle(args.check_bundle, args.copies[0]), indent=2))
        return 0
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0

    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "load_avg_at_start": os.getloadavg()},
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": []}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    for n in args.copies:
        pbf = extract_for(n, args.cache)
        work = Path(tempfile.mkdtemp(prefix=f"scale-x{n}-", dir=args.keep))
        print(f"== {n} copies: {pbf.name} ({pbf.stat().st_size / MB:.1f} MB)", flush=True)
        run = {"copies": n, "pbf": str(pbf), "pbf_bytes": pbf.stat().st_size}
        try:
            ge = run_geoengine(pbf, work)
            run["geoengine"] = ge
            nodes = ge["input_nodes"]
            run["input_nodes"] = nodes
            ge["per_mnode"] = per_million(ge, nodes)
            print(f"  geoengine {ge['seconds']:.1f} s, cpu {ge['cpu_seconds']:.1f} s, peak RSS {ge['peak_rss_mb']:.0f} MB "
                  f"(tree PSS {ge['tree_peak_pss_mb']:.0f} MB), bundle {ge['bundle_bytes'] / MB:.0f} MB", flush=True)
            if not args.no_osrm:
                o = run_osrm(pbf, work)
                run["osrm"] = o
                if "error" not in o:
                    print(f"  osrm extract+contract {o['seconds']:.1f} s, peak RSS {o['peak_rss_mb']:.0f} MB, "
                          f"files {o['output_bytes'] / MB:.0f} MB", flush=True)
                    run["ratios"] = {
                        "wall_vs_osrm": round(ge["seconds"] / o["seconds"], 2),
                        "cpu_vs_osrm": round(ge["cpu_seconds"] / o["cpu_seconds"], 2),
                        "peak_rss_vs_osrm_extract": round(ge["peak_rss_mb"] / o["extract"]["peak_rss_mb"], 2),
                        "tree_pss_vs_osrm_extract": round(ge["tree_peak_pss_mb"] / o["extract"]["peak_rss_mb"], 2),
                        "bundle_vs_osrm_files": round(ge["bundle_bytes"] / o["output_bytes"], 2),
                    }
                else:
                    print(f"  osrm: {o['error']}")
            if args.valhalla:
                run["valhalla"] = run_valhalla(pbf, work)
            if args.check and n == max(args.copies):
                run["check"] = check_bundle(Path(ge["bundle"]), n)
                print(f"  check: {json.dumps(run['check'])}", flush=True)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        results["runs"].append(run)
        args.json.write_text(json.dumps(results, indent=2))
        _print_steps(run)
    _print_summary(results)
    print(f"figures: {args.json}")
    return 0


def _print_steps(run: dict) -> None:
    ge = run["geoengine"]
    w = (24, 9, 9, 10, 11, 10, 12)
    print(fmt_row(["step", "wall s", "cpu s", "peak MB", "output MB", "s/Mnode", "net MB/Mnode"], w))
    for name, s in ge["steps"].items():
        pm = ge["per_mnode"].get(name, {})
        print(fmt_row([name, f"{s['seconds']:.1f}", f"{s.get('cpu_seconds', 0):.1f}",
                       f"{s['peak_rss_mb']:.0f}" if "peak_rss_mb" in s else "-",
                       f"{s.get('output_bytes', 0) / MB:.1f}", f"{pm.get('seconds_per_mnode', 0):.2f}",
                       pm.get("net_peak_mb_per_mnode", "-")], w))


def _print_summary(results: dict) -> None:
    w = (7, 9, 8, 11, 10, 10, 10, 10, 9, 9)
    print(fmt_row(["copies", "PBF MB", "Mnodes", "ge wall s", "ge peak", "ge bundle", "osrm s", "osrm peak",
                   "osrm MB", "wall x"], w))
    for r in results["runs"]:
        ge, o = r["geoengine"], r.get("osrm", {})
        print(fmt_row([r["copies"], f"{r['pbf_bytes'] / MB:.1f}", f"{r['input_nodes'] / 1e6:.2f}",
                       f"{ge['seconds']:.1f}", f"{ge['peak_rss_mb']:.0f}", f"{ge['bundle_bytes'] / MB:.0f}",
                       f"{o['seconds']:.1f}" if "seconds" in o else "-",
                       f"{o['extract']['peak_rss_mb']:.0f}" if "extract" in o else "-",
                       f"{o['output_bytes'] / MB:.0f}" if "output_bytes" in o else "-",
                       r.get("ratios", {}).get("wall_vs_osrm", "-")], w))


def markdown(results: dict) -> str:
    """The run's summary table and per-step table of each run, in Markdown."""
    lines = ["| copies | PBF MB | OSM nodes (M) | geoengine wall s / CPU s | geoengine peak RSS MB (tree PSS) | bundle MB "
             "| OSRM extract+contract wall s / CPU s | OSRM extract peak RSS MB | OSRM files MB | wall / CPU ratio | peak ratio "
             "| size ratio |", "|" + "---|" * 12]
    for r in results["runs"]:
        _whole_peak(r["geoengine"])
        if "extract" in r.get("osrm", {}):
            q = r.setdefault("ratios", {})
            q["peak_rss_vs_osrm_extract"] = round(r["geoengine"]["peak_rss_mb"] / r["osrm"]["extract"]["peak_rss_mb"], 2)
            q["cpu_vs_osrm"] = round(r["geoengine"]["cpu_seconds"] / r["osrm"]["cpu_seconds"], 2)
    for r in results["runs"]:
        ge, o, q = r["geoengine"], r.get("osrm", {}), r.get("ratios", {})
        lines.append(
            f"| {r['copies']} | {r['pbf_bytes'] / MB:.1f} | {r['input_nodes'] / 1e6:.2f} "
            f"| {ge['seconds']:.0f} / {ge['cpu_seconds']:.0f} | {ge['peak_rss_mb']:.0f} ({ge['tree_peak_pss_mb']:.0f}) "
            f"| {ge['bundle_bytes'] / MB:.0f} "
            + (f"| {o['seconds']:.1f} / {o['cpu_seconds']:.1f} | {o['extract']['peak_rss_mb']:.0f} | {o['output_bytes'] / MB:.0f} "
               if "extract" in o else "| - | - | - ")
            + f"| {q.get('wall_vs_osrm', '-')} / {q.get('cpu_vs_osrm', '-')} | {q.get('peak_rss_vs_osrm_extract', '-')} | {q.get('bundle_vs_osrm_files', '-')} |")
    for r in results["runs"]:
        ge = r["geoengine"]
        ge["per_mnode"] = per_million(ge, r["input_nodes"])
        lines += ["", f"{r['copies']} copies ({r['input_nodes'] / 1e6:.2f} M nodes), per step:", "",
                  "| step | wall s | CPU s | peak RSS MB | output MB | wall s per M nodes | CPU s per M nodes "
                  "| net peak MB per M nodes |", "|---|---|---|---|---|---|---|---|"]
        for name, st in ge["steps"].items():
            pm = ge["per_mnode"].get(name, {})
            lines.append(f"| {name} | {st['seconds']:.1f} | {st.get('cpu_seconds', 0):.1f} "
                         f"| {st['peak_rss_mb']:.0f} | " if "peak_rss_mb" in st else f"| {name} | {st['seconds']:.1f} | - | - | ")
            lines[-1] += (f"{st.get('output_bytes', 0) / MB:.1f} | {pm.get('seconds_per_mnode', 0):.2f} "
                          f"| {pm.get('cpu_seconds_per_mnode', '-')} | {pm.get('net_peak_mb_per_mnode', '-')} |")
    lines += ["", projection(results)]
    return "\n".join(lines)


TARGETS = {"Germany (~420 M nodes)": 420.0, "planet (~9,500 M nodes)": 9500.0}


def _fit(points: list[tuple[float, float]], at: float) -> float:
    """Value at `at` on the line through the two largest of (M nodes, value) points (one point: through 0)."""
    pts = sorted(points)[-2:]
    if len(pts) == 1 or pts[1][0] == pts[0][0]:
        return pts[-1][1] / pts[-1][0] * at
    (x0, y0), (x1, y1) = pts
    slope = max(0.0, (y1 - y0) / (x1 - x0))
    return y1 + slope * (at - x1)


def projection(results: dict) -> str:
    """Linear projection (the line through the two largest runs: a fixed part plus a cost per million
    nodes) of each step's CPU time, peak memory and output size; OSRM's extract+contract the same way."""
    runs = sorted(results["runs"], key=lambda x: x["input_nodes"])
    used = runs[-2:]
    names = ", ".join(f"{r['copies']}-copy" for r in used)
    lines = [f"Projected linearly through the {names} runs (a fixed part plus a cost per million nodes). CPU "
             "seconds, not wall (wall depends on how many cores a step uses and how busy the machine is; on "
             "two idle cores the tiles stage's wall is about CPU/2). Peak memory is the step's peak RSS, so "
             "the build's projected peak is the largest step's.", "",
             "| step | " + " | ".join(f"{t}: CPU h / peak GB / disk GB" for t in TARGETS) + " |",
             "|---|" + "---|" * len(TARGETS)]
    last = used[-1]["geoengine"]["steps"]
    stages = [k for k, s in last.items() if "output_bytes" in s and all(k in r["geoengine"]["steps"] for r in used)]
    peak_total = dict.fromkeys(TARGETS, 0.0)

    def pts(fn):
        return [(r["input_nodes"] / 1e6, fn(r)) for r in used]

    for name in stages:
        cells = []
        for t, mn in TARGETS.items():
            cpu = _fit(pts(lambda r, n=name: r["geoengine"]["steps"][n]["cpu_seconds"]), mn)
            peak = _fit(pts(lambda r, n=name: r["geoengine"]["steps"][n]["peak_rss_mb"]), mn) / 1024
            disk = _fit(pts(lambda r, n=name: r["geoengine"]["steps"][n]["output_bytes"]), mn) / 2**30
            peak_total[t] = max(peak_total[t], peak)
            cells.append(f"{cpu / 3600:.1f} / {peak:.1f} / {disk:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **whole build** | " + " | ".join(
        f"**{_fit(pts(lambda r: r['geoengine']['cpu_seconds']), mn) / 3600:.1f} / {peak_total[t]:.1f} / "
        f"{_fit(pts(lambda r: r['geoengine']['bundle_bytes']), mn) / 2**30:.1f}**" for t, mn in TARGETS.items()) + " |")
    if all("extract" in r.get("osrm", {}) for r in used):
        lines.append("| OSRM extract+contract (car) | " + " | ".join(
            f"{_fit(pts(lambda r: r['osrm']['cpu_seconds']), mn) / 3600:.1f} / "
            f"{_fit(pts(lambda r: r['osrm']['extract']['peak_rss_mb']), mn) / 1024:.1f} / "
            f"{_fit(pts(lambda r: r['osrm']['output_bytes']), mn) / 2**30:.1f}" for mn in TARGETS.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
