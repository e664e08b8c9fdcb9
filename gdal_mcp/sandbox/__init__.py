"""The sandbox: the only place that turns a user path into an allowed real path.

Every tool argument, every resource read and every file a dataset refers to (VRT sources, archive
members, subdataset containers) goes through `Sandbox`. Containment is decided on canonical paths
(symlinks resolved) component by component, never by string prefix. Outputs are written to a hidden
temporary directory beside their final place and renamed into place only when the job succeeds.

One concern per module; `Sandbox` (core.py) holds the roots and calls them:

- paths.py: workspace roots, containment, plain files and directories, display, resource URIs, scrubbing
  the server's layout out of messages;
- inputs.py: GDAL dataset names (files, /vsi chains, archives, connection strings, network locations,
  globs) resolved to what GDAL opens and the files it reaches;
- references.py: what a dataset names inside or beside itself (VRT/MRF/KML references, .aux.xml overview
  files, side files that are links) and the files GDAL reports after opening;
- options.py: SQL, open options and creation options;
- outputs.py: output paths, their temporary directory and the commit (rename_noreplace);
- temporaries.py: the owner marker of a temporary directory and the sweep of stale ones.

Nothing here imports GDAL: the server, which never loads it, resolves every path with this package.
"""

from __future__ import annotations

from gdal_mcp.sandbox.core import Sandbox
from gdal_mcp.sandbox.inputs import (
    ARCHIVE_SUFFIXES,
    ARCHIVE_VSI,
    FILE_CONNECTION_PREFIXES,
    MAX_PATTERN_MATCHES,
    NETWORK_CONNECTION_PREFIXES,
    NETWORK_SCHEMES,
    NETWORK_VSI,
    ResolvedInput,
)
from gdal_mcp.sandbox.options import (
    FORBIDDEN_OPEN_OPTIONS,
    OPTION_FILE_WORDS,
    SQL_CLAUSE_END,
    SQL_FORBIDDEN_FUNCTIONS,
    SQL_FORBIDDEN_WORDS,
    SQL_VIRTUAL_MODULE,
    sql_tokens,
)
from gdal_mcp.sandbox.outputs import OutputTarget, rename_noreplace
from gdal_mcp.sandbox.paths import (
    FORBIDDEN_TREES,
    MAX_COMPONENT_LENGTH,
    MAX_PATH_LENGTH,
    RESOURCE_PREFIX,
    TMP_DIR_RE,
    TMP_PREFIX,
)
from gdal_mcp.sandbox.references import (
    LINK_SCAN_MAX_ENTRIES,
    MAX_REFERENCE_DEPTH,
    MRF_REFERENCE_TAGS,
    VRT_REFERENCE_TAGS,
)
from gdal_mcp.sandbox.temporaries import OWNER_FILE, SWEEP_MAX_DIRS, SWEEP_MAX_SECONDS, _owner_identity

__all__ = [
    "ARCHIVE_SUFFIXES",
    "ARCHIVE_VSI",
    "FILE_CONNECTION_PREFIXES",
    "FORBIDDEN_OPEN_OPTIONS",
    "FORBIDDEN_TREES",
    "LINK_SCAN_MAX_ENTRIES",
    "MAX_COMPONENT_LENGTH",
    "MAX_PATH_LENGTH",
    "MAX_PATTERN_MATCHES",
    "MAX_REFERENCE_DEPTH",
    "MRF_REFERENCE_TAGS",
    "NETWORK_CONNECTION_PREFIXES",
    "NETWORK_SCHEMES",
    "NETWORK_VSI",
    "OPTION_FILE_WORDS",
    "OWNER_FILE",
    "RESOURCE_PREFIX",
    "SQL_CLAUSE_END",
    "SQL_FORBIDDEN_FUNCTIONS",
    "SQL_FORBIDDEN_WORDS",
    "SQL_VIRTUAL_MODULE",
    "SWEEP_MAX_DIRS",
    "SWEEP_MAX_SECONDS",
    "TMP_DIR_RE",
    "TMP_PREFIX",
    "VRT_REFERENCE_TAGS",
    "OutputTarget",
    "ResolvedInput",
    "Sandbox",
    "_owner_identity",
    "rename_noreplace",
    "sql_tokens",
]
