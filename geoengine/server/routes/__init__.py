"""The endpoints' own parts (parse steps, models, documents); the table that declares each endpoint once,
and from which the FastAPI routes are generated, is server/endpoints.py."""
