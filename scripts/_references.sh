# Sourced by scripts/test (and so by .ci/run): the references some tests compare with, installed when missing on a
# Debian machine where this runs as root (a fresh CI machine). Never runtime dependencies of the server; best effort:
# where they cannot be installed, the tests that need them skip and say why.
#   gdal-bin, python3-gdal  the GDAL command-line tools (gdalwarp, ogr2ogr, gdaldem … and ogrmerge.py)
#   chromium, chromium-driver  a headless browser for the approval console test (tests/e2e/test_console.py)
#   iproute2  network namespaces for the Dask workers without a shared file system (tests/e2e/test_dask_no_shared_fs.py)
# GDAL_MCP_NO_APT=1 skips this. Everything it prints goes to stderr.
_references_missing() {  # one line per group of missing packages
  { command -v gdalinfo >/dev/null 2>&1 && dpkg -s python3-gdal >/dev/null 2>&1; } || echo "gdal-bin python3-gdal"
  { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || echo "chromium chromium-driver"
  command -v ip >/dev/null 2>&1 || echo "iproute2"
}
if [ -z "${GDAL_MCP_NO_APT:-}" ] && command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
  _missing="$(_references_missing)"
  if [ -n "$_missing" ]; then
    echo "gdal-mcp: installing the tests' references with apt-get:" $_missing >&2
    # A group at a time (GDAL's tools, the browser): a package a distribution lacks costs only its own group.
    _updated=""
    while read -r _group; do
      # shellcheck disable=SC2086 # a list of package names
      (export DEBIAN_FRONTEND=noninteractive && { [ -n "$_updated" ] || apt-get update -qq >&2; } \
        && apt-get install -y -qq $_group >/dev/null) \
        || echo "gdal-mcp: could not install $_group: the tests comparing with them will skip" >&2
      _updated=1
    done <<< "$_missing"
    unset _group _updated
  fi
  unset _missing
fi

# Azurite, Microsoft's Azure Storage emulator (MIT, from the npm registry), for the tests writing to az:// (tests/
# remote_servers.local_azurite): installed once with the machine's npm into ~/.cache/gdal-mcp/azurite-<version>
# (GDAL_MCP_AZURITE names another azurite-blob). Best effort like the rest: without Node.js the tests that need it skip.
AZURITE_VERSION="3.37.0"
_azurite_dir="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gdal-mcp/azurite-$AZURITE_VERSION"
if [ -z "${GDAL_MCP_AZURITE:-}" ] && [ ! -x "$_azurite_dir/node_modules/.bin/azurite-blob" ] \
    && command -v npm >/dev/null 2>&1; then
  echo "gdal-mcp: installing the tests' Azure Storage emulator (azurite $AZURITE_VERSION) with npm" >&2
  mkdir -p "$_azurite_dir" \
    && (cd "$_azurite_dir" && npm install --silent --no-audit --no-fund --no-save "azurite@$AZURITE_VERSION" >&2 2>&1) \
    || echo "gdal-mcp: could not install azurite: the tests writing to az:// will skip" >&2
fi
if [ -z "${GDAL_MCP_AZURITE:-}" ] && [ -x "$_azurite_dir/node_modules/.bin/azurite-blob" ]; then
  export GDAL_MCP_AZURITE="$_azurite_dir/node_modules/.bin/azurite-blob"
fi
unset _azurite_dir
