"""Work above `Engine` (docs/analysis.md): `warm` fills the compile cache by running the request paths on
a small bundle cut out of the real one (`geoengine warm`).

What `Engine`'s notebook calls need lives below `Engine`: the routable network and its exports
(`geoengine.routing.network`), accessibility and nearest POIs (`geoengine.routing.access`),
`unsnappable="nan"` (`geoengine.services.unsnappable`), many isochrones (`geoengine.services.batch_iso`)
and the pandas / GeoPandas conversions (`geoengine.frames`). Nothing below `Engine`, nor `engine.py`,
imports this package (tests/test_architecture.py).

pandas, geopandas, dask and tqdm are the optional extra `geoengine[analysis]`; numpy results never
need them.
"""
