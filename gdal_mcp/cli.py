"""Command line: `gdal-mcp [serve] [options]`, `gdal-mcp --version`.

Every option can also be set with an environment variable GDAL_MCP_<OPTION>. Nothing but MCP
protocol is written to stdout; logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gdal_mcp import __version__
from gdal_mcp.config import CONFIRM_POLICIES, EXECUTORS, Settings, parse_size

ENV_PREFIX = "GDAL_MCP_"
log = logging.getLogger("gdal_mcp")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV_PREFIX + name, default)


def _workspace_list(text: str) -> list[str]:
    """GDAL_MCP_WORKSPACE: directories separated by ':' (os.pathsep), where a bucket's 's3://…' keeps its own ':'."""
    parts = [w for w in text.split(os.pathsep) if w]
    out: list[str] = []
    for part in parts:
        if out and part.startswith("//") and out[-1].isalnum():  # 's3' then '//bucket/prefix': one URL
            out[-1] = f"{out[-1]}:{part}"
        else:
            out.append(part)
    return out


def _env_bool(name: str) -> bool:
    return (_env(name) or "").strip().lower() in ("1", "true", "yes", "on")


def _profiles(values: list[str]) -> tuple[tuple[str, str], ...]:
    """--remote-profile LOCATION=NAME values as (location, name) pairs (the name after the last '=')."""
    pairs = []
    for value in values:
        location, sep, name = value.strip().rpartition("=")
        if not sep or not location or not name:
            raise SystemExit(f"gdal-mcp: --remote-profile {value!r}: give LOCATION=NAME, e.g. s3://team-bucket=analytics")
        pairs.append((location.strip(), name.strip()))
    return tuple(pairs)


def versions() -> str:
    """Version line of gdal-mcp and the geospatial libraries it bundles."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pyogrio
        import pyproj
        import rasterio
    from gdal_mcp.execution import confine

    return (
        f"gdal-mcp {__version__}\n"
        f"GDAL {rasterio.__gdal_version__} (rasterio), GDAL {pyogrio.__gdal_version_string__} (pyogrio)\n"
        f"PROJ {pyproj.proj_version_str}\n"
        f"rasterio {rasterio.__version__}, pyogrio {pyogrio.__version__}, pyproj {pyproj.__version__}\n"
        f"confinement: {confine.status()}"
    )


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print versions (gdal-mcp, GDAL, PROJ, rasterio, pyogrio) and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        sys.stdout.write(versions() + "\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gdal-mcp",
        description="GDAL MCP server: sandboxed, crash-isolated geospatial tools for AI agents. "
        "Runs over stdio by default. Every option can also be set with an environment "
        "variable GDAL_MCP_<NAME> (e.g. GDAL_MCP_WORKSPACE, GDAL_MCP_READ_ONLY=1).",
        epilog="HTTP: set GDAL_MCP_TOKEN to require 'Authorization: Bearer <token>' on every request; "
        "a non-loopback --host is refused without it.",
    )
    p.add_argument("--version", action=_Version)
    p.add_argument("command", nargs="?", default="serve", choices=["serve"], help="what to do (default: serve)")
    p.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default=_env("TRANSPORT", "stdio"),
        help="stdio (default) or streamable HTTP at /mcp [GDAL_MCP_TRANSPORT]",
    )
    p.add_argument("--host", default=_env("HOST", "127.0.0.1"), help="HTTP bind address (default 127.0.0.1) [GDAL_MCP_HOST]")
    p.add_argument("--port", type=int, default=int(_env("PORT", "8000") or 8000), help="HTTP port (default 8000) [GDAL_MCP_PORT]")
    env_ws = _workspace_list(_env("WORKSPACE") or "")
    p.add_argument(
        "--workspace",
        action="append",
        default=None,
        metavar="DIR",
        help="directory the tools may read and write; repeatable; relative paths resolve against "
        "the first (default: the current directory); or one bucket, s3://bucket/prefix, whose objects relative "
        "paths then name (credentials from AWS_*) [GDAL_MCP_WORKSPACE, ':'-separated]",
    )
    p.set_defaults(env_workspaces=env_ws)
    p.add_argument(
        "--read-only",
        action="store_true",
        default=_env_bool("READ_ONLY"),
        help="refuse every tool that writes [GDAL_MCP_READ_ONLY=1]",
    )
    p.add_argument(
        "--confirm",
        choices=CONFIRM_POLICIES,
        default=_env("CONFIRM", "destructive"),
        help="which calls a person must approve first, asked through the client (elicitation): never; "
        "destructive (default: replacing an existing file, raster_overviews, raster_edit, "
        "vector_convert append/add_layer); writes (also every new file); all (every call). A client "
        "that cannot ask its user gets confirmation-required [GDAL_MCP_CONFIRM]",
    )
    p.add_argument(
        "--console",
        action=argparse.BooleanOptionalAction,
        default=(_env("CONSOLE") or "1").strip().lower() not in ("0", "false", "no", "off"),
        help="HTTP: the approval console at /console (default on): a client that cannot ask its user "
        "gets a confirmation id, and a person approves or denies it there; also shows and cancels "
        "running jobs [GDAL_MCP_CONSOLE=0 to turn off]",
    )
    p.add_argument(
        "--confirm-timeout",
        type=float,
        default=float(_env("CONFIRM_TIMEOUT", "600") or 600),
        metavar="SECONDS",
        help="how long a confirmation parked in the console waits (default 600) [GDAL_MCP_CONFIRM_TIMEOUT]",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=float(_env("TIMEOUT", "600") or 600),
        help="seconds a job may run before it is stopped (default 600) [GDAL_MCP_TIMEOUT]",
    )
    p.add_argument(
        "--max-memory",
        default=_env("MAX_MEMORY", "4G"),
        help="address-space limit per worker, e.g. 2G; 0 for none (default 4G) [GDAL_MCP_MAX_MEMORY]",
    )
    p.add_argument(
        "--max-resource-size",
        default=_env("MAX_RESOURCE_SIZE", "16M"),
        metavar="SIZE",
        help="largest file resources/read returns, e.g. 16M (default 16 MiB) [GDAL_MCP_MAX_RESOURCE_SIZE]",
    )
    p.add_argument(
        "--max-message-size",
        default=_env("MAX_MESSAGE_SIZE", "64M"),
        metavar="SIZE",
        help="stdio: longest JSON-RPC message line accepted; a longer one is discarded unread and "
        "answered with an error (default 64 MiB) [GDAL_MCP_MAX_MESSAGE_SIZE]",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=int(_env("WORKERS", "2") or 2),
        help="worker processes for jobs (default 2; one more is kept for quick metadata calls) [GDAL_MCP_WORKERS]",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=_env("EXECUTOR", "local"),
        help="where jobs run: local (default: this machine's worker processes) or dask (a Dask "
        "cluster; needs --dask-scheduler) [GDAL_MCP_EXECUTOR]",
    )
    p.add_argument(
        "--dask-scheduler",
        default=_env("DASK_SCHEDULER"),
        metavar="ADDRESS",
        help="with --executor dask: the scheduler's address (tcp://host:8786), or local:N to start N "
        "local worker processes (1 thread each, --max-memory each); the workers must see the "
        "workspace at the same path [GDAL_MCP_DASK_SCHEDULER]",
    )
    p.add_argument(
        "--max-pixels",
        type=int,
        default=int(_env("MAX_PIXELS", str(2**34)) or 2**34),
        metavar="N",
        help="largest output grid (width x height) a tool may create (default 2^34) [GDAL_MCP_MAX_PIXELS]",
    )
    p.add_argument(
        "--max-tiles",
        type=int,
        default=int(_env("MAX_TILES", "100000") or 100000),
        metavar="N",
        help="most web map tiles one raster_tiles call may write (default 100000) [GDAL_MCP_MAX_TILES]",
    )
    p.add_argument(
        "--audit-log",
        default=_env("AUDIT_LOG"),
        metavar="PATH",
        help="append one JSON line per tool call to this file [GDAL_MCP_AUDIT_LOG]",
    )
    p.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "WARNING"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"],
        help="stderr log level (default WARNING) [GDAL_MCP_LOG_LEVEL]",
    )
    p.add_argument(
        "--allow-remote",
        action="append",
        metavar="URL",
        help="a remote location the tools may read, and everything below it: https://host[/prefix], "
        "s3://bucket[/prefix], gs://…, az://container[/prefix]; repeat for more. Anything else remote is refused "
        "(out-of-root), and without any the workers get no network at all. Credentials come from the environment "
        "(AWS_*, GOOGLE_*, AZURE_*) [GDAL_MCP_ALLOW_REMOTE=url,url]",
    )
    p.add_argument(
        "--remote-profile",
        action="append",
        metavar="LOCATION=NAME",
        help="read and write an allowed s3://bucket with the keys of the AWS profile NAME (from the AWS shared "
        "credentials file of the machine each worker runs on); repeat for more. Without it, AWS_PROFILE or AWS_* of "
        "the environment [GDAL_MCP_REMOTE_PROFILE=location=name,location=name]",
    )
    p.add_argument(
        "--max-remote-bytes",
        default=_env("MAX_REMOTE_BYTES", "1G"),
        metavar="SIZE",
        help="most one job may download from remote locations, e.g. 500M (default 1 GiB; 0 for no limit); a job "
        "that would fetch more stops with resource-limit [GDAL_MCP_MAX_REMOTE_BYTES]",
    )
    p.add_argument(
        "--allow-network",
        action="store_true",
        default=_env_bool("ALLOW_NETWORK"),
        help="allow every remote location (prefer --allow-remote, which names them) [GDAL_MCP_ALLOW_NETWORK=1]",
    )
    p.add_argument(
        "--allow-unconfined",
        action="store_true",
        default=_env_bool("ALLOW_UNCONFINED"),
        help="start even where the kernel cannot confine the processes that run GDAL (no Linux Landlock); "
        "without it such a server refuses to start. See SECURITY.md [GDAL_MCP_ALLOW_UNCONFINED=1]",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="extra browser Origin allowed over HTTP besides loopback; repeatable [GDAL_MCP_ALLOW_ORIGIN, comma-separated]",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=None,
        metavar="NAME",
        help="extra Host header name accepted over HTTP besides loopback and the bind address, e.g. "
        "gis.example.org (any port) or gis.example.org:8443; '*' accepts any; repeatable "
        "[GDAL_MCP_ALLOW_HOST, comma-separated]",
    )
    return p


def settings_from_args(args: argparse.Namespace) -> Settings:
    workspaces = args.workspace or args.env_workspaces
    buckets = [w for w in workspaces if "://" in str(w)]
    workspaces = [w for w in workspaces if "://" not in str(w)]
    if len(buckets) > 1:
        raise ValueError("give at most one bucket workspace (--workspace s3://bucket/prefix)")
    if not workspaces and not buckets:
        workspaces = [os.getcwd()]
        log.warning("no --workspace given: using the current directory %s", workspaces[0])
    max_memory = None if str(args.max_memory).strip() in ("0", "", "none") else parse_size(str(args.max_memory))
    origins = args.allow_origin or [o for o in (_env("ALLOW_ORIGIN") or "").split(",") if o.strip()]
    hosts = [h.strip() for h in args.allow_host or (_env("ALLOW_HOST") or "").split(",") if h.strip()]
    if hosts:
        from gdal_mcp.server.web.guards import split_host  # imports FastMCP: only when needed (start-up time)
    for h in hosts:
        if h != "*" and split_host(h) is None:
            raise ValueError(f"--allow-host {h!r}: not a host name (examples: gis.example.org, gis.example.org:8443)")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    if args.max_pixels < 4:
        raise ValueError("--max-pixels must be at least 4 (a 2x2 grid)")
    if args.max_tiles < 1:
        raise ValueError("--max-tiles must be at least 1")
    if args.timeout <= 0:
        raise ValueError("--timeout must be positive")
    if args.confirm_timeout <= 0:
        raise ValueError("--confirm-timeout must be positive")
    return Settings(
        workspaces=tuple(Path(w) for w in workspaces),
        bucket=buckets[0] if buckets else None,
        transport=args.transport,
        host=args.host,
        port=args.port,
        read_only=args.read_only,
        confirm=args.confirm,
        console=args.console,
        confirm_timeout=args.confirm_timeout,
        timeout=args.timeout,
        max_memory=max_memory,
        workers=args.workers,
        max_pixels=args.max_pixels,
        max_tiles=args.max_tiles,
        audit_log=Path(args.audit_log) if args.audit_log else None,
        log_level=args.log_level.upper(),
        allow_network=args.allow_network,
        allow_remote=tuple(r.strip() for r in (args.allow_remote or (_env("ALLOW_REMOTE") or "").split(",")) if r.strip()),
        remote_profiles=_profiles(args.remote_profile or [p for p in (_env("REMOTE_PROFILE") or "").split(",") if p.strip()]),
        allow_unconfined=args.allow_unconfined,
        allow_origins=tuple(origins),
        allow_hosts=tuple(hosts),
        max_resource_bytes=parse_size(str(args.max_resource_size)),
        max_remote_bytes=None
        if str(args.max_remote_bytes).strip() in ("0", "", "none")
        else parse_size(str(args.max_remote_bytes)),
        max_message_bytes=parse_size(str(args.max_message_size)),
        token=_env("TOKEN") or None,
        console_token=_env("CONSOLE_TOKEN") or None,
        executor=args.executor,
        dask_scheduler=args.dask_scheduler or None,
    )


def serve(settings: Settings) -> None:
    import gc

    # Start-up creates ~160k long-lived objects (FastMCP, pydantic models, 41 tool schemas): the collector's passes
    # over them cost 0.2-0.4 s of the cold start and free little. Off until the server is built, then its objects
    # are frozen out of later collections (the ~3 MB of start-up garbage among them stays, once).
    gc.disable()
    import anyio

    from gdal_mcp.server.app import App  # no MCP framework yet

    try:
        early = App(settings)
    except ValueError as e:
        raise SystemExit(f"gdal-mcp: {e}") from None
    try:
        early.executor.start(1)  # the first worker imports GDAL while this process imports FastMCP below
    except ValueError as e:  # --executor dask: the cluster cannot be used (unreachable, no worker sees the workspace)
        raise SystemExit(f"gdal-mcp: {e}") from None

    from gdal_mcp.server.build import build_server
    from gdal_mcp.server.web.guards import HostGuard, OriginGuard, StaticBearerToken, is_loopback_host

    if settings.transport == "http" and not settings.token and not is_loopback_host(settings.host):
        early.executor.close()
        raise SystemExit(
            f"gdal-mcp: refusing to listen on {settings.host} without a token: anyone on the network could "
            "use the tools. Set GDAL_MCP_TOKEN, or bind to 127.0.0.1."
        )
    auth = StaticBearerToken(settings.token) if settings.transport == "http" and settings.token else None
    try:
        mcp, app = build_server(settings, auth=auth, app=early)
    except ValueError as e:
        raise SystemExit(f"gdal-mcp: {e}") from None
    finally:
        gc.freeze()
        gc.enable()
    log.info("workspaces: %s", ", ".join(str(r) for r in app.sandbox.roots))
    if settings.transport == "http" and app.console is not None:
        app.console.login_link()  # the person's way in to approve (the MCP client never sees it)
    try:
        if settings.transport == "stdio":
            from gdal_mcp.server.stdio import run_stdio

            anyio.run(lambda: run_stdio(mcp, log_level=settings.log_level, max_line_bytes=settings.max_message_bytes))
        else:
            from starlette.middleware import Middleware

            log_config = {
                "version": 1,
                "disable_existing_loggers": False,
                "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
                "loggers": {
                    "uvicorn": {"handlers": ["stderr"], "level": settings.log_level},
                    "uvicorn.access": {"handlers": ["stderr"], "level": settings.log_level, "propagate": False},
                },
            }
            anyio.run(
                lambda: mcp.run_http_async(
                    show_banner=False,
                    transport="http",
                    host=settings.host,
                    port=settings.port,
                    path="/mcp",
                    log_level=settings.log_level.lower(),
                    # Our own Host and Origin guards (their errors name --allow-host/--allow-origin), so
                    # FastMCP's is off whatever FASTMCP_HTTP_HOST_ORIGIN_PROTECTION says.
                    host_origin_protection=False,
                    middleware=[
                        Middleware(HostGuard, allowed_hosts=settings.allow_hosts, bind_host=settings.host),
                        Middleware(OriginGuard, allowed_origins=settings.allow_origins),
                    ],
                    uvicorn_config={"log_config": log_config},
                )
            )
    except KeyboardInterrupt:
        pass
    finally:
        app.executor.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s gdal-mcp %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = settings_from_args(args)
    except ValueError as e:
        parser.error(str(e))
    serve(settings)


if __name__ == "__main__":
    main()
