"""The corked transport of geoengine.server.protocol: the writes of one event-loop turn leave as one
write, in order; closing flushes first; nothing is written to a closing transport."""

from __future__ import annotations

import asyncio

from geoengine.server.protocol import CorkedHttpToolsProtocol, _CorkedTransport


class Recorder:
    def __init__(self):
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data):
        assert not self.closed
        self.writes.append(bytes(data))

    def is_closing(self):
        return self.closed

    def close(self):
        self.closed = True

    def get_write_buffer_size(self):
        return 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else default


def test_one_write_per_turn_and_close_flushes():
    async def main():
        raw = Recorder()
        t = _CorkedTransport(raw, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        t.write(b"")
        t.write(bytearray(b"hello"))
        assert raw.writes == [] and t.get_write_buffer_size() == 43
        await asyncio.sleep(0)
        assert raw.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"]
        t.write(b"second")
        t.close()
        assert raw.writes[-1] == b"second" and raw.closed
        t.write(b"late")
        await asyncio.sleep(0)
        assert raw.writes[-1] == b"second"  # nothing reaches a closed transport
        assert t.get_extra_info("sockname") == ("127.0.0.1", 8000)

    asyncio.run(main())


def test_protocol_answers_a_request_with_one_write():
    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def main():
        from uvicorn.config import Config
        from uvicorn.server import ServerState

        config = Config(app, http=CorkedHttpToolsProtocol, lifespan="off", access_log=False)
        config.load()
        raw = Recorder()
        proto = CorkedHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
        proto.connection_made(raw)
        proto.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
        for _ in range(20):
            await asyncio.sleep(0)
        assert len(raw.writes) == 1
        head, _, body = raw.writes[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK") and body == b"ok"
        proto.connection_lost(None)

    asyncio.run(main())


def test_the_raw_path_reads_only_plainly_well_formed_single_requests():
    """`_REQUEST` and `_scan` (the raw path's check and read): a well-formed GET's headers come out
    lower-cased and stripped, in order; control bytes, bytes over 0x7e, a bare CR or LF, a tab or a
    space in the target, a second request behind the first, a header given twice and a framing header
    are left to the parser."""
    from geoengine.server.protocol import _REQUEST, _scan

    ok = b"GET /tiles/a/1/0/0?x=1 HTTP/1.1\r\nHost: h\r\nAccept-Encoding:gzip \t\r\nX-A:\r\nCookie: gs=a.b.c\r\n\r\n"
    m = _REQUEST.fullmatch(ok)
    assert m is not None and m.group(1) == b"GET" and m.group(2) == b"/tiles/a/1/0/0?x=1"
    assert _scan(m.group(3)) == {b"host": b"h", b"accept-encoding": b"gzip", b"x-a": b"", b"cookie": b"gs=a.b.c"}
    assert list(_scan(m.group(3))) == [b"host", b"accept-encoding", b"x-a", b"cookie"]
    assert _REQUEST.fullmatch(b"HEAD / HTTP/1.1\r\n\r\n").group(3) == b""
    for bad in (
        b"GET /a HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n",  # a byte over 0x7e
        b"GET /a HTTP/1.1\r\nX: a\x00b\r\n\r\n",  # a control byte
        b"GET /a HTTP/1.1\r\nX: a\nY: b\r\n\r\n",  # a bare LF
        b"GET /a HTTP/1.1\r\nX: a\rb\r\n\r\n",  # a bare CR
        b"GET /a\tb HTTP/1.1\r\nX: a\r\n\r\n",  # a tab in the target
        b"GET /a b HTTP/1.1\r\n\r\n",  # a space in the target
        b"GET /a HTTP/1.0\r\n\r\n",
        b"GET /a HTTP/1.1\r\n folded\r\n\r\n",  # a folded line
        b"GET /a HTTP/1.1\r\nBad Header: x\r\n\r\n",  # a name that is not a token
        b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",  # pipelined
        b"GET /a HTTP/1.1\r\nX: a\r\n",  # not complete
    ):
        assert _REQUEST.fullmatch(bad) is None, bad
    for head in (b"\r\nAccept: a\r\nAccept: b", b"\r\nContent-Length: 0", b"\r\nConnection: close",
                 b"\r\nTransfer-Encoding: chunked"):
        assert _scan(head) is None, head
