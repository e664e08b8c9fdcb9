"""A workspace in a bucket on a Dask cluster whose workers share no file system with the server or each other (issue
27), through the official MCP SDK over stdio.

Two `dask worker`s, each in its own network namespace (a veth pair onto a bridge: they reach the scheduler, the
local S3 and each other only over the network) and its own mount namespace, where a private tmpfs hides the directory
the server's scratch space and this test's files are in. The outputs they write (a tile-parallel reproject whose tiles
run on both workers, a two-input raster_calc, a clip, a shapefile of several files) are compared with the same calls
run by the local worker pool on the same bucket: byte-identical objects (the reprojection, whose tiles the workers
finish in any order: the same size, grid, metadata and pixels). Statistics equal the local pool's, and every
result that read the bucket says what it fetched.

Needs root, `ip` (iproute2) and `unshare` (util-linux): namespaces and a bridge. Elsewhere it skips and says why.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import rasterio
from rasterio.transform import from_origin

pytest.importorskip("distributed")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from tests.helpers import DATA  # noqa: E402
from tests.remote_servers import local_s3  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
RGB = DATA / "raster" / "RGB.byte.tif"
#: a 3-band uint16 raster of 2560^2 pixels: its reprojection into a tiled GTiff runs as 2 tiles of 2048^2 (engine/tiles)
SIDE = 2560


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def _namespaces_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2 / util-linux)"
    return None


class Network:
    """A bridge with an address in this namespace, and a network namespace per worker joined to it by a veth pair."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000:05d}"
        self.bridge = f"gmbr{tag}"
        self.subnet = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"
        self.host = f"{self.subnet}.1"
        self.namespaces: list[str] = []
        self.tag = tag
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.host}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def add(self, i: int) -> tuple[str, str]:
        """A namespace for worker i: (its name, its address)."""
        ns, veth, peer = f"gm{self.tag}w{i}", f"gmv{self.tag}{i}", f"gmp{self.tag}{i}"
        address = f"{self.subnet}.{10 + i}"
        _run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", veth, "master", self.bridge)
        _run("ip", "link", "set", veth, "up")
        _run("ip", "link", "set", peer, "netns", ns)
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", peer)
        _run("ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")  # the worker's own egress proxy listens there
        return ns, address

    def close(self) -> None:
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)  # its veth end goes with it
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDAL_MCP_", "AWS_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return {**env, **extra}


def _synthetic(path: Path) -> None:
    """A smooth 3-band uint16 field with noise (compresses, yet every pixel differs), UTM 33N, 10 m pixels."""
    rng = np.random.default_rng(27)
    y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    data = np.stack(
        [(1000 + 800 * np.sin(x / 300 + k) * np.cos(y / 410 - k) + rng.integers(0, 8, (SIDE, SIDE))) for k in range(3)]
    ).astype(np.uint16)
    profile = {
        "driver": "GTiff",
        "width": SIDE,
        "height": SIDE,
        "count": 3,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(400000, 5600000, 10, 10),
        "tiled": True,
        "blockxsize": 512,
        "blockysize": 512,
        "compress": "deflate",
    }
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The bucket (local S3 on the bridge), a scheduler in this namespace and two workers in theirs."""
    reason = _namespaces_missing()
    if reason:
        pytest.skip(reason)
    import boto3

    hidden = tmp_path_factory.getbasetemp()  # every file of this test process: the workers see an empty tmpfs there
    home = tmp_path_factory.mktemp("no-shared-fs")
    try:
        net = Network()
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"cannot make a bridge and network namespaces here: {getattr(e, 'stderr', b'') or e}")
    procs: list[subprocess.Popen[bytes]] = []
    log = open(home / "cluster.log", "wb")  # noqa: SIM115 - closed below
    try:
        with local_s3(net.host) as (endpoint, s3_env):
            s3 = boto3.client("s3", endpoint_url=endpoint, **_boto_credentials(s3_env))
            s3.create_bucket(Bucket="nsteam")
            big = home / "big.tif"
            _synthetic(big)
            s3.upload_file(str(big), "nsteam", "ws/raster/big.tif")
            s3.upload_file(str(RGB), "nsteam", "ws/raster/RGB.byte.tif")
            s3.upload_file(str(DATA / "vector" / "test_gpx.gpx"), "nsteam", "ws/vector/tracks.gpx")
            scheduler_file = home / "scheduler.json"
            procs.append(
                subprocess.Popen(
                    [PY, "-m", "distributed.cli.dask_scheduler", "--host", net.host, "--port", "0", "--no-dashboard",
                     "--scheduler-file", str(scheduler_file)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=_env({}), start_new_session=True,
                )
            )  # fmt: skip
            for _ in range(300):
                if scheduler_file.exists() and scheduler_file.stat().st_size:
                    break
                time.sleep(0.1)
            scheduler = json.loads(scheduler_file.read_text())["address"]
            # Each worker: its network namespace, then a mount namespace of its own with a tmpfs over this test's
            # files (and so over the server's scratch directory, made below them); its temporary files on that tmpfs.
            script = 'mount -t tmpfs tmpfs "$0" && mkdir "$0/tmp" && TMPDIR="$0/tmp" exec "$@"'
            for i in (1, 2):
                ns, address = net.add(i)
                procs.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                         script, str(hidden), PY, "-m", "distributed.cli.dask_worker", scheduler, "--host", address,
                         "--nthreads", "1", "--memory-limit", "3GiB", "--no-dashboard", "--name", f"w{i}"],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=_env(s3_env), start_new_session=True,
                    )
                )  # fmt: skip
            yield {"scheduler": scheduler, "s3": s3, "env": s3_env, "home": home, "hidden": hidden, "big": big}
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait(15)
        log.close()
        net.close()


def _boto_credentials(env: dict[str, str]) -> dict[str, str]:
    return {
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "region_name": env["AWS_REGION"],
    }


def _server(isolated: dict[str, object], *extra: str) -> StdioServerParameters:
    server_tmp = Path(str(isolated["home"])) / f"server-tmp-{len(extra)}"
    server_tmp.mkdir(exist_ok=True)
    env = _env({**isolated["env"], "TMPDIR": str(server_tmp)})  # type: ignore[dict-item]
    return StdioServerParameters(
        command=PY, args=["-m", "gdal_mcp", "--workspace", "s3://nsteam/ws", "--confirm", "never", *extra], env=env
    )


CALLS: list[tuple[str, dict[str, object]]] = [
    ("raster_reproject", {"input": "raster/big.tif", "output": "{out}/big_4326.tif", "dst_crs": "EPSG:4326",
                          "creation_options": {"TILED": "YES", "COMPRESS": "DEFLATE"}}),
    ("raster_calc", {"inputs": {"R": "raster/big.tif:1", "N": "raster/big.tif:3"}, "expression": "(N - R) / (N + R)",
                     "output": "{out}/ndvi.tif"}),
    ("raster_clip", {"input": "raster/RGB.byte.tif", "output": "{out}/clip.tif",
                     "bbox": [150000, 2_700_000, 160000, 2_710_000], "bbox_crs": "EPSG:32618"}),
    ("vector_convert", {"input": "vector/tracks.gpx", "output": "{out}/tracks.shp", "layer": "tracks"}),
    # objects read by one worker and uploaded again under new keys, then the copy's old keys deleted
    ("workspace_copy", {"input": "{out}/tracks.shp", "output": "{out}/copy/routes.shp"}),
    ("workspace_move", {"input": "{out}/copy/routes.shp", "output": "{out}/routes.shp"}),
]  # fmt: skip


async def _run_calls(params: StdioServerParameters, out: str) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for tool, args in CALLS:
            filled = {k: (v.format(out=out) if isinstance(v, str) else v) for k, v in args.items()}
            r = await session.call_tool(tool, filled)
            assert not r.is_error, (tool, r.structured_content)
            results[tool] = r.structured_content or {}
        r = await session.call_tool("raster_stats", {"input": "raster/big.tif"})
        assert not r.is_error, r.structured_content
        results["raster_stats"] = r.structured_content or {}
    return results


def _objects(s3: object, prefix: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket="nsteam", Prefix=prefix)["Contents"]  # type: ignore[attr-defined]
    return {o["Key"][len(prefix) :]: s3.get_object(Bucket="nsteam", Key=o["Key"])["Body"].read() for o in listed}  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_workers_without_a_shared_file_system_write_what_the_local_pool_writes(isolated) -> None:
    from distributed import Client

    # The workers are in place, and see none of this test's files (nor the server's scratch space below them)
    with Client(str(isolated["scheduler"]), timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        seen = client.run(os.listdir, str(isolated["hidden"]))
        hosts = {a.split("://")[1].rsplit(":", 1)[0] for a in client.scheduler_info()["workers"]}
    assert sorted(seen.values()) == [["tmp"], ["tmp"]], seen
    assert len(hosts) == 2 and str(isolated["scheduler"]).split("://")[1].rsplit(":", 1)[0] not in hosts

    local = await _run_calls(_server(isolated, "--workers", "1"), "out-local")
    dask = await _run_calls(_server(isolated, "--executor", "dask", "--dask-scheduler", str(isolated["scheduler"])), "out-dask")

    s3 = isolated["s3"]
    a, b = _objects(s3, "ws/out-local/"), _objects(s3, "ws/out-dask/")
    shapefile = ("shp", "shx", "dbf", "prj", "cpg")
    datasets = {"big_4326.tif", "ndvi.tif", "clip.tif", "tracks.shp", "routes.shp"}
    assert set(a) == {"big_4326.tif", "ndvi.tif", "clip.tif", *(f"{stem}.{ext}" for stem in ("tracks", "routes")
                      for ext in shapefile), *(f"{d}.provenance.json" for d in datasets)}, sorted(a)  # fmt: skip
    assert set(b) == set(a)
    assert all(a[f"routes.{ext}"] == a[f"tracks.{ext}"] for ext in shapefile)
    for name in sorted(set(a) - {"big_4326.tif"}):
        if name.endswith(".provenance.json"):  # each says when and where it was made; both describe the same bytes
            ra, rb = json.loads(a[name]), json.loads(b[name])
            dataset = name.removesuffix(".provenance.json")
            if dataset.endswith(".shp"):  # a shapefile's digest: of its members' (manifest-spec 3.3)
                stem = dataset[:-4]
                listing = sorted(
                    (ext, hashlib.sha256(a[f"{stem}.{ext[1:]}"]).hexdigest()) for ext in (f".{e}" for e in shapefile)
                )
                expected = hashlib.sha256("".join(f"{e}\0{h}\n" for e, h in listing).encode()).hexdigest()
            else:
                expected = hashlib.sha256(a[dataset]).hexdigest()
            assert ra["output"]["sha256"] == expected, name
            assert ra["operation"] == rb["operation"] and [i["sha256"] for i in ra["inputs"]] == [
                i["sha256"] for i in rb["inputs"]
            ]
            continue
        assert a[name] == b[name], f"{name} differs between the local pool and the Dask workers"
    # The tile-parallel reprojection: its tiles are written as the workers finish them, so their order in the file
    # can differ; the file is otherwise the same (size, grid, metadata, every pixel)
    assert len(a["big_4326.tif"]) == len(b["big_4326.tif"])
    with rasterio.MemoryFile(a["big_4326.tif"]) as fa, rasterio.MemoryFile(b["big_4326.tif"]) as fb:
        with fa.open() as x, fb.open() as y:
            assert x.profile == y.profile and x.tags() == y.tags()
            assert np.array_equal(x.read(), y.read())
    # the reprojection is the source's pixels warped (not an empty grid): its mean is the source's, within 1 %
    with rasterio.open(isolated["big"]) as src:  # type: ignore[call-overload]
        source_mean = float(src.read(1).mean())
    with rasterio.MemoryFile(a["big_4326.tif"]) as fa, fa.open() as x:
        warped = x.read(1, masked=True)
    assert abs(float(warped.mean()) - source_mean) < 0.01 * source_mean

    assert dask["raster_stats"]["bands"] == local["raster_stats"]["bands"]
    for results in (local, dask):
        for tool in ("raster_reproject", "raster_stats"):
            remote = results[tool].get("remote")
            assert remote and remote["bytes"] > 0 and remote["requests"] > 0, (tool, results[tool])
