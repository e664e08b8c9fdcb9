"""Pure GDAL work: paths in, results out, progress through a plain callback. No MCP imports here."""
