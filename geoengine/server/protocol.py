"""uvicorn's httptools protocol with one socket write per response instead of two.

uvicorn writes a response's status line and headers (`http.response.start`) and its body
(`http.response.body`) with two `transport.write` calls, so two `send` system calls. Profiled on cached
tiles (py-spy, wrk c=16), those two writes were two thirds of the server's CPU. `CorkedHttpToolsProtocol`
gives the protocol a transport wrapper that gathers the writes made within one turn of the event loop
and sends them with one `write` at the end of the turn (a `call_soon`), before the loop polls again;
closing flushes first. Everything else is the wrapped transport's.

`geoengine serve` passes this class as uvicorn's `http` protocol.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _CorkedTransport:
    __slots__ = ("_t", "_buf", "_loop")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._t = transport
        self._buf: list[bytes] = []
        self._loop = loop

    def write(self, data) -> None:
        if not data:
            return
        if not self._buf:
            self._loop.call_soon(self._flush)
        self._buf.append(bytes(data) if not isinstance(data, bytes) else data)

    def _flush(self) -> None:
        buf = self._buf
        if not buf:
            return
        self._buf = []
        if self._t.is_closing():
            return
        self._t.write(buf[0] if len(buf) == 1 else b"".join(buf))

    def close(self) -> None:
        self._flush()
        self._t.close()

    def write_eof(self) -> None:
        self._flush()
        self._t.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._t.get_write_buffer_size() + sum(len(b) for b in self._buf)

    def __getattr__(self, name):
        return getattr(self._t, name)


class CorkedHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(_CorkedTransport(transport, self.loop))

    # Graceful shutdown (SIGTERM, or SIGHUP replacing workers): uvicorn closes an idle connection at
    # once, but "idle" includes one just accepted, or kept alive, whose next request is already on the
    # wire and not yet read; that client sees a dropped connection (found by tests/server/test_signals.py).
    # Give idle connections a short grace: a request that arrives in it is answered with
    # `Connection: close`; a connection still idle after it is closed.
    SHUTDOWN_GRACE_S = 0.5

    _shutting_down = False

    def shutdown(self) -> None:
        self._shutting_down = True
        if self.cycle is None or self.cycle.response_complete:
            self.loop.call_later(self.SHUTDOWN_GRACE_S, self._close_when_idle)
        else:
            self.cycle.keep_alive = False

    def _close_when_idle(self) -> None:
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()
        else:
            self.cycle.keep_alive = False

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self._shutting_down and self.cycle is not None:  # answer it, then close
            self.cycle.keep_alive = False
