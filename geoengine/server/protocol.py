"""uvicorn's httptools protocol with one socket write per response instead of two.

uvicorn writes a response's status line and headers (`http.response.start`) and its body
(`http.response.body`) with two `transport.write` calls, so two `send` system calls. Profiled on cached
tiles (py-spy, wrk c=16), those two writes were two thirds of the server's CPU. `CorkedHttpToolsProtocol`
gives the protocol a transport wrapper that gathers the writes made within one turn of the event loop
and sends them with one `write` at the end of the turn (a `call_soon`), before the loop polls again;
closing flushes first. Everything else is the wrapped transport's.

The protocol also opens the front door: when a request's headers are complete (for a POST, when its
body is), the app's dispatcher (`server/dispatch.py`) may answer it here, with the same bytes the
application would write, without an ASGI scope, a request cycle or a task. Everything it declines goes
to uvicorn's own path unchanged. It is only asked when the connection is idle (no response in flight,
nothing pipelined behind it), keep-alive HTTP/1.1, not shutting down, and the transport not paused.

`geoengine serve` passes this class as uvicorn's `http` protocol.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
from urllib.parse import quote

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from geoengine.server import dispatch
from geoengine.server.framing import head_block, problem_answer

log = logging.getLogger("geoengine.server")


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


# The raw path (`CorkedHttpToolsProtocol._raw`): one whole GET or HEAD in one chunk, read without the
# parser's callbacks when it is plainly well formed; anything else goes to httptools as always. Which
# paths the front door answers is the endpoint table's to say (server/endpoints.py), not this module's.
# One regular expression checks the whole chunk: the request line (a target of visible ASCII, HTTP/1.1),
# headers whose names are tokens and whose values are visible ASCII, spaces and tabs (no control byte,
# no byte over 0x7e, no bare CR or LF, no folded line), the blank line, and nothing after it.
_RAW_METHODS = (b"GET /", b"HEAD /")
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST = re.compile(rb"(GET|HEAD) (/[!-~]*) HTTP/1\.1((?:\r\n" + _TOKEN + rb":[\t -~]*)*)\r\n\r\n")
# headers that change the framing or the connection: the chunk goes to the parser
_RAW_VETO = frozenset((b"connection", b"upgrade", b"content-length", b"transfer-encoding", b"expect", b"te",
                       b"trailer", b"keep-alive", b"proxy-connection"))


def _scan(head: bytes) -> dict[bytes, bytes] | None:
    """The headers of a raw head that _REQUEST accepted, {lower-cased name: value} in their order; None
    when a header vetoes the raw path or a name comes twice (the parser's pairs keep both)."""
    lines = head.split(b"\r\n")  # "" then "Name: value" per header (_REQUEST checked each)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.lower()] = value.strip(b" \t")
    if len(headers) != len(lines) - 1 or not _RAW_VETO.isdisjoint(headers):
        return None
    return headers


# -- the access log -----------------------------------------------------------------------------------
# uvicorn's access-log line, "INFO:     client - \"METHOD /path?query HTTP/1.1\" 200 OK", was a `logging`
# record per request (LogRecord, findCaller, AccessFormatter's copies of the record, StreamHandler's
# write and flush): about a sixth of a worker's time on tiles (py-spy, tiles_session_bench). While the
# access logger is uvicorn's default (one StreamHandler whose formatter writes exactly that line: checked
# on a probe record), the front door makes the same line itself and hands it to the handler's stream.
#
# That stream is buffered here (`_AccessLog` takes the handler's stream's place): a line is kept until
# the end of the event-loop turn, and the turn's lines go out with one write. Written to the stream one
# by one they were one `write` system call a request whenever the stream does not buffer (stdout under
# PYTHONUNBUFFERED=1, or a pipe to a log collector that flushes per line): counted on a worker under
# the session tiles, two writes a request, the response and its line. Lines that `logging` writes (the
# application's answers) go through the same buffer, whose `flush` (called by the handler after each
# record) writes everything pending first: the order of the lines is kept. Nothing waits past the turn,
# and the pending lines are written when a connection closes or the server shuts down (and by
# `logging.shutdown` at exit, which flushes every handler), so SIGTERM, SIGHUP's worker replacement and
# an exception that ends the process lose no line.
_PHRASES = {s.value: f"{s.value} {s.phrase}" for s in http.HTTPStatus}
_QUOTED = re.compile(r"[A-Za-z0-9_.\-~/]*")  # a path urllib.parse.quote leaves as it is
_PROBE = ("192.0.2.1:1", "GET", "/p?q", "1.1", 200)


class _AccessLog:
    """The stream of the access logger's default handler, in its place: lines are kept until the end of
    the event-loop turn (or the handler's next flush) and written with one `write`."""

    __slots__ = ("handler", "stream", "lines", "pending", "__weakref__")

    def __init__(self, handler: logging.StreamHandler):
        self.handler, self.stream, self.lines, self.pending = handler, handler.stream, [], None
        with handler.lock:
            handler.stream = self

    def add(self, line: str, loop) -> bool:
        """Keep a line of the front door's until the end of this loop turn; False when this buffer is no
        longer the handler's stream (`logging` writes the line then)."""
        handler = self.handler
        if handler.stream is not self:
            return False
        with handler.lock:
            self.lines.append(line)
        if self.pending is not loop:  # one flush per turn (a flush on another loop does not count)
            self.pending = loop
            loop.call_soon(self.flush)
        return True

    def write(self, text: str) -> int:  # StreamHandler.emit (under the handler's lock), then flush
        self.lines.append(text)
        return len(text)

    def flush(self) -> None:
        """Write every kept line with one write, then flush the stream."""
        handler = self.handler
        with handler.lock:
            self.pending = None
            lines = self.lines
            if not lines:
                return
            self.lines = []
            try:
                self.stream.write(lines[0] if len(lines) == 1 else "".join(lines))
                self.stream.flush()
            except Exception:  # as logging does with a stream that refuses: report; later lines use logging
                if handler.stream is self:
                    handler.stream = self.stream
                handler.handleError(logging.makeLogRecord({"msg": "access log: %d lines lost", "args": (len(lines),)}))

    def __getattr__(self, name):  # the stream's other attributes (name, encoding, ...)
        return getattr(self.stream, name)


_ACCESS_LOGS: dict[tuple, _AccessLog | None] = {}


def _access_log(logger: logging.Logger, loop) -> _AccessLog | None:
    """The access log the front door writes itself, or None when `logging` must write the line (checked
    when a connection opens, again when the logger's handlers, filters, formatter or stream changed)."""
    handlers = tuple(logger.handlers)
    key = (loop, logger.propagate, *logger.filters,
           *((h, h.formatter, h.level, h.terminator, getattr(h, "stream", None), *h.filters) for h in handlers))
    if key not in _ACCESS_LOGS:
        _ACCESS_LOGS.clear()
        plain, h = None, handlers[0] if len(handlers) == 1 else None
        if type(h) is logging.StreamHandler and not logger.filters and not logger.propagate \
                and not h.filters and h.level <= logging.INFO and h.terminator == "\n":
            probe = logger.makeRecord(logger.name, logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', _PROBE,
                                      None)
            if h.format(probe) == 'INFO:     192.0.2.1:1 - "GET /p?q HTTP/1.1" 200 OK':
                plain = h.stream if type(h.stream) is _AccessLog else _AccessLog(h)
        _ACCESS_LOGS[key] = plain
    return _ACCESS_LOGS[key]


class _Defaults:
    """uvicorn's default response headers (date, server) as one block, rebuilt when uvicorn replaces them."""

    source: list | None = None
    block = b""


class CorkedHttpToolsProtocol(HttpToolsProtocol):
    _door: dispatch.Dispatcher | None = None
    _fd = 0  # 0: uvicorn's path; 1: answered by the front door; 2: collecting a body for it
    _fd_path = ""
    _fd_body: list[bytes] | None = None
    _idle = True  # the parser is between messages (no request partly read)
    _access: _AccessLog | None = None  # the access log written without `logging` (None: through it)
    _addr: str | None = None  # the client's "host:port" in the access log

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(_CorkedTransport(transport, self.loop))
        self._door = dispatch.find(self.app)
        self._access = _access_log(self.access_logger, self.loop) if self.access_log else None

    # -- the front door ----------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._idle and self._door is not None and data.startswith(_RAW_METHODS) and self._raw(data):
            return
        super().data_received(data)

    def _raw(self, data: bytes) -> bool:
        """Answer a chunk that is exactly one plain GET (or HEAD) request at the front door, without
        the parser; False (nothing consumed, nothing written) hands the chunk to the parser."""
        m = _REQUEST.fullmatch(data)
        if m is None or not self._quiet():
            return False  # pipelined, a body, bytes the parser must judge; or uvicorn's state
        method, target, head = m.groups()
        if b"#" in target:
            return False
        headers = _scan(head)
        if headers is None:
            return False
        path, _, query = target.partition(b"?")
        if b"%" in path:
            return False  # an escaped path is the router's to decode (a query string is decoded as the app does)
        try:
            return self._get(method, path.decode("ascii"), query, headers)
        except Exception:  # never let the front door cost a request: the application answers it
            log.debug("front door declined after an error", exc_info=True)
            return False

    def _quiet(self) -> bool:
        """No response in flight, nothing pipelined, not shutting down, writing not paused, no root path
        or concurrency limit (uvicorn's to apply)."""
        cycle = self.cycle
        return (not self._shutting_down and (cycle is None or cycle.response_complete) and not self.pipeline
                and not self.flow.write_paused and not self.root_path and self.limit_concurrency is None)

    def _door_open(self) -> bool:
        return (self._quiet() and not self.expect_100_continue and self.parser.get_http_version() == "1.1"
                and self.parser.should_keep_alive() and not self.parser.should_upgrade())

    def _get(self, method: bytes, path: str, query: bytes, headers) -> bool:
        """Whether the front door answered this GET or HEAD (then it is written)."""
        m = method.decode("ascii")
        answer = self._door.get(m, path, query, headers)
        if answer is not None:
            self._respond(m, path, query, answer)
        return answer is not None

    def _front(self) -> bool:
        """Ask the front door about the request whose headers are complete: True when it answered or
        is collecting the body."""
        method = self.parser.get_method()
        if method not in (b"GET", b"HEAD", b"POST") or not self._door_open():
            return False
        url = httptools.parse_url(self.url)
        if b"%" in url.path:
            return False
        path = url.path.decode("ascii")
        if method == b"POST":
            if self._door.post_wanted(path, self.headers):
                self._fd, self._fd_path, self._fd_body = 2, path, []
                return True
            return False
        if not self._get(method, path, url.query or b"", self.headers):
            return False
        self._fd = 1
        return True

    def _respond(self, method: str, path: str, query: bytes, answer) -> None:
        status, headers, body = answer
        if self.access_log:
            self._log(method, path, query, status)
        if type(headers) is bytes:  # a prebuilt header block (tiles)
            head = headers
        else:
            head = head_block(headers)
        self._write(self._response(STATUS_LINE[status], head, body, method == "HEAD"))

    def _log(self, method: str, path: str, query: bytes, status: int) -> None:
        """The request's access-log line, as uvicorn writes it (its client address, quoted path, query)."""
        addr = self._addr
        if addr is None:  # the connection's client, once
            client = self.client
            addr = self._addr = f"{client[0]}:{client[1]:d}" if client else ""
        target = path if _QUOTED.fullmatch(path) else quote(path)
        if query:
            target = f"{target}?{query.decode('ascii')}"
        log = self._access if self.access_logger.isEnabledFor(logging.INFO) else None
        if log is None or not log.add(
                f'INFO:     {addr} - "{method} {target} HTTP/1.1" {_PHRASES.get(status) or f"{status} "}\n', self.loop):
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', addr, method, target, "1.1", status)

    def _response(self, status_line: bytes, head: bytes, body: bytes, is_head: bool) -> bytes:
        """A response's bytes with uvicorn's current default headers (date, server)."""
        defaults = self.server_state.default_headers
        if defaults is not _Defaults.source:  # uvicorn replaces the list when the date changes
            _Defaults.source = defaults
            _Defaults.block = head_block(defaults)
        if is_head or not body:
            return b"".join((status_line, _Defaults.block, head, b"\r\n"))
        return b"".join((status_line, _Defaults.block, head, b"\r\n", body))

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes its parser refuses (a malformed request line or header, a URL longer
        than httptools reads: 64 KiB), in the API's one error shape (a problem+json body) instead of
        uvicorn's text/plain; the connection closes, as uvicorn closes it."""
        _, headers, body = problem_answer(400, "the request is not valid HTTP/1.1: a malformed request line or "
                                          "header, or a URL longer than 65,535 bytes", "Bad Request")
        head = head_block([*self.server_state.default_headers, *headers, (b"connection", b"close")])
        self.transport.write(b"".join((STATUS_LINE[400], head, b"\r\n", body)))
        self.transport.close()

    def _write(self, data: bytes) -> None:
        """Send one whole response and do what uvicorn does when a response completes."""
        t = self.transport
        if t._buf:
            t.write(data)  # behind what this turn already wrote
        else:
            t._t.write(data)
        self._door.answered += 1
        # as uvicorn's on_response_complete: count it, (re)arm the keep-alive timeout. A timer already
        # pending is kept and marked busy (it then waits another full period): no timer made and
        # cancelled per request. The mark names the timer it was made for: a timer uvicorn arms later
        # (after cancelling this one) is not extended by it.
        self.server_state.total_requests += 1
        task = self.timeout_keep_alive_task
        if task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
        else:
            self._ka_busy = task

    _ka_busy = None  # the keep-alive timer that was pending when the front door last answered

    def timeout_keep_alive_handler(self) -> None:
        if self._ka_busy is not None and self._ka_busy is self.timeout_keep_alive_task:
            self._ka_busy = None  # answered at the front door since the timer was armed: wait another period
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)
            return
        super().timeout_keep_alive_handler()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._fd = 0
        self._idle = False

    def on_body(self, body: bytes) -> None:
        if self._fd == 2:
            self._fd_body.append(body)
        elif self._fd == 0:
            super().on_body(body)

    def on_message_complete(self) -> None:
        self._idle = True
        if self._fd == 1:
            self._fd = 0
            return
        if self._fd == 2:
            self._fd = 0
            body, self._fd_body = b"".join(self._fd_body), None
            try:
                answer = self._door.post(self._fd_path, body)
            except Exception:  # an engine bug: the application answers (and logs) it
                log.debug("front door declined after an error", exc_info=True)
                answer = None
            if answer is not None:
                self._respond("POST", self._fd_path, b"", answer)
                return
            # the application answers: start uvicorn's cycle now, with the body already read
            super().on_headers_complete()
            cycle = self.cycle
            if self._shutting_down:
                cycle.keep_alive = False
            cycle.body = body
            cycle.more_body = False
            cycle.message_event.set()
            return
        super().on_message_complete()

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
        if self._door is not None:
            try:
                if self._front():
                    return
            except Exception:  # never let the front door cost a request: the application answers it
                log.debug("front door declined after an error", exc_info=True)
                self._fd = 0
        super().on_headers_complete()
        if self._shutting_down and self.cycle is not None:  # answer it, then close
            self.cycle.keep_alive = False
