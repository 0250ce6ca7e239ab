"""The `geoengine` command: fetch, build, update, serve, keys, info.

Every command has --help. Errors print one line `error: ...` and exit 1 (usage errors exit 2);
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from geoengine import __version__
from geoengine.config import Settings
from geoengine.errors import GeoengineError

#: how long `serve --workers N` waits for a (re)started worker to be ready (uvicorn's supervisor)
WORKER_READY_TIMEOUT_S = 120

def _settings(args) -> Settings:
    return Settings.from_env()


def cmd_fetch(args) -> int:
    from geoengine.bundler.fetch import fetch_region, load_regions
    from geoengine.progress import Progress

    catalog = load_regions()
    if args.list or not args.region:
        for name, region in catalog.regions.items():
            mark = " (default)" if name == catalog.default else ""
            print(f"{name:15s} {region.title}{mark}: " + ", ".join(f"{f.role}={f.path}" for f in region.files))
        return 0
    settings = _settings(args)
    if args.mirror:
        settings = Settings.from_env(data_mirror=args.mirror)
    files = fetch_region(args.region, settings, Progress(quiet=args.quiet))
    for role, paths in files.items():
        for p in paths:
            print(f"{role}\t{p}")
    return 0


def cmd_build(args) -> int:
    from geoengine.bundler.pipeline import build, default_out, resolve_inputs
    from geoengine.progress import Progress

    settings = _settings(args)
    progress = Progress(quiet=args.quiet)
    inputs = resolve_inputs(args.target, settings, dem=args.dem, places=args.places, progress=progress)
    out = Path(args.out) if args.out else default_out(inputs, settings)
    from geoengine.bundler import warmkit

    warmkit.start_in_background(progress.log)  # the one-time compile, on the other core (docs/setup.md)
    report: dict | None = None
    if args.report:
        from geoengine.bundler.measure import process_age_s, rss_mb

        # start-up (interpreter, imports) counts as a step of its own
        report = {"steps": {"startup": {"seconds": round(process_age_s(), 3), "peak_rss_mb": round(rss_mb(), 1)}}}
    path = build(inputs, out, settings, resume=args.resume, progress=progress, report=report)
    if not getattr(args, "no_warm", False):
        from geoengine.bundler.measure import StepMeter

        with StepMeter() as m:
            _warm_bundle(path, settings, progress.log)
        if report is not None:
            report["steps"]["warm"] = m.record()
    if report is not None:
        from geoengine.bundler.measure import process_age_s

        report["process_seconds"] = round(process_age_s(), 3)  # the rest of the wall is interpreter exit
        Path(args.report).write_text(json.dumps(report, indent=2))
    print(path)
    return 0


def cmd_update(args) -> int:
    from geoengine.bundler.update import update
    from geoengine.progress import Progress

    settings = _settings(args)
    progress = Progress(quiet=args.quiet)
    report: dict | None = {} if args.report else None
    result = update(args.bundle, settings, diffs=args.diff or [], replication=args.replication, sequence=args.sequence,
                    allow_unknown=args.allow_unknown, max_diffs=args.max_diffs, progress=progress, report=report)
    if report is not None:
        Path(args.report).write_text(json.dumps(report, indent=2))
    if not result["published"]:
        progress.log(f"nothing to do: {result['reason']}")
        print(Path(args.bundle).absolute())
        return 0
    progress.log(f"published {args.bundle}: data of {result['data_timestamp']}"
                 + (f", replication sequence {result['replication_sequence']}" if result["replication_sequence"] else "")
                 + f"; stages rebuilt in full: {', '.join(result['stages_rebuilt']) or 'none'}; patched: "
                 + f"{', '.join(result['stages_patched']) or 'none'}; reused: "
                 + f"{', '.join(result['stages_reused']) or 'none'} ({result['seconds']:.1f}s)")
    print(Path(args.bundle).absolute())
    return 0


def _warm_bundle(path, settings, log, force: bool = False) -> None:
    """Fill the compile cache for this bundle's request paths (geoengine.analysis.warm)."""
    import time

    from geoengine.bundler.warmkit import warm_bundle
    from geoengine.engine import Engine

    t0 = time.perf_counter()
    if warm_bundle(Engine.open(path, settings=settings), log=log, force=force) is not None:
        log(f"[warm] {path}: compiled kernels cached in {time.perf_counter() - t0:.1f}s")


def cmd_warm(args) -> int:
    from geoengine.bundle import Bundle
    from geoengine.progress import Progress

    settings = _settings(args)
    progress = Progress(quiet=args.quiet)
    bundles = [Path(b) for b in args.bundles]
    if not bundles:
        root = Path(settings.bundles_dir)
        bundles = sorted(p for p in root.iterdir() if (p / "manifest.json").exists()) if root.is_dir() else []
    if not args.no_kit:
        from geoengine.bundler import warmkit

        if not warmkit.is_warm():
            warmkit.build_and_warm(progress.log)
    if not args.bundles and not bundles:
        progress.log(f"warm: no bundles under {root} yet; `geoengine build` warms the bundle it builds")
        return 0
    for b in bundles:
        Bundle.open(b)  # fail fast with the manifest check's message
        _warm_bundle(b, settings, progress.log, force=args.force)
    return 0


def ensure_default_bundle(settings: Settings, region: str | None = None, quiet: bool = False) -> Path:
    """The published bundle of `region` (default: the catalog's default), fetched and built when absent."""
    from geoengine.bundle import Bundle
    from geoengine.bundler.fetch import load_regions
    from geoengine.bundler.pipeline import build, resolve_inputs
    from geoengine.errors import BundleError
    from geoengine.progress import Progress

    region = region or settings.region or load_regions().default
    out = Path(settings.bundles_dir) / region
    progress = Progress(quiet=quiet)
    if out.exists():
        try:
            Bundle.open(out)
            return out
        except BundleError as exc:
            progress.log(f"rebuilding {out}: {exc.detail}")
    progress.log(f"no bundle for '{region}' yet: fetching and building it into {out}")
    inputs = resolve_inputs(region, settings, progress=progress)
    return build(inputs, out, settings, resume=True, progress=progress)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1 to 65535)")
    return port


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} is not at least 1")
    return n


def _check_listen(host: str, port: int) -> None:
    """Fail with one `error:` line before loading anything when the address cannot be bound."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(addr)
        except OSError as exc:
            raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def default_workers() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cmd_serve(args) -> int:
    try:
        import uvicorn
    except ImportError:
        print("error: the HTTP façade needs the server extra: pip install 'geoengine[server]'", file=sys.stderr)
        return 1
    settings = _settings(args)
    _check_listen(args.host, args.port)
    workers = args.workers if args.workers is not None else (settings.workers or default_workers())
    if workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2
    bundle = Path(args.bundle) if args.bundle else None
    if bundle is None and settings.bundle is not None:
        bundle = settings.bundle
    if bundle is None:
        bundle = ensure_default_bundle(settings, args.region)
    from geoengine.bundle import Bundle
    from geoengine.gateway.store import open_keystore
    from geoengine.server.protocol import CorkedHttpToolsProtocol

    Bundle.open(bundle)  # fail fast with the manifest check's message
    settings = Settings.from_env(bundle=Path(bundle).absolute())
    os.environ.update(settings.to_env())
    store = open_keystore(settings)
    if not [k for k in store.list() if not k.revoked]:
        print("note: no API keys exist yet; create one with `geoengine keys create --plan free`", file=sys.stderr)
    if args.exit_after:
        timer = threading.Timer(args.exit_after, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.daemon = True
        timer.start()
    print(f"serving {bundle} on http://{args.host}:{args.port} with {workers} worker process"
          f"{'es' if workers > 1 else ''} (gateway host '{settings.gateway_host}')", file=sys.stderr, flush=True)
    if workers > 1:
        from geoengine.server import balance
        from geoengine.tiles.shared import create_state_file

        state = create_state_file(Path(settings.home) / "run" / f"serve-{os.getpid()}.workers")
        os.environ["GEOENGINE_WORKER_STATE"] = str(state)
        # even shares of connections between the workers (server/balance.py)
        shares = balance.create_shares_file(Path(settings.home) / "run" / f"serve-{os.getpid()}.balance")
        os.environ[balance.ENV] = str(shares)
        try:
            uvicorn.run("geoengine.server.app:app_from_env", factory=True, host=args.host, port=args.port,
                        workers=workers, log_level=settings.log_level, access_log=not args.no_access_log,
                        http=CorkedHttpToolsProtocol, loop="geoengine.server.balance:new_event_loop",
                        # a worker opens and warms the bundle before it is ready (seconds, more under load):
                        # with uvicorn's 5 s default, SIGHUP's restart gave up and kept the old workers
                        timeout_worker_healthcheck=WORKER_READY_TIMEOUT_S,
                        proxy_headers=False)  # forwarded headers: geoengine.server.proxy, trusted peers only
        finally:
            state.unlink(missing_ok=True)
            shares.unlink(missing_ok=True)
    else:
        from geoengine.server.app import app_from_env
        from geoengine.server.lifecycle import install_sighup

        os.environ.pop("GEOENGINE_WORKER_STATE", None)
        os.environ.pop("GEOENGINE_SERVE_SHARES", None)
        app = app_from_env()
        install_sighup(app)  # reload a newly published bundle without a failed request
        uvicorn.run(app, host=args.host, port=args.port, log_level=settings.log_level,
                    access_log=not args.no_access_log, http=CorkedHttpToolsProtocol, proxy_headers=False)
    return 0


def cmd_keys(args) -> int:
    from geoengine.gateway.store import open_keystore, open_publishable

    settings = _settings(args)
    store = open_keystore(settings)
    pub = open_publishable(settings, store)  # in Redis beside the keys when GEOENGINE_REDIS_URL is set
    if args.keys_cmd == "publishable":
        key, prec = pub.create(args.plan, args.origin, args.scope, args.label or "")
        print(f"created publishable key {prec.id} on plan '{prec.plan}' for {', '.join(prec.origins)} "
              f"(scopes {', '.join(prec.scopes)})")
        print("it may sit in a web page; it works only from those origins when they are in GEOENGINE_CORS_ORIGINS")
        print(key)
    elif args.keys_cmd == "create":
        key, rec = store.create(args.plan, args.label or "", args.scope or ())
        print(f"created key {rec.id} on plan '{rec.plan}'" + (f" ({rec.label})" if rec.label else "")
              + (f" with scopes {', '.join(rec.scopes)}" if rec.scopes else ""))
        print("store it now: it is shown only once")
        print(key)
    elif args.keys_cmd == "list":
        records = store.list()
        pubs = pub.list()
        if args.json:
            print(json.dumps([r.as_dict() for r in records]
                             + [{**p.as_dict(), "publishable": True, "usage": store.usage(p.usage_id)} for p in pubs],
                             indent=2))
        else:
            print(f"{'id':10s} {'plan':10s} {'created':21s} {'status':8s} label / usage")
            for r in records:
                status = "revoked" if r.revoked else "active"
                usage = ", ".join(f"{k}={v}" for k, v in sorted(r.usage.items()))
                scopes = f"[{' '.join(r.scopes)}] " if r.scopes else ""
                print(f"{r.id:10s} {r.plan:10s} {r.created:21s} {status:8s} {scopes}{r.label} {usage}".rstrip())
            for p in pubs:
                status = "revoked" if p.revoked else "active"
                usage = ", ".join(f"{k}={v}" for k, v in sorted(store.usage(p.usage_id).items()))
                print(f"{p.id:10s} {p.plan:10s} {p.created:21s} {status:8s} publishable {','.join(p.scopes)} "
                      f"{' '.join(p.origins)} {p.label} {usage}".rstrip())
    elif args.keys_cmd == "revoke":
        if args.key.startswith("pk_") or (not args.key.startswith("gk_") and args.key in {p.id for p in pub.list()}):
            prec = pub.revoke(args.key)
            print(f"revoked publishable key {prec.id} at {prec.revoked}")
        else:
            rec = store.revoke(args.key)
            print(f"revoked key {rec.id} at {rec.revoked}")
    elif args.keys_cmd == "plans":
        for plan in store.plans.values():
            pools = "; ".join(f"{p.limit} {p.scope} per {p.period}" for p in plan.pools) or "no quota"
            print(f"{plan.name:10s} {pools}")
    return 0


def cmd_info(args) -> int:
    from geoengine.bundle import Bundle

    bundle = Bundle.open(args.bundle)
    m = bundle.manifest
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    print(f"bundle   {bundle.path}")
    print(f"region   {m.get('region')}  bbox {m.get('bbox')}")
    print(f"built    {m.get('created')} by geoengine {m.get('geoengine_version')}")
    for name, st in m["stages"].items():
        counts = ", ".join(f"{k}={v:,}" for k, v in st.get("counts", {}).items())
        print(f"stage    {name:10s} v{st['version']} {st.get('seconds', 0):7.1f}s  {counts}")
    return 0


def cmd_speeds(args) -> int:
    import geoengine

    engine = geoengine.open(args.bundle, settings=_settings(args))
    if args.speeds_cmd == "profiles":
        return _speed_profiles(engine, args)
    if args.speeds_cmd == "apply":
        if args.reset == bool(args.file):
            print("error: give a speed FILE or --reset (not both)", file=sys.stderr)
            return 2
        info = engine.reset_speeds() if args.reset else engine.apply_speeds(args.file, form=args.form)
    else:
        info = engine.speeds_info()
    return _print_generation(info, args.json, "speeds", "profile speeds (no measured speeds)", "",
                             engine.speed_store.dir)


def _print_generation(info, as_json: bool, label: str, none: str, detail: str, stored) -> int:
    """Print a speed or profile store's current generation (`info`), as JSON or as lines."""
    if as_json:
        print(json.dumps(info, indent=2))
    elif not info or not info.get("file"):
        print(f"{label:8s} {none}{'' if not info else f', generation {info['generation']}'}")
    else:
        print(f"{label:8s} generation {info['generation']}: {info['rows']:,} rows ({info['form']} form) on "
              f"{info['edges']:,} directed edges{detail}, applied {info['applied_at']}")
        print(f"source   {info['source']} (sha256 {info['sha256'][:16]}...)")
    print(f"stored   {stored}")
    return 0


def _speed_profiles(engine, args) -> int:
    """`geoengine speeds profiles`: apply, reset or show the time-of-day profiles."""
    if args.reset and args.file:
        print("error: give a profile FILE or --reset (not both)", file=sys.stderr)
        return 2
    if args.reset:
        info = engine.reset_profiles()
    elif args.file:
        info = engine.apply_profiles(args.file)
    else:
        info = engine.profiles_info()
    detail = "" if not info or not info.get("file") else (
        f"; named {', '.join(info['profiles']) or '-'}, {info['own_profiles']:,} own; {info['bytes']:,} bytes")
    return _print_generation(info, args.json, "profiles", "none (no time-of-day profiles)", detail,
                             engine.time_of_day.store.dir)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="geoengine", description="A self-contained maps engine: build bundles from "
                                "OpenStreetMap extracts and serve routing, search, tiles and elevation.")
    p.add_argument("--version", action="version", version=f"geoengine {__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    f = sub.add_parser("fetch", help="download a sample region's sources into the cache",
                       description="Fetch a region's sources (data/regions.toml) into the cache, verified. "
                       "Uses GEOENGINE_DATA_MIRROR (folder or http(s) base URL) when set, else the public URLs.")
    f.add_argument("region", nargs="?", help="region name (see --list)")
    f.add_argument("--list", action="store_true", help="list the known regions")
    f.add_argument("--mirror", help="mirror folder or base URL (overrides GEOENGINE_DATA_MIRROR)")
    f.add_argument("--quiet", action="store_true", help="no progress output")
    f.set_defaults(func=cmd_fetch)

    b = sub.add_parser("build", help="build a bundle from a region or an OSM extract",
                       description="Run the build stages into a temporary folder and publish the bundle "
                       "atomically. A failed or interrupted build never touches a published bundle.")
    b.add_argument("target", metavar="REGION_OR_PBF", help="a region name or a path to an .osm.pbf/.osm/.osm.gz file")
    b.add_argument("--dem", action="append", metavar="FILE", help="DEM tile (.hgt, .hgt.zip, .hgt.gz, .tif); repeatable")
    b.add_argument("--places", metavar="FILE", help="GeoNames table (cities500.txt[.gz] or .zip)")
    b.add_argument("--out", metavar="DIR", help="bundle path (default $GEOENGINE_BUNDLES/NAME)")
    b.add_argument("--continue", dest="resume", action="store_true", help="resume after the last finished stage")
    b.add_argument("--quiet", action="store_true", help="no progress output")
    b.add_argument("--report", metavar="FILE", help="write every build step's wall, CPU, peak RSS and output size "
                   "as JSON to FILE (see docs/scale.md)")
    b.add_argument("--no-warm", action="store_true", help="do not fill the compile cache for the new bundle")
    b.set_defaults(func=cmd_build, quick_exit=True)

    from geoengine.bundler.update import MAX_DIFFS

    u = sub.add_parser("update", help="apply OpenStreetMap change files to a bundle and publish it atomically",
                       description="Apply OsmChange files (--diff, repeatable) or the new diffs of a replication "
                       "server (--replication URL) to the OSM extract the bundle keeps, patch each stage whose inputs "
                       "changed from what the bundle kept of its read and the change (a stage that cannot be "
                       "patched is rebuilt in full, and the output says so; the others are reused by content "
                       "hash) and publish the result at BUNDLE "
                       "atomically; a running `geoengine serve` switches to it between requests. Change files "
                       "that do not follow the bundle's data are refused and nothing is published. See "
                       "docs/updates.md.")
    u.add_argument("bundle", metavar="BUNDLE", help="the published bundle path (the one `geoengine serve` serves)")
    u.add_argument("--diff", action="append", metavar="FILE", help="an OsmChange file (.osc, .osc.gz, .osc.bz2); "
                   "repeatable: all are applied together")
    u.add_argument("--replication", metavar="URL", help="a replication server's base URL (with state.txt), e.g. "
                   "https://download.geofabrik.de/europe/liechtenstein-updates/")
    u.add_argument("--sequence", type=int, metavar="N", help="the replication sequence number the --diff files bring "
                   "the data to (recorded in the manifest; refused when not newer than the bundle's)")
    u.add_argument("--allow-unknown", action="store_true", help="accept changed objects the extract does not have "
                   "(objects entering a region in a regional diff stream); by default they are refused")
    u.add_argument("--max-diffs", type=_positive_int, default=MAX_DIFFS, metavar="N",
                   help=f"at most N replication diffs per run (default {MAX_DIFFS})")
    u.add_argument("--quiet", action="store_true", help="no progress output")
    u.add_argument("--report", metavar="FILE", help="write every step's wall, CPU, peak RSS and what was reused as JSON")
    u.set_defaults(func=cmd_update, quick_exit=True)

    w = sub.add_parser("warm", help="fill the compile cache (Numba) for builds and bundles' request paths",
                       description="Build the compile kit (a bundle of a few dozen junctions: every build stage's "
                       "kernels) once per installation, then run one route, matrix, isochrone, accessibility, ... "
                       "over each bundle so every compiled kernel is cached in NUMBA_CACHE_DIR (default "
                       "$GEOENGINE_HOME/numba-cache) and later builds and processes start fast. Without "
                       "arguments: every bundle under $GEOENGINE_BUNDLES.")
    w.add_argument("bundles", nargs="*", metavar="DIR", help="bundle folders (default: all published bundles)")
    w.add_argument("--no-kit", action="store_true", help="do not build the compile kit (bundles' request paths only)")
    w.add_argument("--force", action="store_true", help="run every bundle's request paths even when a bundle with the "
                   "same array types was warmed with this code before (whose kernels the cache then holds)")
    w.add_argument("--quiet", action="store_true", help="no progress output")
    w.set_defaults(func=cmd_warm)

    s = sub.add_parser("serve", help="serve a bundle over HTTP (needs the server extra)",
                       description="Serve a bundle. Without --bundle, fetches and builds the default region first.")
    s.add_argument("--bundle", metavar="DIR", help="bundle folder (default: build/reuse the default region's)")
    s.add_argument("--region", help="region to build and serve when no bundle is given (default andorra)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=_port, default=8000, help="port, 1 to 65535 (default 8000)")
    s.add_argument("--workers", type=_positive_int, help="worker processes (default GEOENGINE_WORKERS, else the "
                   "number of cores); tile cache clears reach every worker")
    s.add_argument("--exit-after", type=float, metavar="SECONDS", help="stop by itself after this many seconds")
    s.add_argument("--no-access-log", action="store_true", help="do not log each request")
    s.set_defaults(func=cmd_serve)

    k = sub.add_parser("keys", help="manage API keys of the gateway",
                       description="API keys are stored hashed in the state database (GEOENGINE_STATE), "
                       "or in Redis when GEOENGINE_REDIS_URL is set.")
    ksub = k.add_subparsers(dest="keys_cmd", metavar="ACTION", required=True)
    kc = ksub.add_parser("create", help="create a key; prints it alone on the last line",
                         description="Create a key on a plan. The key is printed once, alone on the last line.")
    kc.add_argument("--plan", required=True, help="plan name: free, starter, unlimited (or from GEOENGINE_PLANS_FILE)")
    kc.add_argument("--label", help="free text to recognise the key by")
    kc.add_argument("--scope", action="append", metavar="SCOPE",
                    help="a permission of the key, repeatable: admin (may clear tile caches and apply speeds)")
    kp = ksub.add_parser("publishable", help="create a publishable key for pages on other origins",
                         description="Create a publishable key (pk_...): meant to sit in a web page, it is accepted "
                                     "only from the given browser origins (which must also be in "
                                     "GEOENGINE_CORS_ORIGINS) and only on the given scopes. Printed once, alone "
                                     "on the last line.")
    kp.add_argument("--plan", required=True, help="plan name: free, starter, unlimited (or from GEOENGINE_PLANS_FILE)")
    kp.add_argument("--origin", action="append", required=True, metavar="ORIGIN",
                    help="allowed page origin, scheme://host[:port] (repeat for several)")
    kp.add_argument("--scope", action="append", required=True, choices=["tiles", "search"],
                    help="what the key may call: tiles (/sources, /tiles/...) or search (/search...); repeatable")
    kp.add_argument("--label", help="free text to recognise the key by")
    kl = ksub.add_parser("list", help="list keys (ids, plans, status, usage; never the keys)")
    kl.add_argument("--json", action="store_true", help="JSON output")
    kr = ksub.add_parser("revoke", help="revoke a key by the key itself or its id")
    kr.add_argument("key", metavar="KEY_OR_ID")
    ksub.add_parser("plans", help="list the plans and their quotas")
    k.set_defaults(func=cmd_keys)

    sp = sub.add_parser("speeds", help="measured speeds for the motor costings (traffic)",
                        description="Apply measured speeds to a bundle's motor costings (auto, bus, taxi, truck, "
                        "motorcycle, ...), each capped by its own top speed. They are stored beside the bundle, "
                        "in BUNDLE.speeds/, and a server serving the bundle switches to them before its next "
                        "request, in every worker. See docs/traffic.md.")
    ssub = sp.add_subparsers(dest="speeds_cmd", metavar="ACTION", required=True)
    sa = ssub.add_parser("apply", help="apply a speed file (or --reset to the profile speeds)",
                         description="Check the whole FILE, then apply it: OSRM's segment speed file "
                         "(from_osm_node_id,to_osm_node_id,speed_kmh[,rate], one direction per row) or the "
                         "per-way form (way_id,speed_kmh[,direction: both|forward|backward]); an optional "
                         "header line. A bad line (unknown node pair or way, a speed that is not above 0, wrong "
                         "columns, an empty file) is named and nothing is applied.")
    sa.add_argument("bundle", metavar="BUNDLE", help="bundle folder")
    sa.add_argument("file", metavar="FILE", nargs="?", help="the speed file (CSV)")
    sa.add_argument("--reset", action="store_true", help="return to the costings' profile speeds")
    sa.add_argument("--form", choices=["segment", "way"], help="the file's form (default: from its header or columns)")
    sa.add_argument("--json", action="store_true", help="print what is in force as JSON")
    spr = ssub.add_parser("profiles", help="apply time-of-day speed profiles (or --reset, or show them)",
                          description="Check the whole FILE, then apply it as the bundle's time-of-day speed "
                          "profiles (7 days x 96 quarter hours, Monday 00:00 first): rows "
                          "profile,NAME,<672 speeds> define named profiles; rows way_id,NAME[,direction] or "
                          "from_osm_node_id,to_osm_node_id,NAME give them to ways or segments; rows "
                          "way_id[,direction],<672 speeds> or from,to,<672 speeds> give a way or segment its "
                          "own speeds. Routes, matrices and isochrones with a date_time then use the speeds of "
                          "its quarter hour. Without FILE: show the profiles in force. See docs/traffic.md.")
    spr.add_argument("bundle", metavar="BUNDLE", help="bundle folder")
    spr.add_argument("file", metavar="FILE", nargs="?", help="the profile file (CSV)")
    spr.add_argument("--reset", action="store_true", help="drop the time-of-day profiles")
    spr.add_argument("--json", action="store_true", help="print what is in force as JSON")
    ss = ssub.add_parser("show", help="show the speeds in force", description="Show the measured speeds in force.")
    ss.add_argument("bundle", metavar="BUNDLE", help="bundle folder")
    ss.add_argument("--json", action="store_true", help="JSON output")
    sp.set_defaults(func=cmd_speeds)

    i = sub.add_parser("info", help="describe a bundle", description="Check a bundle's manifest and describe it.")
    i.add_argument("bundle", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the whole manifest")
    i.set_defaults(func=cmd_info)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = args.func(args) or 0
    except GeoengineError as exc:
        print(f"error: {exc.detail}", file=sys.stderr)
        return 1
    except ValueError as exc:  # settings and plan files
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if argv is None and getattr(args, "quick_exit", False):
        # a build or an update has published and closed everything it wrote: the process ends here,
        # without the interpreter's teardown of every module's objects (about 0.2 s after an update)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
