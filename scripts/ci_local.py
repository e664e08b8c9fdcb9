"""Run the CI workflow's steps here, in order: what .github/workflows/ci.yml does on a pull request.

    ./scripts/ci-local                 every job (a job that needs what this machine lacks is skipped, saying why)
    ./scripts/ci-local lint package    only these jobs

Reads the workflow itself, so the two cannot drift: each job's `run:` steps are run with bash from the repository
root, one after another; `uses:` steps set up what this machine already has (a checkout, uv) and are only listed. A
job that runs in a container there (the tests, on Debian 12 as root) runs here on this machine; a matrix job runs
once, with this machine's Python. The image job needs a Docker engine: without one it is skipped, and says so.
Exit status 1 when a step failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def docker_engine() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def main(argv: list[str]) -> int:
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    jobs: dict[str, dict] = workflow["jobs"]
    wanted = argv or list(jobs)
    unknown = [j for j in wanted if j not in jobs]
    if unknown:
        print(f"ci-local: no job {', '.join(unknown)} in {WORKFLOW.relative_to(ROOT)} (jobs: {', '.join(jobs)})")
        return 2
    env = {**os.environ, "CI": "true"}
    # uv as the scripts find it (scripts/_uv.sh): on PATH, or through python3 -m uv
    uv = os.environ.get("CI_LOCAL_UV", "uv")
    if shutil.which("uv") is None or shutil.which("uvx") is None:
        shim = Path(os.environ.get("TMPDIR", "/tmp")) / "gdal-mcp-ci-local-bin"
        shim.mkdir(exist_ok=True)
        for name, args in (("uv", ""), ("uvx", " tool run")):
            (shim / name).write_text(f'#!/bin/sh\nexec {uv}{args} "$@"\n')
            (shim / name).chmod(0o755)
        env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    results: list[tuple[str, str]] = []
    for name in wanted:
        job = jobs[name]
        steps = job.get("steps", [])
        if name == "image" and not docker_engine():
            results.append((name, "skipped: no Docker engine on this machine (docker info fails)"))
            print(f"=== {name}: skipped, no Docker engine here", flush=True)
            continue
        print(f"=== {name}: {job.get('name', name)}", flush=True)
        status = "passed"
        for step in steps:
            if "uses" in step:
                print(f"--- (set-up step {step['uses'].split('@')[0]}: provided by this machine)", flush=True)
                continue
            command = step["run"]
            print(f"--- {step.get('name', command)}", flush=True)
            t0 = time.monotonic()
            done = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=ROOT, env={**env, **step.get("env", {})})
            print(f"--- exit {done.returncode} after {time.monotonic() - t0:.0f} s", flush=True)
            if done.returncode != 0:
                status = f"failed at: {command}"
                break
        results.append((name, status))
    print("=== summary")
    for name, status in results:
        print(f"{name}: {status}")
    return 1 if any(s.startswith("failed") for _, s in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
