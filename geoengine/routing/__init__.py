"""Routing: snapping (`snap`), graph algorithms (`ch`, `dijkstra`), route and matrix services."""
