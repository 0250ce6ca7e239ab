"""The endpoints' own parts (parse steps, models, documents); the table that declares each endpoint once,
and from which the FastAPI routes are generated, is server/endpoints.py."""


def query_param(name: str, description: str = "", schema: dict | None = None, required: bool = False,
                **string) -> dict:
    """An OpenAPI query parameter the dialects' routes document by hand: of `schema`, or a string with
    the `string` rules (pattern, enum, ...)."""
    return {"name": name, "in": "query", "required": required, "description": description,
            "schema": schema or {"type": "string", **string}}


def json_responses(ok: str, ok_schema: dict, error: str, error_schema: dict) -> dict:
    """A dialect's documented answers: 200 with its document, 400 with its own error body."""
    return {200: {"description": ok, "content": {"application/json": {"schema": ok_schema}}},
            400: {"description": error, "content": {"application/json": {"schema": error_schema}}}}
