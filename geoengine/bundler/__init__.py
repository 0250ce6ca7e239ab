"""Building bundles: fetching region sources, running named stages, publishing atomically."""
