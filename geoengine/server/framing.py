"""Response framing in one place: JSON bodies, problem+json bodies and tile headers.

Every writer of the server frames its answers here: the admission layer's refusals, the FastAPI error
handlers (server/problems.py), the endpoints' fast dispatch (server/dispatch.py),
the tile endpoint and the protocol's 400 for bytes uvicorn's parser refuses. An answer is
`(status, headers, body)`: `headers` a list of raw (name, value) pairs, or a prebuilt header block
(bytes, "name: value\\r\\n" per header; the tile fast path's).
"""

from __future__ import annotations

import orjson

PROBLEM_JSON = "application/problem+json"
JSON_CT = (b"content-type", b"application/json")
PROBLEM_CT = (b"content-type", PROBLEM_JSON.encode())
_DUMPS_OPTS = orjson.OPT_SERIALIZE_NUMPY

Answer = tuple[int, list | bytes, bytes]


def dumps(doc) -> bytes:
    """JSON bytes of a response document, as FastAPI's JSONResponse writes it (orjson; the standard
    library's encoder for what orjson refuses, such as non-string keys)."""
    try:
        return orjson.dumps(doc, option=_DUMPS_OPTS)
    except TypeError:
        import json

        from fastapi.encoders import jsonable_encoder

        return json.dumps(jsonable_encoder(doc), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode()


def header_pairs(headers: dict | None) -> list:
    """Extra headers of an error ({"Retry-After": "30"}) as raw pairs."""
    return [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]


def body_answer(body: bytes, status: int = 200, content_type=JSON_CT, extra=()) -> Answer:
    return status, [content_type, (b"content-length", str(len(body)).encode()), *extra], body


def json_answer(doc, status: int = 200) -> Answer:
    return body_answer(dumps(doc), status)


def reply_answer(reply, content_type=JSON_CT) -> Answer:
    """A dialect's Reply (geoengine.dialects): its JSON document (as `content_type`), or its text."""
    if reply.media_type is None:
        return body_answer(dumps(reply.doc), reply.status, content_type)
    return body_answer(reply.doc.encode(), reply.status, (b"content-type", reply.media_type.encode()))


def problem_bytes(status: int, detail: str, title: str | None = None, errors=None) -> bytes:
    from geoengine.errors import problem_document

    return dumps(problem_document(status, detail, title, errors))


def problem_answer(status: int, detail: str, title: str | None = None, headers: dict | None = None) -> Answer:
    return body_answer(problem_bytes(status, detail, title), status, PROBLEM_CT, header_pairs(headers))


def error_answer(exc) -> Answer:
    """A domain error (GeoengineError) as its problem body with its headers."""
    return body_answer(dumps(exc.to_problem()), exc.status, PROBLEM_CT, header_pairs(exc.headers))


async def send_answer(send, answer: Answer, head: bool = False) -> None:
    """Send an answer through ASGI (a prebuilt header block is split back into pairs)."""
    status, headers, body = answer
    if type(headers) is bytes:
        headers = [tuple(line.split(b": ", 1)) for line in headers.split(b"\r\n") if line]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_problem(send, status: int, detail: str, title: str | None = None, headers: dict | None = None):
    await send_answer(send, problem_answer(status, detail, title, headers))


def head_block(headers) -> bytes:
    """Raw header pairs as an HTTP header block."""
    return b"".join(b"".join((n, b": ", v, b"\r\n")) for n, v in headers)


# ------------------------------------------------------------------------------------------ tiles
CACHE_CONTROL = "public, max-age=86400"
MEDIA_TYPES = {"pbf": "application/x-protobuf", "mvt": "application/x-protobuf", "png": "image/png",
               "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp", "avif": "image/avif"}
TILE_CC = (b"cache-control", CACHE_CONTROL.encode())
_VARY = (b"vary", b"Accept-Encoding")
_GZ = (b"content-encoding", b"gzip")


def tile_headers(fmt: str, etag: str, length: int | None, gzip: bool) -> list:
    """A tile answer's headers: cache-control, etag and vary; with `length` (a 200) also the encoding,
    the media type and the length (a 304 has only the first three)."""
    headers = [TILE_CC, (b"etag", etag.encode()), _VARY]
    if length is None:
        return headers
    if gzip:
        headers.append(_GZ)
    headers += [(b"content-type", MEDIA_TYPES.get(fmt, "application/octet-stream").encode()),
                (b"content-length", str(length).encode())]
    return headers


NO_TILE = [TILE_CC]  # a 204: a valid coordinate without a tile
