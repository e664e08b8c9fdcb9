"""Every typed job matches its engine function: same argument names, required ones present, same defaults."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle

import pytest

from gdal_mcp import jobs

ALL = jobs.all_jobs()


def test_there_is_a_job_for_every_engine_entry_point_a_tool_uses() -> None:
    assert len(ALL) >= 27
    assert len({j.FUNC for j in ALL}) == len(ALL), "two jobs name the same engine function"


@pytest.mark.parametrize("job", ALL, ids=lambda j: j.__name__)
def test_job_matches_engine_signature(job: type[jobs.Job]) -> None:
    module, _, name = job.FUNC.partition(":")
    assert module.startswith("gdal_mcp.engine."), job.FUNC
    func = getattr(importlib.import_module(module), name)
    params = {n: p for n, p in inspect.signature(func).parameters.items() if n != "progress"}
    assert "progress" in inspect.signature(func).parameters, f"{job.FUNC} takes no progress callback"
    fields = {f.name: f for f in dataclasses.fields(job) if f.name not in jobs.NOT_ENGINE_ARGUMENTS}  # Job's own: for the worker
    assert set(fields) == set(params), (
        f"{job.__name__} fields differ from {job.FUNC}: only in job {sorted(set(fields) - set(params))}, "
        f"only in engine {sorted(set(params) - set(fields))}"
    )
    for pname, p in params.items():
        f = fields[pname]
        if p.default is inspect.Parameter.empty:
            if pname == job.OUTPUT:
                continue  # filled by the tool layer with the temporary output path
            assert f.default is dataclasses.MISSING, f"{job.__name__}.{pname} has a default the engine does not"
        else:
            assert f.default == p.default, f"{job.__name__}.{pname} default {f.default!r} != engine {p.default!r}"
    if job.OUTPUT is not None:
        assert job.OUTPUT in fields


def test_jobs_pickle_and_replace_output() -> None:
    job = jobs.ReprojectRasterJob(src="a.tif", dst_crs="EPSG:4326")
    moved = job.writing_to("/tmp/x.tif")
    assert moved.dst == "/tmp/x.tif" and job.dst == ""
    assert pickle.loads(pickle.dumps(moved)) == moved
    with pytest.raises(TypeError):
        jobs.RasterInfoJob(path="a.tif").writing_to("/tmp/y")


def test_worker_refuses_anything_but_a_typed_engine_job() -> None:
    from gdal_mcp.execution.common import engine_function

    with pytest.raises(TypeError):
        engine_function(("gdal_mcp.engine.raster.info:raster_info", {"path": "x"}))

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Evil(jobs.Job[None]):
        FUNC = "os:system"

    with pytest.raises(ValueError):
        engine_function(Evil())
