"""The access log of the front door (geoengine.server.protocol): while the `uvicorn.access` logger is
uvicorn's default, the front door writes uvicorn's line itself; the lines are the same, in the same
order, as when every line goes through `logging` (a filter on the logger forces that), for answers
of the front door and of the application alike. Any other configuration gets the `logging` call."""

from __future__ import annotations

import asyncio
import copy
import io
import logging

from uvicorn.config import LOGGING_CONFIG, Config
from uvicorn.logging import AccessFormatter
from uvicorn.server import ServerState

from geoengine.server import protocol
from geoengine.server.protocol import CorkedHttpToolsProtocol
from tests.server.test_frontdoor import TILE, Conn, Transport, get

# the front door's answers (a tile, /health, an escaped query string, a bad tile column, an unknown tile
# source, a 304) and the application's (an unknown path)
REQUESTS = [(TILE, ""), ("/health", ""), ("/nowhere/x", ""), ("/search?q=Andorra%20la&size=2", ""),
            ("/tiles/andorra/12/x/1512", ""), ("/tiles/nope/1/0/0", ""), (TILE, "If-None-Match: *\r\n")]


class Front(Conn):
    """A connection whose protocol writes the access log (uvicorn's default logging configuration)."""

    def __init__(self, app, loop, stream, through_logging: bool):
        log_config = copy.deepcopy(LOGGING_CONFIG)  # uvicorn's default, as `geoengine serve` runs it
        log_config["formatters"]["access"]["use_colors"] = False  # as to a file, also when pytest has a tty
        config = Config(app, http=CorkedHttpToolsProtocol, lifespan="off", access_log=True,
                        log_config=log_config)
        config.load()
        logger = logging.getLogger("uvicorn.access")
        logger.handlers[0].setStream(stream)
        if through_logging:
            logger.addFilter(_everything)
        self.loop = loop
        self.state = ServerState()
        self.state.default_headers = [(b"server", b"uvicorn")]
        self.proto = CorkedHttpToolsProtocol(config=config, server_state=self.state, app_state={}, _loop=loop)
        self.transport = Transport()
        self.proto.connection_made(self.transport)
        self.seen = 0


def _everything(record) -> bool:
    return True


def _lines(app, key: str, through_logging: bool) -> tuple[list[str], int, bool]:
    """The access-log lines of REQUESTS on one connection, the front door's answers among them, and
    whether the front door wrote its lines itself."""
    door = app.state.front_door
    logger = logging.getLogger("uvicorn.access")

    async def main():
        buf = io.StringIO()
        conn = Front(app, asyncio.get_running_loop(), buf, through_logging)
        try:
            before = door.answered
            await conn.exchange(get("/health", key), 1)  # the key cached for the front door
            for path, extra in REQUESTS:
                await conn.exchange(get(path, key, extra=extra), 1)
            await asyncio.sleep(0.05)
            direct = conn.proto._access is not None
            conn.proto.connection_lost(None)
        finally:
            logger.removeFilter(_everything)
        return buf.getvalue().splitlines(), door.answered - before, direct

    return asyncio.run(main())


def test_front_door_lines_are_the_logging_lines(served):
    app, store, _ = served
    saved = logging.getLogger("uvicorn.access").handlers[:]
    try:  # a new key each: its first request is the application's (not yet in the key cache)
        fast, answered, direct = _lines(app, store.create("unlimited")[0], through_logging=False)
        slow, answered_slow, direct_slow = _lines(app, store.create("unlimited")[0], through_logging=True)
    finally:
        logging.getLogger("uvicorn.access").handlers[:] = saved
    assert direct and not direct_slow
    assert answered >= 6 and answered == answered_slow  # most of them answered by the front door
    assert len(fast) == len(REQUESTS) + 1
    assert fast == slow
    assert fast[1] == f'INFO:     127.0.0.1:40000 - "GET {TILE} HTTP/1.1" 200 OK'
    assert fast[3] == 'INFO:     127.0.0.1:40000 - "GET /nowhere/x HTTP/1.1" 404 Not Found'
    assert fast[-1].endswith('" 304 Not Modified')


def test_only_uvicorns_default_line_is_written_directly():
    logger = logging.getLogger("geoengine.test.access")
    handler = logging.StreamHandler(io.StringIO())
    logger.addHandler(handler)
    logger.propagate = False
    loop = asyncio.new_event_loop()
    default = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    try:
        handler.setFormatter(AccessFormatter(default, use_colors=False))
        assert protocol._access_log(logger, loop) is not None
        for other in (AccessFormatter("%(asctime)s " + default, use_colors=False),
                      AccessFormatter(default, use_colors=True), logging.Formatter("%(message)s")):
            handler.setFormatter(other)  # a timestamp, colours, another line: logging writes it
            assert protocol._access_log(logger, loop) is None
        handler.setFormatter(AccessFormatter(default, use_colors=False))
        logger.addFilter(_everything)  # a filter: logging
        assert protocol._access_log(logger, loop) is None
        logger.removeFilter(_everything)
        logger.addHandler(logging.StreamHandler(io.StringIO()))  # a second handler: logging
        assert protocol._access_log(logger, loop) is None
    finally:
        loop.close()
        logger.handlers.clear()
