# Sourced by the scripts: puts a working `uv` in $UV, installing it with pip when missing.
# Everything it prints goes to stderr: `serve` speaks MCP on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if command -v uv >/dev/null 2>&1; then
  UV=(uv)
else
  PY="$(command -v python3 || command -v python)" || { echo "gdal-mcp: python3 is required" >&2; exit 1; }
  if ! "$PY" -m uv --version >/dev/null 2>&1; then
    echo "gdal-mcp: installing uv with pip (first run only)" >&2
    "$PY" -m pip install --quiet --user uv >&2 2>&1 || "$PY" -m pip install --quiet uv >&2 2>&1
  fi
  UV=("$PY" -m uv)
fi
