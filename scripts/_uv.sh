# Sourced by the scripts: puts a working `uv` in $UV, installing it with pip when missing.
# Everything it prints goes to stderr: `serve` speaks MCP on stdout.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Compile the environment's bytecode when uv installs it: without .pyc files (and where Python may not write them,
# PYTHONDONTWRITEBYTECODE=1) every server start would compile FastMCP, pydantic … again (~9 s instead of ~1.3 s).
export UV_COMPILE_BYTECODE="${UV_COMPILE_BYTECODE:-1}"
# Trust the system's certificate store, as pip and curl do, not only uv's bundled roots: an MCP host starts the server
# with a minimal environment (no SSL_CERT_FILE), and behind a TLS-inspecting proxy the first run's `uv sync` then
# failed with "invalid peer certificate: UnknownIssuer".
export UV_SYSTEM_CERTS="${UV_SYSTEM_CERTS:-1}"
# uv on PATH, or where `pip install --user uv` put it (~/.local/bin is not always on an MCP host's PATH): a direct
# call, not `python -m uv` (a Python start, and through pyenv's shims a slow one) on every server start.
if command -v uv >/dev/null 2>&1; then
  UV=(uv)
elif [ -x "${HOME:-/nonexistent}/.local/bin/uv" ]; then
  UV=("$HOME/.local/bin/uv")
else
  PY="$(command -v python3 || command -v python)" || { echo "gdal-mcp: python3 is required" >&2; exit 1; }
  if ! "$PY" -m uv --version >/dev/null 2>&1; then
    echo "gdal-mcp: installing uv with pip (first run only)" >&2
    "$PY" -m pip install --quiet --user uv >&2 2>&1 || "$PY" -m pip install --quiet uv >&2 2>&1
  fi
  UV=("$PY" -m uv)
fi

# The project needs Python >= 3.12 (rasterio 1.5, which bundles GDAL 3.12). uv looks for one on PATH and, where it may,
# downloads one; on machines whose default python3 is older and whose newer Pythons sit in pyenv (uv stops at pyenv's
# `python3.12` shim, which fails when that version is not selected, then tries a download), point it at a working one.
# UV_PYTHON set by the caller wins.
# Only needed to create the environment: once .venv has a working Python >= 3.12, uv uses it and the search (a
# Python start per candidate, ~1 s through pyenv's shims) is skipped.
_python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
if [ -z "${UV_PYTHON:-}" ] && ! _python_ok "$ROOT/.venv/bin/python"; then
  for _candidate in python3 python3.12 python3.13 python3.14 \
      "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
    _path="$(command -v "$_candidate" 2>/dev/null)" || continue
    if _python_ok "$_path"; then
      export UV_PYTHON="$_path"
      break
    fi
  done
  unset _candidate _path
fi
