"""Validating library calls through the same pydantic models the façade uses, with field paths."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from geoengine.errors import FieldError, InvalidRequest, field_path


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
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            errors.append(FieldError(field_path(err.get("loc", ())), msg))
        raise InvalidRequest(errors=errors) from None
