"""GDAL 3.12's algorithms (the C side of the `gdal` program) through ctypes, on rasterio's libgdal.

`gdal raster viewshed`, `gdal raster pipeline`, `gdal vector grid` … are GDALAlgorithm objects in GDAL's global
registry. This module is the one way the engine runs them: instantiate one by its path (``["raster", "viewshed"]``),
give it command-line arguments as the `gdal` program would, run it with a progress callback a cancel can stop,
collect GDAL's warnings, read its string output (``output-string``: info, JSON) and release it.

Nothing here resolves paths: callers pass paths the server's sandbox has already resolved (job fields), and the
worker running this is confined by the kernel, so an algorithm cannot reach what the worker may not.

    with algorithm(["raster", "viewshed"], ["--pos", "10,20", src, dst]) as alg:
        alg.run(progress)
"""

from __future__ import annotations

import contextlib
import ctypes as c
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import rasterio

from gdal_mcp.engine import gdal_c
from gdal_mcp.engine.progress import Progress, no_progress
from gdal_mcp.errors import GdalMcpError

#: void (*CPLErrorHandler)(CPLErr eErrClass, CPLErrorNum nError, const char *pszErrorMsg)
ErrorHandler = c.CFUNCTYPE(None, c.c_int, c.c_int, c.c_char_p)
CE_WARNING, CE_FAILURE = 2, 3

_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "GDALAllRegister": (None, []),
    "GDALGetGlobalAlgorithmRegistry": (c.c_void_p, []),
    "GDALAlgorithmRegistryRelease": (None, [c.c_void_p]),
    "GDALAlgorithmRegistryInstantiateAlg": (c.c_void_p, [c.c_void_p, c.c_char_p]),
    "GDALAlgorithmInstantiateSubAlgorithm": (c.c_void_p, [c.c_void_p, c.c_char_p]),
    "GDALAlgorithmParseCommandLineArguments": (c.c_bool, [c.c_void_p, c.c_void_p]),
    "GDALAlgorithmGetActualAlgorithm": (c.c_void_p, [c.c_void_p]),
    "GDALAlgorithmRun": (c.c_bool, [c.c_void_p, gdal_c.ProgressFunc, c.c_void_p]),
    "GDALAlgorithmFinalize": (c.c_bool, [c.c_void_p]),
    "GDALAlgorithmGetUsageAsJSON": (c.c_void_p, [c.c_void_p]),
    "GDALAlgorithmRelease": (None, [c.c_void_p]),
    "GDALAlgorithmGetArg": (c.c_void_p, [c.c_void_p, c.c_char_p]),
    "GDALAlgorithmArgRelease": (None, [c.c_void_p]),
    "GDALAlgorithmArgGetAsString": (c.c_char_p, [c.c_void_p]),
    "GDALAlgorithmArgGetAsDatasetValue": (c.c_void_p, [c.c_void_p]),
    "GDALArgDatasetValueGetDatasetRef": (c.c_void_p, [c.c_void_p]),
    "GDALArgDatasetValueRelease": (None, [c.c_void_p]),
    "CPLPushErrorHandlerEx": (None, [ErrorHandler, c.c_void_p]),
    "CPLPopErrorHandler": (None, []),
    "VSIFree": (None, [c.c_void_p]),
    "GDALGetDriverByName": (c.c_void_p, [c.c_char_p]),
    "GDALCreateCopy": (
        c.c_void_p,
        [c.c_void_p, c.c_char_p, c.c_void_p, c.c_int, c.c_void_p, gdal_c.ProgressFunc, c.c_void_p],
    ),
    "GDALClose": (c.c_int, [c.c_void_p]),
}


#: Which bundled GDAL runs an algorithm: rasterio's (the default: every raster driver) or pyogrio's (the one the vector
#: tools read and write with: FlatGeobuf, CSV, KML, GML … which rasterio's wheel lacks). Same GDAL 3.12 API.
LIBRARIES = ("rasterio", "pyogrio")


def _pyogrio_gdal() -> Any:
    """pyogrio's libgdal (imported first, so its GDAL_DATA and PROJ paths are set), with the error helpers declared."""
    import pyogrio

    from gdal_mcp.engine.drivers import _bundled

    path = _bundled(pyogrio)
    if path is None:
        raise GdalMcpError("unsupported", "cannot reach pyogrio's GDAL library for the vector algorithms")
    lib = c.CDLL(path)  # the library pyogrio loaded (same handle: its drivers, allow-list and configuration)
    lib.CPLErrorReset.restype, lib.CPLErrorReset.argtypes = None, []
    lib.CPLGetLastErrorMsg.restype, lib.CPLGetLastErrorMsg.argtypes = c.c_char_p, []
    return lib


@functools.lru_cache(maxsize=2)
def _lib(library: str = "rasterio") -> Any:
    """A bundled libgdal (LIBRARIES) with the algorithm API declared; `unsupported` when this GDAL has none (GDAL < 3.11)."""
    if library not in LIBRARIES:
        raise GdalMcpError("internal-error", f"unknown GDAL library {library!r}; one of {', '.join(LIBRARIES)}")
    lib = gdal_c.require("GDALAlgorithmRun") if library == "rasterio" else _pyogrio_gdal()
    try:
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.restype = restype
            function.argtypes = argtypes
    except AttributeError as e:
        raise GdalMcpError("unsupported", f"this GDAL has no algorithm API ({e}); GDAL 3.12 is needed") from None
    lib.GDALAllRegister()
    return lib


def _json_string(lib: Any, pointer: int | None) -> str:
    """A char* GDAL allocated, as text, freed."""
    if not pointer:
        return ""
    try:
        return (c.cast(pointer, c.c_char_p).value or b"").decode(errors="replace")
    finally:
        lib.VSIFree(pointer)


@dataclass
class Algorithm:
    """One instantiated GDAL algorithm with its arguments parsed (see `algorithm`)."""

    lib: Any
    handle: int
    path: list[str]
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def run(
        self,
        progress: Progress = no_progress,
        *,
        message: str = "",
        scale: float = 1.0,
        start: float = 0.0,
        finalize: bool = True,
    ) -> None:
        """GDALAlgorithmRun then GDALAlgorithmFinalize (which closes and flushes the outputs).

        Progress goes to `progress` as start + scale * fraction; a cancel raised by it stops GDAL and is re-raised
        here. A failure is gdal-error with GDAL's message. finalize=False leaves the outputs open: a streamed output
        (`--output-format stream`, a pipeline ending in `write --of stream`) stays readable through `dataset()`
        until the algorithm is released.
        """
        label = message or "gdal " + " ".join(self.path)
        callback, failure = gdal_c.progress_callback(lambda fraction: progress(start + scale * fraction, label))
        with self._errors():
            ok = self.lib.GDALAlgorithmRun(self.handle, callback, None)
            finalized = self.lib.GDALAlgorithmFinalize(self.handle) if ok and finalize else True
        if failure:
            raise failure[0]
        if not ok or not finalized:
            raise GdalMcpError("gdal-error", f"gdal {' '.join(self.path)} failed: {self.error_message()}")

    def copy_output(
        self,
        path: str,
        *,
        driver: str,
        options: dict[str, str],
        progress: Progress = no_progress,
        message: str = "",
        scale: float = 1.0,
        start: float = 0.0,
    ) -> None:
        """GDALCreateCopy of the dataset a run with finalize=False left (`dataset()`: a pipeline ending in
        `write --output-format stream`) into `path`, closed and flushed; progress, cancel and errors as `run`. What
        GDAL's own write step does (gdal_translate), without letting the step before it write the file itself."""
        handle = self.dataset()
        if not handle:
            raise GdalMcpError("gdal-error", f"gdal {' '.join(self.path)} made no dataset to write")
        drv = self.lib.GDALGetDriverByName(driver.encode())
        if not drv:
            raise GdalMcpError("unsupported", f"this GDAL has no {driver} driver")
        items = [f"{k}={v}".encode() for k, v in options.items()]
        array = (c.c_char_p * (len(items) + 1))(*items, None)
        label = message or f"writing {driver}"
        callback, failure = gdal_c.progress_callback(lambda fraction: progress(start + scale * fraction, label))
        with self._errors():
            out = self.lib.GDALCreateCopy(drv, path.encode(), handle, 0, c.cast(array, c.c_void_p), callback, None)
            closed = self.lib.GDALClose(out) == 0 if out else False
        if failure:
            raise failure[0]
        if not out or not closed:
            raise GdalMcpError("gdal-error", f"writing {path} failed: {self.error_message()}")

    def error_message(self) -> str:
        """GDAL's failure messages of this algorithm (the last few), or its last error."""
        return "; ".join(dict.fromkeys(self.errors[-3:])) or gdal_c.last_error(self.lib) or "unknown error"

    def string(self, name: str = "output-string") -> str:
        """A string argument's value after the run (e.g. `output-string`: what `gdal raster info` prints)."""
        arg = self.lib.GDALAlgorithmGetArg(self.handle, name.encode())
        if not arg:
            raise GdalMcpError("internal-error", f"gdal {' '.join(self.path)} has no argument {name!r}")
        try:
            return (self.lib.GDALAlgorithmArgGetAsString(arg) or b"").decode(errors="replace")
        finally:
            self.lib.GDALAlgorithmArgRelease(arg)

    def json(self, name: str = "output-string") -> Any:
        """`string(name)` parsed as JSON."""
        return json.loads(self.string(name))

    def dataset(self, name: str = "output") -> int | None:
        """The GDALDatasetH a dataset argument holds after the run (owned by the algorithm: do not close it)."""
        arg = self.lib.GDALAlgorithmGetArg(self.handle, name.encode())
        if not arg:
            return None
        try:
            value = self.lib.GDALAlgorithmArgGetAsDatasetValue(arg)
            if not value:
                return None
            try:
                return int(self.lib.GDALArgDatasetValueGetDatasetRef(value) or 0) or None
            finally:
                self.lib.GDALArgDatasetValueRelease(value)
        finally:
            self.lib.GDALAlgorithmArgRelease(arg)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Collect GDAL's warnings and failures raised on this thread while inside."""

        def handler(klass: int, number: int, message: bytes | None) -> None:
            text = (message or b"").decode(errors="replace").strip()
            if not text:
                return
            if klass == CE_WARNING:
                if text not in self.warnings:
                    self.warnings.append(text)
            elif klass >= CE_FAILURE:
                self.errors.append(text)

        keep = ErrorHandler(handler)
        self.lib.CPLErrorReset()
        self.lib.CPLPushErrorHandlerEx(keep, None)
        try:
            yield
        finally:
            self.lib.CPLPopErrorHandler()


def _instantiate(lib: Any, path: list[str]) -> int:
    registry = lib.GDALGetGlobalAlgorithmRegistry()
    try:
        handle = lib.GDALAlgorithmRegistryInstantiateAlg(registry, b"gdal")
    finally:
        lib.GDALAlgorithmRegistryRelease(registry)
    for step in path:
        sub = lib.GDALAlgorithmInstantiateSubAlgorithm(handle, step.encode()) if handle else None
        lib.GDALAlgorithmRelease(handle)
        handle = sub
        if not handle:
            raise GdalMcpError("unsupported", f"this GDAL has no algorithm 'gdal {' '.join(path)}'")
    return int(handle)


@contextlib.contextmanager
def algorithm(path: list[str], argv: list[str], *, library: str = "rasterio") -> Iterator[Algorithm]:
    """Instantiate `gdal <path…>` and parse `argv` (its command-line arguments); release it on exit.

    Bad arguments are invalid-argument with GDAL's message (which names the argument). `library`: which bundled
    GDAL runs it (LIBRARIES; "pyogrio" for vector formats rasterio's GDAL cannot read or write)."""
    lib = _lib(library)
    # rasterio's GDAL finds its data files (tiling schemes, viewer templates, CRS tables) through the GDAL_DATA that
    # an active rasterio.Env sets; leaving any Env unsets it, so an algorithm run later in the same worker would run
    # without them. Hold one for the algorithm's whole life (nested inside a caller's Env, it keeps that one's options).
    env = rasterio.Env() if library == "rasterio" else contextlib.nullcontext()
    with env:
        yield from _parsed(lib, path, argv)


def _refuse_argument_files(path: list[str], argv: list[str]) -> None:
    """GDAL's argument parser reads a value starting with `@` as "the contents of this file" (`--where=@f`,
    `--sql @f`, an input list `@list.txt`): a way around the sandbox to any file the worker can read, echoed back
    in GDAL's error messages. No argument the engine builds needs one, so any such value is refused."""
    for token in argv:
        value = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
        if value.startswith("@"):
            name = token.split("=", 1)[0] if token.startswith("-") else "a value"
            raise GdalMcpError(
                "invalid-argument",
                f"gdal {' '.join(path)}: {name} may not start with '@' (GDAL would read it as a file name); "
                "wrap the value, e.g. a where clause in parentheses",
            )


def _parsed(lib: Any, path: list[str], argv: list[str]) -> Iterator[Algorithm]:
    _refuse_argument_files(path, argv)
    handle = _instantiate(lib, path)
    alg = Algorithm(lib, handle, list(path))
    try:
        with alg._errors():
            parsed = lib.GDALAlgorithmParseCommandLineArguments(handle, gdal_c.strings(argv))
        if not parsed:
            raise GdalMcpError("invalid-argument", f"gdal {' '.join(path)}: {alg.error_message()}")
        yield alg
    finally:
        lib.GDALAlgorithmRelease(handle)


def run(
    path: list[str], argv: list[str], progress: Progress = no_progress, *, message: str = "", library: str = "rasterio"
) -> list[str]:
    """Run `gdal <path…> <argv…>` to completion; GDAL's warnings."""
    with algorithm(path, argv, library=library) as alg:
        alg.run(progress, message=message)
        return alg.warnings


def usage(path: list[str], *, library: str = "rasterio") -> dict[str, Any]:
    """GDAL's own description of an algorithm and its arguments (GDALAlgorithmGetUsageAsJSON)."""
    lib = _lib(library)
    handle = _instantiate(lib, path)
    try:
        result: dict[str, Any] = json.loads(_json_string(lib, lib.GDALAlgorithmGetUsageAsJSON(handle)))
        return result
    finally:
        lib.GDALAlgorithmRelease(handle)


def number(value: float) -> str:
    """A number as GDAL's argument parser reads it (no trailing .0 on integers, full precision otherwise)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
