"""Kernel confinement of the processes (and threads) that run GDAL and PROJ: Linux Landlock and a seccomp filter.

The sandbox (gdal_mcp.sandbox) checks every path a tool is given before any work starts; it cannot see the
references GDAL's 200 drivers follow inside files (an MRF's DataFile, a SQLite schema's virtual tables, a CRS
that names a URL …). Confinement makes those fail by construction: a confined thread *cannot* open a file or
connect anywhere its policy does not allow, whatever code it runs.

A confined thread (and every thread and process it starts afterwards) may:
- read the workspaces, the Python environment (its prefixes and import path: GDAL's and PROJ's data live in the
  wheels), the system's shared libraries, and a few read-only facts the libraries ask for (CPU count, memory
  limits, time zone);
- write only inside the workspaces (none with --read-only) and its own private temporary directory;
- not connect or bind a TCP port, nor create an internet, packet or UNIX socket (unless the network is allowed);
- not send signals to, nor reach the abstract UNIX sockets of, processes outside its own confinement.

`restrict_writes` adds a further layer for one job: a job's thread may then write only where its output goes.

Landlock needs no privilege and applies to the calling thread and what it starts later: confine a worker before
it starts any thread. The filesystem rules need Landlock ABI >= 2 (files renamed between directories); TCP rules
ABI >= 4 (below that the seccomp filter still refuses new internet sockets). GDAL-free: the server imports this
module to report whether the kernel can confine (start-up, --version, /healthz).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("gdal_mcp.execution.confine")

#: the oldest Landlock ABI the workers are confined with (2: renames between directories can be allowed)
MIN_ABI = 2


class ConfinementError(RuntimeError):
    """The kernel cannot confine this process (no Landlock, or too old), or applying the rules failed."""


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (not Linux, too old, or disabled at boot)."""
    try:
        import landlockpy

        return int(landlockpy.abi_version())
    except Exception:  # noqa: BLE001 - any failure means: no confinement
        return 0


def status() -> str:
    """One line: whether and how the workers can be confined on this kernel."""
    version = abi()
    if version < MIN_ABI:
        why = "no Landlock in this kernel" if version == 0 else f"Landlock ABI {version} (needs >= {MIN_ABI})"
        return f"unconfined: {why}"
    parts = ["files", "TCP" if version >= 4 else "sockets (seccomp; no Landlock TCP rules below ABI 4)"]
    if version >= 6:
        parts.append("signals")
    return f"Landlock ABI {version}: workers confined ({', '.join(parts)})"


@dataclass(frozen=True)
class Policy:
    """What a confined thread may reach. Paths that do not exist are skipped."""

    #: trees (or single files) that may be read
    read: tuple[str, ...]
    #: trees that may be read and written (files and directories created, written, renamed, removed)
    write: tuple[str, ...]
    #: directories whose entries may be listed, without reading the files beneath (a source checkout on sys.path)
    list_only: tuple[str, ...] = ()
    #: single files that may be read and written (/dev/null)
    read_write_files: tuple[str, ...] = ("/dev/null",)
    #: TCP connect/bind and new sockets allowed
    network: bool = False
    #: with the network allowed: the one TCP port it may connect to (the egress proxy, execution/egress.py); None:
    #: any (--allow-network, and Dask workers)
    proxy_port: int | None = None


def worker_policy(
    roots: Iterable[str], tmp: str | None, *, read_only: bool, network: bool, proxy_port: int | None = None
) -> Policy:
    """The policy of a process (or thread) that runs jobs on these workspaces."""
    roots = [os.path.realpath(r) for r in roots]
    write = [] if read_only else list(roots)
    if tmp:
        write.append(os.path.realpath(tmp))
    read, list_only = environment_paths()
    read += [r for r in roots if r not in write]
    read += SYSTEM_READ
    if network:
        read += NETWORK_READ
    for var in ("GDAL_DATA", "PROJ_DATA", "PROJ_LIB"):  # data directories an operator points the libraries at
        read += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    return Policy(
        read=tuple(dict.fromkeys(read)),
        write=tuple(write),
        list_only=tuple(list_only),
        network=network,
        proxy_port=proxy_port if network else None,
    )


#: read-only system paths the libraries need: shared libraries and the loader's cache, time zone and locale data,
#: and the facts GDAL, numpy and Arrow read about the machine (CPUs, memory and its limits)
SYSTEM_READ = (
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/local/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/usr/share/zoneinfo",
    "/usr/share/locale",
    "/etc/ssl/openssl.cnf",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/self/cgroup",
    "/proc/self/status",
    "/proc/sys/vm/overcommit_memory",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/sys/kernel/mm/transparent_hugepage",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
)
#: with the network allowed: name resolution and the certificate stores
NETWORK_READ = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/ssl",
    "/etc/pki",
    "/usr/share/ca-certificates",
    "/etc/ca-certificates",
)


def environment_paths() -> tuple[list[str], list[str]]:
    """(readable, list-only) paths of this Python: its prefixes (the standard library, site-packages: the wheels hold
    GDAL's and PROJ's data), its site directories, PYTHONPATH, and where gdal_mcp is imported from. Never the other
    entries of the import path, the current directory among them (`python -m` puts it there, and Dask's workers
    inherit their parent's): it may be a home directory. A source checkout (a development install) may only be
    listed, with its gdal_mcp package readable: not its tests, .git …"""
    import site

    read: list[str] = []
    list_only: list[str] = []
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}

    def inside_prefix(path: str) -> bool:
        return any(path == p or path.startswith(p + os.sep) for p in prefixes)

    read += sorted(prefixes)
    read.append(os.path.dirname(os.path.realpath(sys.executable)))
    sites = list(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE and site.USER_SITE:
        sites.append(site.USER_SITE)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    import gdal_mcp

    package = os.path.dirname(os.path.realpath(gdal_mcp.__file__))  # the whole package, not this subpackage
    parent = os.path.dirname(package)
    checkout = os.path.exists(os.path.join(parent, "pyproject.toml"))  # a source checkout, not a library directory
    for entry in (*sites, *extra):
        real = os.path.realpath(entry)
        if os.path.isdir(real) and not inside_prefix(real) and not (checkout and real == parent):
            read.append(real)
    if not inside_prefix(package):
        if checkout:
            list_only.append(parent)
        read.append(package)
    return read, list_only


# ----- Landlock ------------------------------------------------------------------------------------------
def _landlock_rights() -> tuple[int, int, int, int]:
    """(read, write, file-only rights mask, list) as Landlock access masks."""
    from landlockpy import AccessFS as F

    read = F.READ_FILE | F.READ_DIR
    # MAKE_SYM: a job may link to a workspace file inside its own directory (external overviews of a read-only file);
    # reading through a link is judged on the file it reaches, and a commit never places a link (gdal_mcp/sandbox/).
    write = read | F.WRITE_FILE | F.REMOVE_DIR | F.REMOVE_FILE | F.MAKE_DIR | F.MAKE_REG | F.MAKE_SYM | F.REFER | F.TRUNCATE
    file_only = F.EXECUTE | F.WRITE_FILE | F.READ_FILE | F.TRUNCATE | F.IOCTL_DEV
    return int(read), int(write), int(file_only), int(F.READ_DIR)


def confine(policy: Policy) -> list[str]:
    """Confine the calling thread, and every thread and process it starts from now on, to `policy`; returns the
    paths a rule was added for (those that exist).

    Raises ConfinementError when the kernel cannot (no Landlock, or ABI < MIN_ABI) or the rules cannot be applied.
    Irreversible. Call it before the process starts threads (others keep running unconfined).
    """
    version = abi()
    if version < MIN_ABI:
        raise ConfinementError(status())
    import landlockpy
    from landlockpy import AccessFS, AccessNet, Scope

    read, write, file_only, listing = _landlock_rights()
    proxied = policy.network and policy.proxy_port is not None
    net = AccessNet.NONE if policy.network and not proxied else AccessNet.BIND_TCP | AccessNet.CONNECT_TCP
    scoped = Scope.ABSTRACT_UNIX_SOCKET | Scope.SIGNAL
    try:
        granted: list[str] = []
        with landlockpy.Ruleset(handled_net=net, scoped=scoped) as rules:
            for rights, paths in (
                (read, policy.read),
                (write, policy.write),
                (listing, policy.list_only),
                (int(AccessFS.READ_FILE | AccessFS.WRITE_FILE), policy.read_write_files),
            ):
                for path in paths:
                    if _allow(rules, path, rights, file_only):
                        granted.append(path)
            if proxied:  # the egress proxy's port, and no other: every request goes through the allow-list
                rules.allow_port(int(policy.proxy_port or 0), AccessNet.CONNECT_TCP)
                granted.append(f"tcp:{policy.proxy_port}")
            rules.restrict()
    except (OSError, ValueError, RuntimeError) as e:
        raise ConfinementError(f"applying the Landlock rules failed: {e}") from e
    if not policy.network:
        _deny_sockets()
    _active[0] = policy
    return granted


#: the policy this process's job threads run under (None: not confined)
_active: list[Policy | None] = [None]


def active_policy() -> Policy | None:
    """The policy confine() applied in this process (its job threads run under it), or None."""
    return _active[0]


def readable(policy: Policy, path: str) -> bool:
    """Whether `policy` lets a thread read `path` (a file in one of its trees, or one of its files)."""
    real = os.path.realpath(path)
    for tree in map(os.path.realpath, (*policy.read, *policy.write)):
        if real == tree or real.startswith(tree.rstrip(os.sep) + os.sep):
            return True
    return False


def restrict_writes(allowed: Iterable[str]) -> None:
    """A further Landlock layer on the calling thread (and what it starts): writes only beneath `allowed` (reads
    stay as confine() allowed them). For one job's thread: the job can write its output and nothing else."""
    import landlockpy
    from landlockpy import AccessFS as F

    _, write, file_only, _ = _landlock_rights()
    handled = F(write) & ~(F.READ_FILE | F.READ_DIR)
    try:
        with landlockpy.Ruleset(handled_fs=handled, handled_net=landlockpy.AccessNet.NONE) as rules:
            for path in allowed:
                _allow(rules, path, int(handled), file_only)
            _allow(rules, "/dev/null", int(F.WRITE_FILE), file_only)
            rules.restrict()
    except (OSError, ValueError, RuntimeError) as e:
        raise ConfinementError(f"applying the job's Landlock layer failed: {e}") from e


def on_write_layer_thread(fn: Callable[[], Any], writable: list[str], *, name: str = "gdal-mcp-job") -> Any:
    """fn() on a fresh thread that may write only beneath `writable` (restrict_writes), with the calling thread's
    context variables; its result, or its exception raised here. A Landlock layer cannot be taken off a thread, and
    threads are reused (a worker's, a Dask executor's): hence a thread per call; ~0.2 ms."""
    import contextvars
    import threading

    context = contextvars.copy_context()
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            restrict_writes(writable)
            box["result"] = context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=body, name=name)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _allow(rules: object, path: str, rights: int, file_only: int) -> bool:
    """Add a rule for `path` (a directory: the tree beneath it; a file: that file); False when it does not exist."""
    from landlockpy import AccessFS

    try:
        is_dir = os.path.isdir(path)
        if not is_dir and not os.path.exists(path):
            return False
    except OSError:
        return False
    mask = rights if is_dir else rights & file_only
    if not mask:
        return False
    try:
        rules.allow_path(path, AccessFS(mask))  # type: ignore[attr-defined]
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.EACCES, errno.ELOOP, errno.ENOTDIR):
            return False  # vanished, or not ours to reach: nothing granted
        raise
    return True


# ----- seccomp: no new sockets ----------------------------------------------------------------------------
#: (audit architecture, socket syscall number) of the architectures the filter knows
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xB7 | 0xC0000000, 198)}
_IO_URING_SETUP = 425  # the same on both: io_uring could open sockets without the socket syscall
_X32_BIT = 0x40000000
#: socket families refused: UNIX (local services), INET, INET6, PACKET
_DENIED_FAMILIES = (1, 2, 10, 17)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _deny_sockets() -> bool:
    """A seccomp filter on the calling thread: socket() of the families above fails with EACCES, and io_uring
    cannot be set up. Landlock (ABI < 8) does not see UDP (a DNS query), UNIX sockets or io_uring; this does.
    False where the architecture is not one the filter knows (then Landlock's TCP rules are all there is)."""
    arch = _ARCHES.get(platform.machine())
    if arch is None or not sys.platform.startswith("linux"):
        log.warning("no socket filter on %s: only Landlock's TCP rules keep the workers off the network", platform.machine())
        return False
    audit_arch, nr_socket = arch
    ld_w_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | errno.EACCES
    prog = [
        (ld_w_abs, 0, 0, 4),  # arch
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, deny),  # another ABI's syscalls (i386 emulation on x86_64): the same calls under other numbers
        (ld_w_abs, 0, 0, 0),  # syscall number
        (jset, 0, 1, _X32_BIT),
        (ret, 0, 0, deny),  # x32 syscalls: the same calls under other numbers
        (jeq, 0, 1, _IO_URING_SETUP),
        (ret, 0, 0, deny),
        (jeq, 1, 0, nr_socket),
        (ret, 0, 0, allow),
        (ld_w_abs, 0, 0, 16),  # args[0]: the family
    ]
    n = len(_DENIED_FAMILIES)
    for i, family in enumerate(_DENIED_FAMILIES):
        prog.append((jeq, n - i, 0, family))  # to the deny at the end
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if (
        libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0
        or libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0
    ):
        err = ctypes.get_errno()
        raise ConfinementError(f"installing the socket filter failed: {os.strerror(err)}")
    return True


assert struct.calcsize("HBBI") == ctypes.sizeof(_SockFilter)
