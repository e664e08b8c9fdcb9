"""Writing to Azure Blob Storage (az://container/key, GDAL's /vsiaz/): uploads and folder listings with Microsoft's
azure-storage-blob, on the credentials GDAL reads (AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with
AZURE_STORAGE_ACCESS_KEY or AZURE_STORAGE_SAS_TOKEN).

Why not GDAL's /vsiaz/ writer, as for S3: when a PUT is refused with 409 BlobAlreadyExists (what `If-None-Match: *`
gives for a blob that exists), GDAL deletes the blob and sends the PUT again, so the condition that was to keep the
object would remove it (seen with GDAL 3.12.2 against Azurite, which also ignores `If-None-Match` on the DELETE). The
SDK sends a file below 64 MiB as one Put Blob and a larger one as blocks committed by one Put Block List, each with
the condition: a blob appears whole or not at all, and never replaces one unless named in its version (If-Match).
Its listing gives each blob's ETag, which GDAL's /vsiaz/ directory entries leave out.

Reads, deletes and everything else go through GDAL. Requests go through the workers' egress proxy (HTTP(S)_PROXY).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from gdal_mcp.errors import GdalMcpError
from gdal_mcp.sandbox.remote import shown

PREFIX = "/vsiaz/"
#: the blob metadata naming the upload that wrote it (one random token per write)
UPLOAD_MARK = "gdalmcpupload"


def is_azure(path: str) -> bool:
    return path.startswith(PREFIX)


def _split(path: str) -> tuple[str, str]:
    container, _, key = path.removeprefix(PREFIX).partition("/")
    return container, key


@functools.lru_cache(maxsize=4)
def _service(connection: str, account: str, key: str, sas: str) -> Any:
    from azure.storage.blob import BlobServiceClient

    # No retries: a conditional write sent again after its answer was lost is refused (409, 412) because of its own
    # first success, and would be reported as not written or changed meanwhile (put() checks the MD5 instead)
    if connection:
        return BlobServiceClient.from_connection_string(connection, retry_total=0)
    url = f"https://{account}.blob.core.windows.net"
    credential: Any = {"account_name": account, "account_key": key} if key else sas.lstrip("?")
    return BlobServiceClient(url, credential=credential, retry_total=0)


def service() -> Any:
    """The SDK's client for the account the environment names (as GDAL reads it); unsupported when writing needs a
    credential this server does not pass on to the SDK."""
    env = os.environ
    connection = env.get("AZURE_STORAGE_CONNECTION_STRING", "").strip()
    account = env.get("AZURE_STORAGE_ACCOUNT", "").strip()
    key = env.get("AZURE_STORAGE_ACCESS_KEY", "").strip()
    sas = (env.get("AZURE_STORAGE_SAS_TOKEN") or env.get("AZURE_SAS") or "").strip()
    if not connection and not (account and (key or sas)):
        raise GdalMcpError(
            "unsupported",
            "writing to az:// needs AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with "
            "AZURE_STORAGE_ACCESS_KEY or AZURE_STORAGE_SAS_TOKEN, in the server's environment (the operator sets it); "
            "nothing was written. Write the output to the workspace instead",
        )
    return _service(connection, account, key, sas)


def _blob(path: str) -> Any:
    container, key = _split(path)
    return service().get_blob_client(container, key)


def put(src: str, dst: str, *, expect: str = "", progress: Callable[[int], None] | None = None) -> str:
    """Write the local file `src` to the blob `dst` (a /vsiaz/ path) whole: a new blob (If-None-Match: *) or, with
    `expect`, the blob in that version only (If-Match); its new ETag. already-exists / conflict when refused. Sent
    once; the blob carries a token of this write, so a write whose answer was lost is recognised as ours."""
    import uuid

    from azure.core import MatchConditions
    from azure.core.exceptions import (
        AzureError,
        HttpResponseError,
        ResourceExistsError,
        ResourceModifiedError,
        ResourceNotFoundError,
    )

    condition: dict[str, Any] = (
        {"overwrite": True, "etag": f'"{expect}"', "match_condition": MatchConditions.IfNotModified}
        if expect
        else {"overwrite": False}
    )
    hook = (lambda current, _total: progress(int(current))) if progress else None
    token = uuid.uuid4().hex  # stored with the blob (Put Blob, or the block list's commit): this write told apart
    blob = _blob(dst)
    try:
        with open(src, "rb") as fh:
            answer = blob.upload_blob(
                fh, length=os.path.getsize(src), progress_hook=hook, metadata={UPLOAD_MARK: token}, **condition
            )
    except AzureError as e:
        ours = _ours(blob, token)  # the answer to this very write was lost on the way (a proxy, the network)
        if ours is not None:
            return ours
        if isinstance(e, ResourceExistsError):
            raise GdalMcpError(
                "already-exists",
                f"output '{shown(dst)}' already exists (or was being written by someone else); nothing was written. "
                "Choose another key, or pass overwrite=true to replace it",
            ) from None
        if isinstance(e, ResourceModifiedError | ResourceNotFoundError):
            raise GdalMcpError(
                "conflict",
                f"'{shown(dst)}' changed while the job ran (someone else wrote or deleted it); it was not replaced. Look "
                "at it again and repeat the call if it is still wanted",
            ) from None
        # its text quotes the request URL, which may carry a SAS: only status and code, or the kind of failure
        why = _status(e) if isinstance(e, HttpResponseError) else type(e).__name__
        raise GdalMcpError("gdal-error", f"uploading {shown(dst)} failed: {why}") from None
    return str(answer.get("etag", "")).strip('"')


def _ours(blob: Any, token: str) -> str | None:
    """The ETag of the blob when this upload (its `token`) wrote it, else None."""
    from azure.core.exceptions import AzureError

    try:
        props = blob.get_blob_properties()
    except AzureError:
        return None
    return str(props.etag).strip('"') if (props.metadata or {}).get(UPLOAD_MARK) == token else None


def _status(e: Any) -> str:
    """An SDK error as 'HTTP 403 AuthorizationFailure' (its own text quotes the request URL, which may carry a SAS);
    out-of-root when the egress proxy refused the request (execution/egress.py)."""
    if e.status_code == 451:
        raise GdalMcpError("out-of-root", "the request was outside the allowed remote locations (refused by the proxy)")
    return f"HTTP {e.status_code} {getattr(e, 'error_code', None) or e.reason or ''}".strip()


def write(path: str, data: bytes, *, create: bool, expect: str = "") -> bool:
    """One small blob written under a condition (new only, or only in version `expect`); whether the store took it."""
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError

    condition: dict[str, Any] = (
        {"overwrite": False}
        if create
        else {"overwrite": True, "etag": f'"{expect}"', "match_condition": MatchConditions.IfNotModified}
    )
    try:
        _blob(path).upload_blob(data, **condition)
    except HttpResponseError:
        return False
    return True


def listing(folder: str, limit: int) -> dict[str, dict[str, Any]]:
    """Every blob directly in the /vsiaz/ `folder`: name -> {size, mtime, etag} (one listing, fresh; at most `limit`)."""
    container, prefix = _split(folder.rstrip("/"))
    prefix = f"{prefix}/" if prefix else ""
    found: dict[str, dict[str, Any]] = {}
    from azure.core.exceptions import HttpResponseError

    try:
        for item in service().get_container_client(container).walk_blobs(name_starts_with=prefix, delimiter="/"):
            if len(found) >= limit:
                break
            name = str(item.name)[len(prefix) :]
            if not name or "/" in name or not hasattr(item, "etag"):  # a 'folder' (BlobPrefix)
                continue
            modified = getattr(item, "last_modified", None)
            found[name] = {
                "size": int(item.size or 0),
                "mtime": int(modified.timestamp()) if modified else 0,
                "etag": str(item.etag or "").strip('"'),
            }
    except HttpResponseError as e:
        if e.status_code == 404:
            return {}
        raise GdalMcpError("gdal-error", f"listing {shown(folder)} failed: {_status(e)}") from None
    return found
