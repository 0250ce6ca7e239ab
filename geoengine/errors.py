"""Domain errors. Every layer raises these; the HTTP façade maps them to one problem-details body.

Each error has an HTTP-like `status`, a short `title` and a human `detail`; `InvalidRequest` also
carries a list of `FieldError(field, message)` where `field` is a path such as `locations[1].lat`.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral


def field_path(*parts) -> str:
    """The one way a field path is written: field_path("locations", 1, "lat") -> "locations[1].lat".
    Parts may be names, indices or whole paths (a pydantic error `loc` tuple works too)."""
    out = ""
    for p in parts:
        if isinstance(p, (tuple, list)):
            p = field_path(*p)
            if not p:
                continue
            out += p if (not out or p.startswith("[")) else "." + p
        elif isinstance(p, Integral):
            out += f"[{int(p)}]"
        elif str(p).startswith(("function-", "tagged-union")) or p == "":
            continue
        else:
            out += ("." if out else "") + str(p)
    return out


def problem_document(status: int, detail: str, title: str | None = None, errors: list[dict] | None = None) -> dict:
    """The one writer of the problem body (RFC 9457) that every error of every endpoint is served as."""
    if title is None:
        from http import HTTPStatus

        try:
            title = HTTPStatus(status).phrase
        except ValueError:
            title = "Error"
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return body


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"field": self.field, "message": self.message}


class GeoengineError(Exception):
    status = 500
    title = "Internal error"

    def __init__(self, detail: str = "", *, headers: dict[str, str] | None = None):
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.headers = headers or {}

    errors: list[FieldError] = []

    def to_problem(self) -> dict:
        return problem_document(self.status, self.detail, self.title, [e.as_dict() for e in self.errors])


class InvalidRequest(GeoengineError):
    """The request's parameters or body are wrong (HTTP 400)."""

    status = 400
    title = "Invalid request"

    def __init__(self, detail: str = "", errors: list[FieldError] | None = None, **kw):
        errors = list(errors or [])
        if not detail and errors:
            detail = "; ".join(f"{e.field}: {e.message}" if e.field else e.message for e in errors)
        super().__init__(detail, **kw)
        self.errors = errors

    @classmethod
    def field(cls, field: str, message: str) -> InvalidRequest:
        return cls(errors=[FieldError(field, message)])


class Unauthorized(GeoengineError):
    status = 401
    title = "Unauthorized"


class Forbidden(GeoengineError):
    status = 403
    title = "Forbidden"


class NotFound(GeoengineError):
    status = 404
    title = "Not found"


class Unprocessable(GeoengineError):
    """The request is well formed but cannot be served (HTTP 422)."""

    status = 422
    title = "Unprocessable request"

    def __init__(self, detail: str = "", errors: list[FieldError] | None = None, **kw):
        super().__init__(detail, **kw)
        self.errors = list(errors or [])


class OutsideCoverage(Unprocessable):
    title = "Outside coverage"


class NoRoute(Unprocessable):
    title = "No route"


class Unsnappable(Unprocessable):
    title = "Location not on the network"


class QuotaExceeded(GeoengineError):
    status = 429
    title = "Too many requests"


class UpstreamError(GeoengineError):
    status = 502
    title = "Upstream error"


class Unavailable(GeoengineError):
    status = 503
    title = "Service unavailable"


class BackendTimeout(GeoengineError):
    status = 504
    title = "Backend timed out"


class BundleError(Unavailable):
    """A bundle folder is missing, incomplete or built by an incompatible version."""

    title = "Bundle not usable"


class FetchError(GeoengineError):
    """A region source could not be fetched or failed verification."""

    title = "Fetch failed"


class BuildError(GeoengineError):
    title = "Build failed"
