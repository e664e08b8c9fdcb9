"""Between rasters and vectors: masks, rasterize, polygonize, contours, zonal statistics, values at points.

engine/raster and engine/vector never import each other (tests/test_architecture.py); what needs both
lives here, like rasterio.features: it may import both, and both may use it (raster and vector clips
share masks.py). Helpers that need neither sit one level up: crs.py, bbox.py, geometry_transform.py,
grid.py, options.py.
"""
