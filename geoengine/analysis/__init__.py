"""Analysis over a bundle's road network, for notebooks and batch work (docs/analysis.md).

- `network`: the routable graph of one costing as documented arrays, with networkx / scipy / igraph
  exports (`Engine.network`).
- `access`: pandana-style accessibility aggregation and nearest POIs (Numba kernels, both cores).
- `frames`: pandas / GeoPandas conversions of engine results (`geoengine.to_pandas`, `to_geopandas`).

pandas, geopandas, dask and tqdm are the optional extra `geoengine[analysis]`; numpy results never
need them.
"""
