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
