"""Uploads whose answer is lost on the way (a proxy or the network drops it after the store took the object): each
conditional write is sent once and carries a token of its own, so a write that happened is reported as written (and
is cleaned up with the rest when a later part fails), and an object that was there before, even with the same bytes,
is still already-exists. Against a local S3 (moto) and Azure (Azurite), through a relay that drops one answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gdal_mcp.engine import upload
from gdal_mcp.errors import GdalMcpError
from tests.remote_servers import environment, local_azurite, local_s3


class DroppingRelay:
    """Forwards HTTP requests to `upstream` one connection each; the answer to the first PUT whose request line
    contains `victim` is read from the upstream and thrown away (the client's connection is closed instead)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream, self.victim, self.dropped = upstream, b"", list[bytes]()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            request = _read_request(client)
            if not request:
                return
            head, _, body = request.partition(b"\r\n\r\n")
            lines = [h for h in head.split(b"\r\n") if not h.lower().startswith((b"connection:", b"expect:"))]
            with socket.create_connection(self.upstream) as up:
                up.sendall(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body)
                answer = b""
                while chunk := up.recv(65536):
                    answer += chunk
            first = lines[0]
            if self.victim and first.startswith(b"PUT ") and self.victim in first and not self.dropped:
                self.dropped.append(answer.split(b"\r\n", 1)[0])
                return  # closed without an answer: the store has the object, the client never hears it
            client.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def _read_request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0)
    if any(h.lower().startswith(b"expect: 100-continue") for h in head.split(b"\r\n")) and len(body) < length:
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture(scope="module")
def s3() -> Iterator[tuple[DroppingRelay, Any, str]]:
    import boto3

    with local_s3() as (endpoint, env), environment(env):
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="lost")
        host, port = endpoint.removeprefix("http://").split(":")
        relay = DroppingRelay((host, int(port)))
        try:
            with environment({"AWS_S3_ENDPOINT": f"127.0.0.1:{relay.port}"}):
                yield relay, client, "/vsis3/lost"
        finally:
            relay.close()


@pytest.fixture(scope="module")
def azure() -> Iterator[tuple[DroppingRelay, Any, str]]:
    from azure.storage.blob import BlobServiceClient

    with local_azurite() as (endpoint, env):
        service = BlobServiceClient.from_connection_string(env["AZURE_STORAGE_CONNECTION_STRING"])
        container = service.create_container("lost")
        host_port = endpoint.removeprefix("http://").split("/")[0]
        host, port = host_port.split(":")
        relay = DroppingRelay((host, int(port)))
        relayed = env["AZURE_STORAGE_CONNECTION_STRING"].replace(host_port, f"127.0.0.1:{relay.port}")
        try:
            with environment({"AZURE_STORAGE_CONNECTION_STRING": relayed}):
                yield relay, container, "/vsiaz/lost"
        finally:
            relay.close()


def _read(store: Any, key: str) -> bytes:
    if hasattr(store, "download_blob"):
        return bytes(store.download_blob(key).readall())
    return bytes(store.get_object(Bucket="lost", Key=key)["Body"].read())


def _put(store: Any, key: str, data: bytes) -> None:
    if hasattr(store, "upload_blob"):
        store.upload_blob(key, data, overwrite=True)
    else:
        store.put_object(Bucket="lost", Key=key, Body=data)


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_a_write_whose_answer_was_lost_counts_as_written(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    relay, store, root = request.getfixturevalue(kind)
    src = tmp_path / "out.tif"
    src.write_bytes(b"the new output")
    relay.victim, relay.dropped = f"/{kind}-new/out.tif".encode(), []
    assert upload.upload([str(src)], [f"{root}/{kind}-new/out.tif"]) == [f"{root}/{kind}-new/out.tif"]
    assert relay.dropped and b" 20" in relay.dropped[0]  # the store took it; its answer never arrived
    assert _read(store, f"{kind}-new/out.tif") == b"the new output"
    # an approved replace (If-Match) whose answer is lost: replaced, not a conflict
    from gdal_mcp.engine import objects

    version = objects.etag(f"{root}/{kind}-new/out.tif")
    src.write_bytes(b"the replacement")
    relay.dropped = []
    upload.upload([str(src)], [f"{root}/{kind}-new/out.tif"], replace={f"{root}/{kind}-new/out.tif": version})
    assert relay.dropped and _read(store, f"{kind}-new/out.tif") == b"the replacement"


@pytest.mark.parametrize("kind", ["s3", "azure"])
def test_an_object_that_was_there_is_never_taken_for_ours(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Same bytes, another writer: already-exists, and nothing of this upload stays (its side file is deleted)."""
    relay, store, root = request.getfixturevalue(kind)
    relay.victim = b""
    _put(store, f"{kind}-old/out.tif", b"identical bytes")
    (tmp_path / "out.tif").write_bytes(b"identical bytes")
    (tmp_path / "out.tif.aux.xml").write_bytes(b"<PAMDataset/>")
    with pytest.raises(GdalMcpError) as e:
        upload.upload(
            [str(tmp_path / "out.tif.aux.xml"), str(tmp_path / "out.tif")],
            [f"{root}/{kind}-old/out.tif.aux.xml", f"{root}/{kind}-old/out.tif"],
        )
    assert e.value.code == "already-exists"
    assert _read(store, f"{kind}-old/out.tif") == b"identical bytes"
    with pytest.raises(Exception):  # noqa: B017, PT011 - the store's own not-found error
        _read(store, f"{kind}-old/out.tif.aux.xml")
