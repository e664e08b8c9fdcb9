# syntax=docker/dockerfile:1
#
# GDAL MCP over HTTP, and the same image for Dask schedulers and workers (docs/deployment.md):
#   docker build -t gdal-mcp .
#   docker run -p 8000:8000 -v "$PWD/data:/data" -e GDAL_MCP_TOKEN=... gdal-mcp
#   docker run gdal-mcp dask scheduler            docker run gdal-mcp dask worker tcp://scheduler:8786
#
# This image has not been built where it was written (no container registry there). Its steps are
# checked on a debootstrapped Debian 12 by scripts/check-image, which reads this file and runs its RUN,
# ENV, WORKDIR, COPY, USER, HEALTHCHECK and CMD lines itself: keep to those instructions (see the
# script for the small grammar it accepts).

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# ---- build: the wheel, and the locked versions (uv.lock) of what it needs with the dask extra ----
FROM ${PYTHON_IMAGE} AS build
ARG UV_VERSION=0.13.9
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1 UV_PYTHON_DOWNLOADS=never
RUN python -m pip install "uv==${UV_VERSION}"
WORKDIR /src
COPY pyproject.toml uv.lock README.md LICENSE /src/
COPY gdal_mcp /src/gdal_mcp
RUN uv build --wheel --out-dir /dist \
 && uv export --quiet --frozen --no-dev --extra dask --no-hashes --no-emit-project --no-header \
        --output-file /dist/constraints.txt

# ---- runtime: the wheel in a venv, no uv, no sources, a non-root user ----
FROM ${PYTHON_IMAGE} AS runtime
ENV VIRTUAL_ENV=/opt/gdal-mcp \
    PATH=/opt/gdal-mcp/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never
# uv and the wheel come from the build stage for this one step only
RUN --mount=type=bind,from=build,source=/dist,target=/dist \
    --mount=type=bind,from=build,source=/usr/local/bin/uv,target=/usr/local/bin/uv \
    uv venv --python python3 /opt/gdal-mcp \
 && uv pip install --python /opt/gdal-mcp/bin/python --compile-bytecode \
        --constraint /dist/constraints.txt "$(ls /dist/gdal_mcp-*.whl)[dask]" \
 && gdal-mcp --version
RUN groupadd --gid 10001 gdal \
 && useradd --uid 10001 --gid gdal --no-log-init --create-home --home-dir /home/gdal --shell /usr/sbin/nologin gdal \
 && mkdir -p /data \
 && chown gdal:gdal /data

# The server reads its settings from GDAL_MCP_* (README, "Options"); set GDAL_MCP_TOKEN at run time
# (without it the server refuses 0.0.0.0) and GDAL_MCP_ALLOW_HOST to the names clients use.
ENV GDAL_MCP_HOST=0.0.0.0 \
    GDAL_MCP_PORT=8000 \
    GDAL_MCP_WORKSPACE=/data
WORKDIR /home/gdal
VOLUME ["/data"]
EXPOSE 8000
USER gdal
# GET /healthz needs no token. Dask containers set HEALTHCHECK_URL to their own /health
# (scheduler: http://127.0.0.1:8787/health; worker started with --dashboard-address :8788: :8788/health).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ.get('HEALTHCHECK_URL') or 'http://127.0.0.1:%s/healthz' % os.environ.get('GDAL_MCP_PORT', '8000'), timeout=4)"]
# Same as: gdal-mcp --transport http --host 0.0.0.0 --port 8000 --workspace /data (the ENV above).
# No ENTRYPOINT: `docker run IMAGE dask worker ...`, `docker run -i IMAGE gdal-mcp` (stdio) work as written.
CMD ["gdal-mcp", "--transport", "http"]
