"""The engine's own map page (GET /) and safe browser access: page sessions, CORS, publishable keys."""
