"""Even shares of connections between the workers of `geoengine serve --workers N`.

uvicorn's supervisor binds one listening socket and every worker accepts from it. An event loop that
wakes for a readable listening socket accepts everything queued, so which worker holds a connection
is decided by which loop woke first: counted with `ss` during wrk runs of 64 connections on two
workers, 28/36, 32/32 and 39/25. The worker with more connections has the longer queue and sets the
tail latency. A socket per worker with SO_REUSEPORT would not fix it (the kernel hashes each
connection to a socket at random: for 64 connections on two sockets a spread of about +/- 4, the same
as measured), and a worker replaced on SIGHUP would drop the connections queued on its own socket.

So the workers keep the one shared socket (a connection waits in one queue until some worker takes
it, whichever worker is being replaced) and share a small file, memory-mapped by each, with a slot
per worker process: its pid, whether it is accepting, and how many connections it holds. A worker
accepts a waiting connection only while no other accepting worker holds fewer connections than it
does; otherwise it stops watching the socket for a millisecond and looks again (the worker with the
fewest never waits, so one of them always accepts). A worker that has declined for longer than
`DECLINE_MAX_S` accepts anyway: a worker that died without clearing its slot, or one whose event loop
is stuck, cannot keep connections waiting. The counts are written with one 8-byte store each, and
read without a lock (a stale read costs at most one connection's imbalance).

The event loop of each worker is uvloop's (asyncio's without it) with `create_server` on a given socket
replaced by this accept loop; uvicorn takes it through its `loop` setting ("module:factory"), and
`geoengine serve` passes it with `--workers` 2 or more (one worker keeps uvicorn's own loop). The
shares file is `GEOENGINE_HOME/run/serve-<pid>.balance`, made by `geoengine serve` before it starts
the workers and named to them in GEOENGINE_SERVE_SHARES; without it the loop is the plain one.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import mmap
import os
import socket
import time
from pathlib import Path

from geoengine.procs import alive

log = logging.getLogger("geoengine.server")

ENV = "GEOENGINE_SERVE_SHARES"
SLOTS = 256  # worker processes at once (a SIGHUP replacement briefly runs old and new ones)
_WORDS = 3  # per slot: pid, accepting, connections
DECLINE_WAIT_S = 0.001  # how long a worker over its share stops watching the socket
DECLINE_MAX_S = 0.05  # declining for longer than this, a worker accepts anyway
ACCEPT_BATCH = 16  # connections taken per wake-up at most


def create_shares_file(path: str | Path) -> Path:
    """A zeroed shares file for the workers of one server (made before the workers start)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(bytes(8 * _WORDS * SLOTS))
    os.replace(tmp, path)
    return path


class Shares:
    """This worker's slot in the shares file, and the others' counts."""

    def __init__(self, path: str | Path, pid: int | None = None):
        self.pid = os.getpid() if pid is None else pid
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, 8 * _WORDS * SLOTS)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                self.words = memoryview(self._map).cast("q")
                self.slot = self._claim()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        self._count = self.slot * _WORDS + 2
        self._acc = self.slot * _WORDS + 1
        self.declined_since = 0.0

    def _claim(self) -> int:
        w, pid = self.words, self.pid
        for s in range(SLOTS):
            other = w[s * _WORDS]
            if other == 0 or other == pid or not alive(other):
                w[s * _WORDS + 1] = w[s * _WORDS + 2] = 0
                w[s * _WORDS] = pid
                return s
        raise RuntimeError(f"more than {SLOTS} worker processes share one server")

    @property
    def connections(self) -> int:
        return self.words[self._count]

    def accepting(self, on: bool) -> None:
        self.words[self._acc] = 1 if on else 0

    def opened(self) -> None:
        self.words[self._count] += 1

    def closed(self) -> None:
        w = self.words
        w[self._count] = max(0, w[self._count] - 1)

    def may_accept(self) -> bool:
        """Whether no other accepting worker holds fewer connections than this one."""
        w, mine, me = self.words, self.words[self._count], self.slot
        for s in range(SLOTS):
            base = s * _WORDS
            if w[base] == 0 or s == me or not w[base + 1]:
                continue
            if w[base + 2] < mine:
                return False
        return True

    def prune(self) -> None:
        """Free the slots of processes that are gone (a worker killed without clearing its slot)."""
        w = self.words
        for s in range(SLOTS):
            pid = w[s * _WORDS]
            if pid and s != self.slot and not alive(pid):
                w[s * _WORDS + 1] = w[s * _WORDS + 2] = 0
                w[s * _WORDS] = 0

    def release(self) -> None:
        """Free the slot (the worker stops serving)."""
        w = self.words
        if w[self.slot * _WORDS] == self.pid:
            w[self.slot * _WORDS + 1] = 0
            w[self.slot * _WORDS] = 0


def _counted(proto, shares: Shares):
    """The protocol, its lost connection leaving the worker's share (its `connection_lost` wrapped)."""
    lost = proto.connection_lost

    def connection_lost(exc):
        try:
            lost(exc)
        finally:
            shares.closed()

    proto.connection_lost = connection_lost
    return proto


class BalancedServer:
    """The accept loop over a shared listening socket (what `create_server` returns: uvicorn calls
    `close` and `wait_closed`)."""

    def __init__(self, loop, protocol_factory, sock: socket.socket, shares: Shares, backlog: int = 100):
        self._loop, self._factory, self._sock, self.shares = loop, protocol_factory, sock, shares
        self.sockets = (sock,)
        self._fd = sock.fileno()
        self._watching = False
        self._retry: asyncio.TimerHandle | None = None
        self._serving = True
        self._tasks: set[asyncio.Task] = set()
        sock.setblocking(False)
        sock.listen(backlog)  # as asyncio's and uvloop's create_server (uvicorn's supervisor only binds)
        shares.accepting(True)
        self._watch()

    def _watch(self) -> None:
        self._retry = None
        if self._serving and not self._watching:
            self._loop.add_reader(self._fd, self._ready)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False

    def _ready(self) -> None:
        shares = self.shares
        for _ in range(ACCEPT_BATCH):
            if not shares.may_accept():
                now = time.monotonic()
                if not shares.declined_since:
                    shares.declined_since = now
                if now - shares.declined_since < DECLINE_MAX_S:
                    self._unwatch()  # the worker with fewer connections takes it; look again shortly
                    self._retry = self._loop.call_later(DECLINE_WAIT_S, self._watch)
                    return
                shares.prune()  # declined too long: take it, and forget workers that are gone
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE...: as asyncio, log and stop accepting for a second
                log.warning("accept failed: %s", exc)
                self._unwatch()
                self._retry = self._loop.call_later(1.0, self._watch)
                return
            shares.declined_since = 0.0
            shares.opened()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self._loop.create_task(self._connect(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket) -> None:
        shares = self.shares

        try:
            await self._loop.connect_accepted_socket(lambda: _counted(self._factory(), shares), conn)
        except Exception:  # the client went away before the transport was made
            log.debug("connection not made", exc_info=True)
            shares.closed()
            conn.close()

    def close(self) -> None:
        if not self._serving:
            return
        self._serving = False
        if self._retry is not None:
            self._retry.cancel()
        self._unwatch()
        self.shares.accepting(False)  # the others take what is queued

    def is_serving(self) -> bool:
        return self._serving

    async def wait_closed(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def start_serving(self) -> None:
        return None


def _balanced(base: type) -> type:
    class BalancedLoop(base):
        """An event loop whose servers on a shared listening socket take even shares of connections."""

        _shares: Shares | None = None

        async def create_server(self, protocol_factory, host=None, port=None, *, sock=None, ssl=None, **kw):
            path = os.environ.get(ENV)
            if sock is None or ssl is not None or not path or sock.type != socket.SOCK_STREAM:
                return await super().create_server(protocol_factory, host, port, sock=sock, ssl=ssl, **kw)
            if self._shares is None:
                self._shares = Shares(path)
            return BalancedServer(self, protocol_factory, sock, self._shares, kw.get("backlog", 100))

        def close(self):
            if self._shares is not None:
                self._shares.release()
            super().close()

    return BalancedLoop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's `loop` factory for `geoengine serve --workers N`."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings uvloop
        return _balanced(asyncio.SelectorEventLoop)()
    return _balanced(uvloop.Loop)()
