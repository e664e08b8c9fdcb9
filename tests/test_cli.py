"""Command line: --version, --help, options and their GDAL_MCP_* environment variables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gdal_mcp.cli import build_parser, settings_from_args
from gdal_mcp.config import GiB, parse_size

OPTIONS = [
    "--transport",
    "--host",
    "--port",
    "--workspace",
    "--read-only",
    "--confirm",
    "--timeout",
    "--max-memory",
    "--workers",
    "--audit-log",
    "--max-resource-size",
    "--max-message-size",
    "--log-level",
    "--allow-network",
    "--allow-origin",
    "--allow-host",
    "--version",
]


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GDAL_MCP_")}
    return subprocess.run(
        [sys.executable, "-m", "gdal_mcp", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_version_names_the_libraries() -> None:
    out = run("--version")
    assert out.returncode == 0
    for word in ("gdal-mcp 0.1.0", "GDAL 3.", "PROJ ", "rasterio ", "pyogrio "):
        assert word in out.stdout


def test_help_lists_every_option_and_its_env_var() -> None:
    out = run("--help").stdout
    for opt in OPTIONS:
        assert opt in out
    for env in (
        "GDAL_MCP_TRANSPORT",
        "GDAL_MCP_WORKSPACE",
        "GDAL_MCP_READ_ONLY",
        "GDAL_MCP_TIMEOUT",
        "GDAL_MCP_MAX_MEMORY",
        "GDAL_MCP_WORKERS",
        "GDAL_MCP_AUDIT_LOG",
        "GDAL_MCP_TOKEN",
        "GDAL_MCP_CONFIRM",
    ):
        assert env in out


def test_environment_variables_set_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "b"
    other.mkdir()
    for k, v in {
        "GDAL_MCP_WORKSPACE": f"{tmp_path}{os.pathsep}{other}",
        "GDAL_MCP_READ_ONLY": "1",
        "GDAL_MCP_TIMEOUT": "12",
        "GDAL_MCP_MAX_MEMORY": "1G",
        "GDAL_MCP_WORKERS": "3",
        "GDAL_MCP_TRANSPORT": "http",
        "GDAL_MCP_PORT": "9123",
        "GDAL_MCP_TOKEN": "t",
        "GDAL_MCP_ALLOW_ORIGIN": "https://a.example,https://b.example",
        "GDAL_MCP_CONFIRM": "writes",
    }.items():
        monkeypatch.setenv(k, v)
    s = settings_from_args(build_parser().parse_args([]))
    assert s.workspaces == (tmp_path, other) and s.read_only and s.timeout == 12
    assert s.max_memory == GiB and s.workers == 3 and s.transport == "http" and s.port == 9123
    assert s.token == "t" and s.allow_origins == ("https://a.example", "https://b.example") and s.confirm == "writes"
    # Flags win over the environment.
    s = settings_from_args(build_parser().parse_args(["--workspace", str(other), "--workers", "1"]))
    assert s.workspaces == (other,) and s.workers == 1


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("GDAL_MCP_"):
            monkeypatch.delenv(k)
    s = settings_from_args(build_parser().parse_args([]))
    assert (s.transport, s.host, s.port, s.read_only, s.workers) == ("stdio", "127.0.0.1", 8000, False, 2)
    assert s.workspaces == (Path(os.getcwd()),) and s.max_memory == 4 * GiB and s.confirm == "destructive"


def test_bad_values_are_usage_errors(tmp_path: Path) -> None:
    out = run("--workers", "0", "--workspace", str(tmp_path))
    assert out.returncode == 2 and "--workers" in out.stderr and out.stdout == ""
    out = run("--max-memory", "lots", "--workspace", str(tmp_path))
    assert out.returncode == 2 and "size" in out.stderr
    out = run("--workspace", str(tmp_path), env={"GDAL_MCP_CONFIRM": "sometimes"})
    assert out.returncode == 2 and "confirm must be one of never, destructive, writes, all" in out.stderr
    out = run("--workspace", str(tmp_path / "missing"))
    assert out.returncode != 0 and "not a directory" in out.stderr and out.stdout == ""
    assert "Traceback" not in out.stderr


def test_parse_size() -> None:
    assert parse_size("512M") == 512 * 1024**2 and parse_size("2GiB") == 2 * GiB and parse_size("100") == 100
    with pytest.raises(ValueError):
        parse_size("-1G")


def test_remote_flags_and_a_bucket_workspace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--allow-remote, --max-remote-bytes and a bucket workspace, from flags and from the environment (whose ':'
    separator must not split 's3://…')."""
    monkeypatch.setenv("GDAL_MCP_WORKSPACE", f"{tmp_path}{os.pathsep}s3://team/ws")
    monkeypatch.setenv("GDAL_MCP_ALLOW_REMOTE", "https://a.example/cogs,s3://b/x")
    s = settings_from_args(build_parser().parse_args(["--max-remote-bytes", "500M"]))
    assert s.workspaces == (tmp_path,) and s.bucket == "s3://team/ws"
    assert s.allow_remote == ("https://a.example/cogs", "s3://b/x") and s.max_remote_bytes == 500 * 1024**2
    s = settings_from_args(build_parser().parse_args(["--workspace", "s3://team/ws", "--max-remote-bytes", "0"]))
    assert s.workspaces == () and s.bucket == "s3://team/ws" and s.max_remote_bytes is None
    with pytest.raises(ValueError):
        settings_from_args(build_parser().parse_args(["--allow-remote", "ftp://x.example/a"]))
    with pytest.raises(ValueError):
        settings_from_args(build_parser().parse_args(["--workspace", "s3://a/x", "--workspace", "s3://b/y"]))
    with pytest.raises(ValueError):
        settings_from_args(build_parser().parse_args(["--workspace", "https://a.example/ws"]))
