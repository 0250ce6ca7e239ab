"""Validating library calls through the same pydantic models the façade uses, with field paths."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from geoengine.errors import FieldError, InvalidRequest, field_path


def error_message(err: dict) -> str:
    """A pydantic error's message as the API writes it (without pydantic's "Value error, " prefix)."""
    msg = err.get("msg", "invalid value")
    return msg[len("Value error, "):] if msg.startswith("Value error, ") else msg


def validate(model: type[BaseModel], request=None, **fields):
    """`request` (a model instance or a dict) or keyword fields -> a validated model instance."""
    if isinstance(request, model):
        return request
    data = dict(request or {})
    data.update({k: v for k, v in fields.items() if v is not None})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            errors.append(FieldError(field_path(err.get("loc", ())), error_message(err)))
        raise InvalidRequest(errors=errors) from None
