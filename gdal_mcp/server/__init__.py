"""The MCP server process: FastMCP, the tools, approval, the web console and downloads, the job board.

It never loads GDAL (tests/test_architecture.py): it resolves paths with gdal_mcp.sandbox, describes work as a
gdal_mcp.jobs.Job and hands it to an executor (gdal_mcp.execution) through the Executor protocol.
"""
