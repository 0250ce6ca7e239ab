"""Even shares of connections between `geoengine serve --workers N`'s workers (server/balance.py): the
rule on the shares file, the accept loop on a real socket, and `geoengine serve --workers 2` on the
Andorra bundle holding a burst of 64 keep-alive connections 32/32."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

import pytest

from geoengine.gateway import KeyStore
from geoengine.server import balance
from tests.serving import free_port, start_serve, stop, wait_up

HOST = "balance.test"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_worker_declines_while_another_accepting_worker_holds_fewer(tmp_path):
    path = balance.create_shares_file(tmp_path / "s.balance")
    a, b = balance.Shares(path, os.getpid()), balance.Shares(path, os.getppid())
    assert a.slot != b.slot
    a.accepting(True)
    b.accepting(True)
    assert a.may_accept() and b.may_accept()  # 0 / 0: both may (one of them gets the connection)
    a.opened()
    assert not a.may_accept() and b.may_accept()  # 1 / 0: only the one with fewer
    b.opened()
    assert a.may_accept() and b.may_accept()
    b.opened()
    b.opened()
    assert a.may_accept() and not b.may_accept()  # 1 / 3
    b.accepting(False)  # b stops serving (SIGHUP replaced it): its connections no longer count
    a.opened()
    a.opened()
    a.opened()
    assert a.may_accept()
    b.accepting(True)
    b.closed()
    b.closed()
    b.closed()
    b.closed()  # never below zero
    assert b.connections == 0 and not a.may_accept()
    b.release()
    assert a.may_accept()  # a released slot does not count
    c = balance.Shares(path, os.getppid())
    assert c.slot == b.slot and c.connections == 0  # the slot is taken again, counts cleared


def test_a_gone_worker_is_pruned_and_its_slot_reused(tmp_path):
    path = balance.create_shares_file(tmp_path / "s.balance")
    a = balance.Shares(path, os.getpid())
    gone = balance.Shares(path, _dead_pid())
    gone.accepting(True)  # a worker killed before it cleared its slot: 0 connections, "accepting"
    a.accepting(True)
    a.opened()
    assert not a.may_accept()
    a.prune()
    assert a.may_accept()
    assert balance.Shares(path, os.getppid()).slot == gone.slot


def test_the_accept_loop_takes_a_connection_another_worker_left_waiting(tmp_path, monkeypatch):
    """A worker over its share declines, but not for longer than DECLINE_MAX_S (another worker may be
    stuck); connections it takes are counted until they close."""
    path = balance.create_shares_file(tmp_path / "s.balance")
    monkeypatch.setenv(balance.ENV, str(path))
    other = balance.Shares(path, os.getppid())
    other.accepting(True)  # another live worker with no connection that never accepts

    class Echo(asyncio.Protocol):
        def connection_made(self, t):
            self.t = t

        def data_received(self, d):
            self.t.write(b"ok:" + d)

    async def main():
        loop = asyncio.get_running_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = await loop.create_server(Echo, sock=sock, backlog=16)
        assert isinstance(server, balance.BalancedServer)
        port = sock.getsockname()[1]
        r1, w1 = await asyncio.open_connection("127.0.0.1", port)  # 0 / 0: this worker may take it
        w1.write(b"1")
        assert await r1.readexactly(4) == b"ok:1"
        assert server.shares.connections == 1
        t0 = time.monotonic()
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)  # 1 / 0: left to the other, then taken
        w2.write(b"2")
        assert await asyncio.wait_for(r2.readexactly(4), 5) == b"ok:2"
        waited = time.monotonic() - t0
        assert waited >= balance.DECLINE_MAX_S * 0.9, waited
        assert server.shares.connections == 2
        for w in (w1, w2):
            w.close()
        for _ in range(100):
            if server.shares.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert server.shares.connections == 0
        server.close()
        await server.wait_closed()
        assert not server.shares.words[server.shares.slot * 3 + 1]  # no longer accepting

    asyncio.run(main(), loop_factory=balance.new_event_loop)


def _established(pid: int, port: int) -> int:
    """Established TCP connections to local `port` held by process `pid` (/proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[3] == "01" and int(parts[1].rsplit(":", 1)[1], 16) == port and parts[9] in inodes:
                    n += 1
    return n


@pytest.mark.e2e
def test_serve_with_two_workers_holds_a_burst_of_connections_evenly(build_region, tmp_path):
    bundle = build_region("andorra")
    home = tmp_path / "home"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "info"}
    env.pop("GEOENGINE_REDIS_URL", None)
    env.pop("GEOENGINE_WORKERS", None)
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited")
    port = free_port()
    logpath = tmp_path / "serve.log"
    proc = start_serve(bundle, port, env, open(logpath, "w"), "--workers", "2", exit_after=600)
    conns: list[socket.socket] = []
    try:
        wait_up(port, proc, logpath)
        deadline = time.time() + 120
        while logpath.read_text().count("Application startup complete") < 2:
            assert time.time() < deadline, logpath.read_text()[-3000:]
            time.sleep(0.3)
        workers = [int(p) for p in open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()]
        request = (f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Gateway-Key: {key}\r\n"
                   f"X-Gateway-Host: {HOST}\r\n\r\n").encode()
        for _ in range(64):  # a burst, as a load generator or a browser opens them
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        for s in conns:
            s.sendall(request)
        for s in conns:
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
        held = sorted(n for n in (_established(p, port) for p in workers) if n)
        # 32/32; one off each way when a worker was off the CPU for DECLINE_MAX_S (a loaded machine)
        assert len(held) == 2 and sum(held) == 64 and held[1] - held[0] <= 2, (held, logpath.read_text()[-2000:])
        path = home / "run" / f"serve-{proc.pid}.balance"
        assert path.exists()
    finally:
        for s in conns:
            s.close()
        stop(proc)
    assert not (home / "run" / f"serve-{proc.pid}.balance").exists()  # removed when the server exits
