"""Benchmark harness: the GDAL MCP server over stdio against the GDAL command line (`python -m bench`)."""
