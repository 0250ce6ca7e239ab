"""Faults and reloads of a serving bundle.

- `BundleWatch` fingerprints every file of the bundle the engine opened (inode, size, mtime) and checks
  them once a second, on the worker's event loop (in a daemon thread when the app is made before its loop). A file removed or changed in place (corruption, a partial
  copy) marks its stage broken; admission (server/admission.py) then answers 503 on the endpoints that need that stage
  (routing needs graph + routing, search needs search, tiles need tiles, elevation needs elevation)
  while every other group keeps working. Memory-mapped data is never read after its file changed.
- A new publication at the served path (`geoengine build` publishes a new version folder and removes
  the old one) is not a fault: the engine is reloaded from it, as on SIGHUP.
- `Reloader.reload()` opens and warms a new Engine from the served path in a background thread and
  swaps it in when it is ready; requests keep using the old engine until then, and the ones in flight
  finish on it, so a reload fails no request. A bundle that cannot be opened leaves the old engine
  serving (the error is logged). `install_sighup(app)` binds it to SIGHUP for `geoengine serve`
  (with --workers N, uvicorn's supervisor replaces the workers one by one on SIGHUP instead).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
from pathlib import Path

from geoengine.server import endpoints

log = logging.getLogger("geoengine.server")

# endpoint group -> the bundle stages it reads
GROUP_STAGES = {
    "routing": ("graph", "routing"),
    "search": ("search",),
    "tiles": ("tiles",),
    "elevation": ("elevation",),
}


def _fingerprint(root: Path) -> dict[str, dict[str, tuple]]:
    out: dict[str, dict[str, tuple]] = {}
    for dirpath, _dirs, files in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        stage = rel.parts[0] if rel.parts else ""
        for name in files:
            try:
                st = os.stat(Path(dirpath) / name)
            except OSError:
                continue
            out.setdefault(stage, {})[str(rel / name)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


class BundleWatch:
    """Which stages of the opened bundle lost or changed a file since start."""

    def __init__(self, bundle_path: Path, served_path: Path | None = None):
        self.root = Path(bundle_path)
        self.served = Path(served_path) if served_path else self.root
        self.files = _fingerprint(self.root)
        self.broken: dict[str, str] = {}  # stage -> what happened

    def superseded(self) -> bool:
        """The served path now names another finished bundle: a new publication (which swaps the link
        first and then removes the old version folder, so files vanishing then are not damage)."""
        try:
            return self.served.resolve() != self.root and (self.served / "manifest.json").exists()
        except OSError:
            return False

    def check(self) -> dict[str, str]:
        broken: dict[str, str] = {}
        for stage, files in self.files.items():
            for rel, fp in files.items():
                try:
                    st = os.stat(self.root / rel)
                except OSError:
                    broken[stage] = f"{rel} was removed"
                    break
                if (st.st_ino, st.st_size, st.st_mtime_ns) != fp:
                    broken[stage] = f"{rel} changed"
                    break
        self.broken = broken
        return broken

    def unavailable(self, path: str) -> str | None:
        """Why the group of `path` cannot be served, or None."""
        if not self.broken:
            return None
        group = endpoints.group(path)
        if group is None:
            return None
        for stage in GROUP_STAGES[group]:
            if stage in self.broken:
                return f"the bundle's {stage} files are damaged ({self.broken[stage]} after start)"
        return None


class Reloader:
    """Owns app.state.engine and app.state.bundle_watch: watching, and reloading without a failed request."""

    def __init__(self, app, served_path: Path | None, interval_s: float = 1.0):
        self.app = app
        self.served = Path(served_path) if served_path else None
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        engine = app.state.engine
        app.state.bundle_watch = BundleWatch(engine.bundle.path, self.served)
        self.generation = 0
        self.refreeze: threading.Timer | None = None  # re-freezes the collector's view after a reload

    def start(self, loop=None) -> Reloader:
        """Check the bundle once per interval: on `loop` when given (a worker's event loop), else in a
        daemon thread. On the loop the check's ~140 stat calls (Andorra) cost about 0.3 ms once a second;
        in a thread each of them gave the GIL back and took it again from the thread answering requests,
        a forced switch of the event loop's thread (it waits until the watch thread has been scheduled
        and taken the GIL: on a loaded machine up to a scheduler slice) about 140 times a second."""
        if loop is None:
            threading.Thread(target=self._run, name="geoengine-bundle-watch", daemon=True).start()
        else:
            loop.call_later(self.interval_s, self._on_loop, loop)
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self._check():
                self.reload()

    def _on_loop(self, loop) -> None:
        if self._stop.is_set():
            return
        if self._check() and not self._lock.locked():  # a reload opens and warms a bundle: a thread
            threading.Thread(target=self.reload, name="geoengine-reload", daemon=True).start()
        loop.call_later(self.interval_s, self._on_loop, loop)

    def _check(self) -> bool:
        """One look at the bundle: damage is recorded (and logged when it changes); True when a new
        bundle was published at the served path (then reload)."""
        watch = self.app.state.bundle_watch
        try:
            if watch.superseded():
                log.info("a new bundle was published at %s: reloading", self.served)
                return True
            before = dict(watch.broken)
            now = watch.check()
            if now != before and now:
                log.error("bundle files damaged after start: %s", "; ".join(f"{k}: {v}" for k, v in now.items()))
        except Exception:  # never let the watcher die
            log.exception("bundle watch failed")
        return False

    def reload(self) -> bool:
        """Open and warm the bundle at the served path, then swap it in. False (old engine kept) on error."""
        from geoengine.engine import Engine

        if self.served is None:
            return False
        with self._lock:
            old = self.app.state.engine
            try:
                engine = Engine.open(self.served, settings=old.settings)
                engine.warm()
                watch = BundleWatch(engine.bundle.path, self.served)
            except Exception as exc:
                log.error("reload of %s failed, still serving %s: %s", self.served, old.bundle.path, exc)
                return False
            self.app.state.bundle_watch = watch
            self.app.state.engine = engine  # one attribute store: later requests use the new engine
            self.generation += 1
            log.info("reloaded bundle %s", engine.bundle.path)
            if gc.get_freeze_count():
                # the old engine was frozen out of the collector (freeze_long_lived): let the collector
                # see it again, and freeze the new one once requests on the old one have finished
                gc.unfreeze()
                self.refreeze = threading.Timer(30.0, freeze_long_lived)
                self.refreeze.daemon = True
                self.refreeze.start()
            return True


def freeze_long_lived() -> None:
    """Keep what exists now (the warmed engine: about 150,000 objects on Andorra) out of the collector's
    full passes, which took 45 ms each and showed in the tail latency; a reload unfreezes it."""
    gc.collect()
    gc.freeze()


def install_sighup(app) -> None:
    """SIGHUP reloads the served bundle in a background thread (single-process `geoengine serve`)."""
    reloader = app.state.reloader

    def _on_hup(signum, frame):
        threading.Thread(target=reloader.reload, name="geoengine-reload", daemon=True).start()

    signal.signal(signal.SIGHUP, _on_hup)
