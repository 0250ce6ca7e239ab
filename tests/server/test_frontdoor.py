"""The front door (geoengine.server.dispatch, opened by server/protocol.py): requests answered below
ASGI get the same status, headers and bytes as the application gives (compared with the ASGI path on
the same app), every gateway rule holds (key, host, revocation within the lifetime, exact quotas,
publishable keys and CORS left to their layers), and order, keep-alive and pipelining are uvicorn's.

The protocol runs in process on the real Andorra app with a recording transport: raw HTTP in, the
exact bytes out."""

from __future__ import annotations

import asyncio
import gzip
import json
import time

import httptools
import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from geoengine.gateway import KeyStore, load_plans
from geoengine.server.protocol import CorkedHttpToolsProtocol

HOST = "maps.example.test"
A, B = {"lat": 42.5063, "lon": 1.5218}, {"lat": 42.5107, "lon": 1.5333}
TILE = "/tiles/andorra/12/2065/1512"


class Transport:
    def __init__(self):
        self.data = bytearray()
        self.closed = False

    def write(self, data):
        assert not self.closed, "write after close"
        self.data += data

    def is_closing(self):
        return self.closed

    def close(self):
        self.closed = True

    def get_write_buffer_size(self):
        return 0

    def pause_reading(self):  # the parser still reads the rest of the chunk at hand, as with a socket
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name in ("sockname", "peername") else default


class Responses:
    """HTTP/1.1 responses parsed from a byte stream (httptools)."""

    def __init__(self, head_requests=0):
        self.items: list[dict] = []
        self.parser = httptools.HttpResponseParser(self)
        self.cur = None

    def on_message_begin(self):
        self.cur = {"headers": {}, "body": b""}

    def on_header(self, name, value):
        self.cur["headers"][name.decode().lower()] = value.decode()

    def on_headers_complete(self):
        self.cur["status"] = self.parser.get_status_code()

    def on_body(self, body):
        self.cur["body"] += body

    def on_message_complete(self):
        self.items.append(self.cur)


class Conn:
    """One keep-alive connection through the real protocol class."""

    def __init__(self, app, loop):
        config = Config(app, http=CorkedHttpToolsProtocol, lifespan="off", access_log=False)
        config.load()
        self.loop = loop
        self.state = ServerState()
        self.state.default_headers = [(b"date", b"Tue, 24 Nov 2026 04:00:00 GMT"), (b"server", b"uvicorn")]
        self.proto = CorkedHttpToolsProtocol(config=config, server_state=self.state, app_state={}, _loop=loop)
        self.transport = Transport()
        self.proto.connection_made(self.transport)
        self.seen = 0

    async def exchange(self, raw: bytes, expect: int, heads: int = 0, timeout: float = 30) -> list[dict]:
        """Send raw request bytes; return the next `expect` responses (HEAD answers have no body: the
        parser is told how many of them lead the batch)."""
        self.proto.data_received(raw)
        t0 = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            out = _parse(bytes(self.transport.data), heads)
            if len(out) >= self.seen + expect:
                got = out[self.seen:self.seen + expect]
                self.seen += expect
                return got
            assert time.monotonic() - t0 < timeout, bytes(self.transport.data[-500:])


def _parse(data: bytes, heads: int) -> list[dict]:
    r = Responses()
    if heads:  # only used on a fresh connection whose whole stream is HEAD answers
        out = []
        for chunk in data.split(b"HTTP/1.1 ")[1:]:
            head = chunk.split(b"\r\n\r\n")[0].decode()
            lines = head.split("\r\n")
            out.append({"status": int(lines[0][:3]), "body": b"",
                        "headers": {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}})
        return out
    r.parser.feed_data(data)
    return r.items


def get(path, key, host=HOST, extra=""):
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\nX-Gateway-Key: {key}\r\nX-Gateway-Host: {host}\r\n"
            f"{extra}\r\n").encode()


def post(path, key, doc, extra=""):
    body = json.dumps(doc).encode() if not isinstance(doc, bytes) else doc
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nX-Gateway-Key: {key}\r\nX-Gateway-Host: {HOST}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def through_front_door(app, key: str, paths: list[str]) -> list[tuple[dict, bool]]:
    """Each GET in turn on one keep-alive connection through the protocol, the key cached first (by
    GET /health): (the response, whether the front door answered it)."""
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        await conn.exchange(get("/health", key), 1)
        out = []
        for path in paths:
            before = door.answered
            (r,) = await conn.exchange(get(path, key), 1)
            out.append((r, door.answered == before + 1))
        conn.proto.connection_lost(None)
        return out

    return asyncio.run(main())


def counted(app, store, path: str, n: int = 3) -> tuple[list[dict], int]:
    """n GETs of `path` with a new key of the `starter` plan (routing requests counted) through the
    protocol: (the responses, the requests the key's usage counted); none may be the front door's."""
    key, rec = store.create("starter")
    door = app.state.front_door
    before = door.answered

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        out = [(await conn.exchange(get(path, key), 1))[0] for _ in range(n)]
        conn.proto.connection_lost(None)
        return out

    out = asyncio.run(main())
    assert door.answered == before  # counted: every one went through the gateway
    return out, sum(store.usage(rec.id).values())


def run(coro):
    return asyncio.run(coro)


SAME_HEADERS = ("content-type", "content-encoding", "content-length", "etag", "cache-control", "vary", "retry-after")


def same_answer(front: dict, asgi) -> None:
    assert front["status"] == asgi.status_code
    body = front["body"]
    if front["headers"].get("content-encoding") == "gzip":
        body = gzip.decompress(body)  # httpx hands the ASGI answer over decompressed
    assert body == asgi.content
    for h in SAME_HEADERS:
        assert front["headers"].get(h) == asgi.headers.get(h), h


def test_tiles_below_asgi_are_the_applications_answers(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    door = app.state.front_door
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    cases = [
        (TILE, "Accept-Encoding: gzip\r\n"),
        (TILE, ""),  # identity: the stored gzip bytes decompressed, another ETag
        ("/tiles/andorra/12/2065/1512.pbf", "Accept-Encoding: gzip, br\r\n"),
        ("/tiles/andorra/14/0/0", ""),  # a valid coordinate without a tile: 204
        ("/tiles/nowhere/12/2065/1495", ""),  # unknown source: the endpoint's 404 problem
        ("/tiles/andorra/99/0/0", ""),  # out of range: 400 problem
        ("/tiles/andorra/x/0/0", ""),
    ]

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (first,) = await conn.exchange(get(TILE, key), 1)  # the key is not cached yet: the gateway answers
        assert first["status"] == 200 and door.answered == 0
        for path, extra in cases:
            before = door.answered
            (r,) = await conn.exchange(get(path, key, extra=extra), 1)
            assert door.answered == before + 1, path
            hdrs = dict(h)
            for line in extra.strip().splitlines():
                k, v = line.split(":", 1)
                hdrs[k] = v.strip()
            if "Accept-Encoding" not in hdrs:
                hdrs["Accept-Encoding"] = "identity"  # httpx would ask for gzip otherwise
            same_answer(r, client.get(path, headers=hdrs))
            assert r["headers"]["server"] and r["headers"]["date"]  # uvicorn's default headers
        etag = (await conn.exchange(get(TILE, key, extra="Accept-Encoding: gzip\r\n"), 1))[0]["headers"]["etag"]
        (r,) = await conn.exchange(get(TILE, key, extra=f"Accept-Encoding: gzip\r\nIf-None-Match: {etag}\r\n"), 1)
        assert r["status"] == 304 and r["body"] == b""
        assert conn.state.total_requests == len(cases) + 3
        assert conn.proto.timeout_keep_alive_task is not None  # keep-alive timeout armed, as uvicorn does
        conn.proto.connection_lost(None)

    run(main())


def test_head_tile_has_the_get_headers_and_no_body(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    assert client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST}).status_code == 200  # cache it

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        raw = get(TILE, key, extra="Accept-Encoding: gzip\r\n").replace(b"GET ", b"HEAD ", 1)
        (r,) = await conn.exchange(raw, 1, heads=1)
        assert app.state.front_door.answered == 1
        full = client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST, "Accept-Encoding": "gzip"})
        assert r["status"] == 200 and r["headers"]["content-length"] == full.headers["content-length"]
        assert r["headers"]["etag"] == full.headers["etag"]
        assert bytes(conn.transport.data).endswith(b"\r\n\r\n")  # no body
        conn.proto.connection_lost(None)

    run(main())


def test_route_post_below_asgi_equals_the_applications_route(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    door = app.state.front_door
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    doc = {"locations": [A, B]}
    asgi = client.post("/route", json=doc, headers=h)
    assert asgi.status_code == 200

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (r,) = await conn.exchange(post("/route", key, doc), 1)
        assert door.answered == 1 and r["status"] == 200
        assert r["headers"]["content-type"] == "application/json"
        assert json.loads(r["body"]) == asgi.json()
        # a body the model refuses: the application's 400 problem, body replayed to it intact
        bad = {"locations": [A]}
        (r,) = await conn.exchange(post("/route", key, bad), 1)
        ref = client.post("/route", json=bad, headers=h)
        assert door.answered == 1 and r["status"] == ref.status_code == 400
        assert json.loads(r["body"]) == ref.json()
        (r,) = await conn.exchange(post("/route", key, b"{not json"), 1)
        assert r["status"] == 400 and r["headers"]["content-type"] == "application/problem+json"
        # a route the engine refuses (no road near a location): the engine's problem, answered here
        far = {"locations": [A, {"lat": 0.0, "lon": 0.0}]}
        (r,) = await conn.exchange(post("/route", key, far), 1)
        ref = client.post("/route", json=far, headers=h)
        assert r["status"] == ref.status_code and json.loads(r["body"]) == ref.json()
        # heavier requests (three locations) go to the application and its thread pool
        three = {"locations": [A, B, A]}
        (r,) = await conn.exchange(post("/route", key, three), 1)
        assert r["status"] == 200 and json.loads(r["body"]) == client.post("/route", json=three, headers=h).json()
        conn.proto.connection_lost(None)

    run(main())


def test_gateway_rules_hold_for_what_the_front_door_would_take(served):
    app, store, client = served
    key, rec = store.create("unlimited")
    door = app.state.front_door
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})  # key cached

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        # wrong host, unknown key, missing key: the gateway's 403 problem, never the front door
        for raw in (get(TILE, key, host="evil.example"), get(TILE, "gk_not_a_key"),
                    f"GET {TILE} HTTP/1.1\r\nHost: x\r\nX-Gateway-Host: {HOST}\r\n\r\n".encode()):
            (r,) = await conn.exchange(raw, 1)
            assert r["status"] == 403 and r["headers"]["content-type"] == "application/problem+json"
        assert door.answered == 0
        # an Origin header is the web-access layer's (CORS headers on the answer)
        (r,) = await conn.exchange(get(TILE, key, extra="Origin: https://app.example\r\n"), 1)
        assert r["status"] == 200 and r["headers"]["access-control-allow-origin"] == "https://app.example"
        assert door.answered == 0
        (r,) = await conn.exchange(get(TILE, key), 1)
        assert r["status"] == 200 and door.answered == 1
        # revoked by another process: stops within the cache lifetime (0.5 s here; the fixture's is long
        # so that a cold compile cache cannot expire a key between two steps of a test)
        keystore = door.keystore
        keystore.ttl_s = 0.5
        keystore.forget()
        (r,) = await conn.exchange(get(TILE, key), 1)  # cached again, through the gateway, for 0.5 s
        assert r["status"] == 200 and keystore.peek(key) is not None
        t0 = time.monotonic()  # the key was read before t0: its entry is gone by t0 + ttl
        KeyStore(app.state.settings.state, load_plans(None)).revoke(rec.id)
        while True:
            started = time.monotonic()
            (r,) = await conn.exchange(get(TILE, key), 1)
            if r["status"] == 403:
                break
            assert r["status"] == 200
            assert started - t0 < keystore.ttl_s, "a revoked key kept working past the lifetime"
            await asyncio.sleep(0.02)
        assert json.loads(r["body"])["detail"] == "invalid or revoked API key"
        conn.proto.connection_lost(None)

    run(main())


def test_counted_requests_go_through_the_gateway_and_quotas_stay_exact(served):
    app, store, client = served
    key, rec = store.create("free")  # non-tile requests counted, tiles free
    door = app.state.front_door
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})  # key cached

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        for _ in range(5):
            (r,) = await conn.exchange(get(TILE, key), 1)
            assert r["status"] == 200
        assert door.answered == 5
        for _ in range(3):
            (r,) = await conn.exchange(post("/route", key, {"locations": [A, B]}), 1)
            assert r["status"] == 200
        (r,) = await conn.exchange(get("/search?q=andorra", key), 1)
        assert r["status"] == 200
        assert door.answered == 5  # the counted ones went through the gateway
        conn.proto.connection_lost(None)

    run(main())
    assert sum(store.usage(rec.id).values()) == 4


def test_pipelined_requests_answer_in_order(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})  # key cached
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        # the application answers /health (in flight), so the tile behind it must wait its turn
        raw = (get("/health", key) + get(TILE, key) + post("/route", key, {"locations": [A, B]})
               + get(TILE, key, extra="Accept-Encoding: gzip\r\n") + get("/sources", key))
        rs = await conn.exchange(raw, 5)
        assert [r["status"] for r in rs] == [200] * 5
        assert "uptime_s" in json.loads(rs[0]["body"])
        assert rs[1]["headers"]["content-type"] == "application/x-protobuf"
        assert "routes" in json.loads(rs[2]["body"]) or "trip" in json.loads(rs[2]["body"])
        assert rs[3]["headers"].get("content-encoding") == "gzip"
        assert isinstance(json.loads(rs[4]["body"]), (list, dict))
        # and an idle connection takes a pipelined pair at the door
        before = door.answered
        rs = await conn.exchange(get(TILE, key) + get(TILE, key, extra="Accept-Encoding: gzip\r\n"), 2)
        assert [r["status"] for r in rs] == [200, 200] and door.answered == before + 2
        conn.proto.connection_lost(None)

    run(main())


def test_connection_close_and_shutdown_leave_it_to_uvicorn(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (r,) = await conn.exchange(get(TILE, key, extra="Connection: close\r\n"), 1)
        assert r["status"] == 200 and r["headers"]["connection"] == "close" and conn.transport.closed
        assert door.answered == 0
        conn2 = Conn(app, asyncio.get_running_loop())
        conn2.proto.shutdown()
        (r,) = await conn2.exchange(get(TILE, key), 1)
        assert r["status"] == 200 and r["headers"]["connection"] == "close" and door.answered == 0

    run(main())


def test_front_door_engine_failure_falls_back_to_the_application(served, monkeypatch):
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    door = app.state.front_door
    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise RuntimeError("boom")

    monkeypatch.setattr(door, "_tile", broken)

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (r,) = await conn.exchange(get(TILE, key), 1)
        assert r["status"] == 200 and calls and door.answered == 0  # the application's own tile route answered
        conn.proto.connection_lost(None)

    run(main())


def test_keep_alive_timeout_still_closes_an_idle_connection(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        conn.proto.timeout_keep_alive = 0.3
        (r,) = await conn.exchange(get(TILE, key), 1)
        timer = conn.proto.timeout_keep_alive_task
        assert r["status"] == 200 and timer is not None
        for _ in range(3):  # busy: the pending timer is kept (no timer per request) and waits another period
            await conn.exchange(get(TILE, key), 1)
        assert conn.proto.timeout_keep_alive_task is timer and not conn.transport.closed
        t0 = time.monotonic()
        while not conn.transport.closed:
            await asyncio.sleep(0.02)
            assert time.monotonic() - t0 < 2.0, "an idle connection was never closed"
        assert time.monotonic() - t0 >= 0.25  # not before a whole idle period

    run(main())


def test_raw_path_leaves_odd_requests_to_the_parser(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        good = get(TILE, key)
        # split across two chunks: the second chunk must not be read as a new request
        conn.proto.data_received(good[:20])
        (r,) = await conn.exchange(good[20:], 1)
        assert r["status"] == 200
        answered = door.answered
        # HTTP/1.0: uvicorn's path (and its connection handling)
        (r,) = await conn.exchange(good.replace(b"HTTP/1.1", b"HTTP/1.0"), 1)
        assert r["status"] == 200 and door.answered == answered and conn.transport.closed
        # a header line folded onto the next (obsolete line folding): the parser judges it (400)
        conn2 = Conn(app, asyncio.get_running_loop())
        folded = good.replace(b"X-Gateway-Host:", b"X-Other: a\r\n b\r\nX-Gateway-Host:")
        (r,) = await conn2.exchange(folded, 1)
        assert r["status"] == 400 and door.answered == answered
        # a bare LF inside the head: the parser's too
        conn3 = Conn(app, asyncio.get_running_loop())
        (r,) = await conn3.exchange(good.replace(b"Host: localhost\r\n", b"Host: localhost\nX-A: b\r\n"), 1)
        assert door.answered == answered

    run(main())


def test_raw_header_scan_gives_the_applications_answers(served):
    """The raw path reads every header in one scan: a header given twice, a conditional, a forwarded
    header or one that changes the framing takes the way that decides it, with the application's answer."""
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    cases = [
        ("Accept-Encoding: gzip\r\nAccept-Encoding: identity\r\n", [("Accept-Encoding", "gzip"), ("Accept-Encoding", "identity")]),
        (f"X-Gateway-Key: {key}\r\n", [("X-Gateway-Key", key), ("Accept-Encoding", "identity")]),  # the key twice
        ("X-Forwarded-For: 10.0.0.1\r\n", [("X-Forwarded-For", "10.0.0.1"), ("Accept-Encoding", "identity")]),
        ("If-None-Match: \"nothing\"\r\n", [("If-None-Match", '"nothing"'), ("Accept-Encoding", "identity")]),
        ("Content-Length: 0\r\n", [("Content-Length", "0"), ("Accept-Encoding", "identity")]),  # framing: the parser's
        ("accept-encoding:gzip  \r\nX-Request-Id: 7\r\n", [("Accept-Encoding", "gzip"), ("X-Request-Id", "7")]),
    ]

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        for extra, headers in cases:
            (r,) = await conn.exchange(get(TILE, key, extra=extra), 1)
            same_answer(r, client.get(TILE, headers=[("X-Gateway-Key", key), ("X-Gateway-Host", HOST), *headers]))

    run(main())


def test_escaped_query_strings_are_answered_at_the_front_door_as_the_application_does(served):
    """A percent-escaped query string (any query with a space or a letter outside ASCII) is decoded as the
    application decodes it; an escaped path is left to the router."""
    app, store, client = served
    key, _ = store.create("unlimited")
    client.get(TILE, headers={"X-Gateway-Key": key, "X-Gateway-Host": HOST})
    door = app.state.front_door
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        for target in ("/search?q=Sant%20Juli%C3%A0&size=3", "/search?q=Carrer+de+la&lat=42.5&lon=1.52",
                       "/search?q=%E2%82%AC%ZZ", "/search/reverse?lat=42.5063&lon=1.5218&radius=500m"):
            before = door.answered
            (r,) = await conn.exchange(get(target, key), 1)
            assert door.answered == before + 1, target
            want = client.get(target, headers=h)
            assert r["status"] == want.status_code == 200
            got, exp = json.loads(r["body"]), want.json()
            got.pop("took_ms", None), exp.pop("took_ms", None)
            assert got == exp, target
        before = door.answered
        (r,) = await conn.exchange(get("/tiles/andorra/12/2065/151%32", key), 1)  # an escaped path: the router's
        assert door.answered == before and r["status"] == client.get("/tiles/andorra/12/2065/151%32", headers=h).status_code

    run(main())


@pytest.mark.parametrize("raw", [
    b"GET /search?q=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a URL longer than httptools reads
    b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",  # a header line without a colon
    b"GARBAGE\r\n\r\n",
])
def test_bytes_the_parser_refuses_get_the_problem_body(served, raw):
    """What uvicorn's parser refuses is answered in the API's one error shape (400 problem+json, the
    connection closed), not uvicorn's text/plain."""
    app, _, _ = served

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        (r,) = await conn.exchange(raw, 1)
        return r, conn.transport.closed

    r, closed = run(main())
    assert r["status"] == 400 and closed
    assert r["headers"]["content-type"] == "application/problem+json"
    doc = json.loads(r["body"])
    assert doc["status"] == 400 and "not valid HTTP/1.1" in doc["detail"]
    assert int(r["headers"]["content-length"]) == len(r["body"])
