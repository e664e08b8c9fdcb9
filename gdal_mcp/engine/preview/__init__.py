"""PNG quicklooks a model can look at: rasters (stretch, colormap, nodata transparent) and vector layers.

No plotting library: rasters are read decimated with rasterio, vectors are burnt with
rasterio.features.rasterize batch by batch, and the PNG is encoded with zlib (see png.py).
"""

from gdal_mcp.engine.preview.common import PreviewResult
from gdal_mcp.engine.preview.raster import raster_preview
from gdal_mcp.engine.preview.vector import vector_preview

__all__ = ["PreviewResult", "raster_preview", "vector_preview"]
