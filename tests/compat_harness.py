"""What the runners around the shared compat matrix (/work/shared/compat, read-only) share:
where the harness is, the interpreter it gives its cells, a module injected into them as
``sitecustomize``, the harness's own command line, and the summary of its results.

Used by tests/compat_security/run_compat_secure.py (SASL_SSL) and
tests/compat_cluster/run_compat_cluster.py (a replication-factor-3 cluster)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HARNESS = Path(os.environ.get("KAFKATOOL_COMPAT", "/work/shared/compat"))
NICE = ["nice", "-n", "19"]


def harness_python() -> str:
    """The interpreter run.py gives the cells (its .venv when set up, else its own)."""
    venv = HARNESS / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def inject_sitecustomize(work: Path, source: Path) -> dict[str, str]:
    """``source`` copied as ``sitecustomize.py`` into a dir of its own; returns the PYTHONPATH
    that puts that dir first (the harness passes its environment to every cell)."""
    inject = work / "inject"
    inject.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, inject / "sitecustomize.py")
    path = os.pathsep.join(p for p in (str(inject), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def probe_injection(env: dict[str, str], names: list[str], what: str) -> list:
    """Import the injected sitecustomize in the harness's interpreter with ``env``; refuse one
    that is not loadable or not ours; return its attributes ``names``."""
    probe = f"import json, sitecustomize as s; print(json.dumps([s.__file__] + [getattr(s, n) for n in {names!r}]))"
    r = subprocess.run(
        [harness_python(), "-c", probe], env=env, cwd=HARNESS, capture_output=True, text=True, timeout=60
    )
    if r.returncode != 0:
        raise SystemExit(f"{what} not loadable in the harness's Python: {r.stderr.strip()[-600:]}")
    where, *values = json.loads(r.stdout.strip().splitlines()[-1])
    if Path(where).parent != Path(env["PYTHONPATH"].split(os.pathsep)[0]):
        raise SystemExit(f"{what} not injected: the harness loads sitecustomize from {where}")
    return values


def run_py(bootstrap: str, out: Path, logs: Path, harness_args: list[str]) -> list[str]:
    """The harness's command line: results as JSON in ``out``, per-cell logs in ``logs``."""
    return [
        *NICE,
        sys.executable,
        str(HARNESS / "run.py"),
        "--bootstrap",
        bootstrap,
        "--json",
        str(out),
        "--logs",
        str(logs),
        *harness_args,
    ]


def summarize(results: dict) -> tuple[dict[str, int], list[str]]:
    """Counts per status and one line per failed cell."""
    counts = {"ok": 0, "fail": 0, "n/a": 0}
    failed = []
    for client, cells in results.items():
        for scenario, cell in cells.items():
            counts[cell["status"]] = counts.get(cell["status"], 0) + 1
            if cell["status"] not in ("ok", "n/a"):
                failed.append(f"{client}/{scenario}: {cell['detail'][:300]}")
    return counts, failed
