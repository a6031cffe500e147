#!/usr/bin/env python3
"""Start-up cost of kafkatool commands and of ``serve``, against a bare interpreter start.

    python bench/bench_startup.py [--rounds 9] [--python A,B] [--no-serve] [--json]

Each figure is the median over the rounds of one fresh process: its CPU time (user + sys,
less sensitive than wall time to other work on a shared machine) and its wall time.  The
cases: ``kafkatool --help`` (imports every command module), ``dump-log --help``, ``dump-log``
and ``verify`` of a small segment (a real parse of options and arguments), ``serve --help``,
and ``serve`` from spawn to its first ApiVersions answer (wall; CPU of the serve process up
to then).  The reference, measured in the same rounds, is ``python -c pass``.

``--python A,B`` runs the same cases with several interpreters (venvs with different
dependency versions), alternating their order round by round so that the machine's swings
fall on both alike; rows name the interpreter's venv.  Bytecode caches are warmed first.
Standalone, not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quiet import proc_cpu  # noqa: E402
from table import Row, emit, render  # noqa: E402

from tests.broker.wire import WireClient  # noqa: E402
from tests.ports import free_port  # noqa: E402
from tests.segments import make_batches, write_segment  # noqa: E402


def build_log_dir(root: Path) -> Path:
    """One partition dir with a small segment and its indexes (20 batches of 5 records)."""
    pdir = root / "logs" / "bench-0"
    write_segment(pdir, make_batches(20))
    return pdir


def cases(pdir: Path) -> dict[str, list[str]]:
    segment = str(pdir / "00000000000000000000.log")
    k = ["-m", "kafkatool"]
    return {
        "python -c pass": ["-c", "pass"],
        "kafkatool --help": [*k, "--help"],
        "dump-log --help": [*k, "dump-log", "--help"],
        "dump-log SEGMENT": [*k, "dump-log", segment],
        "dump-log --deep-iteration --json SEGMENT": [*k, "dump-log", "--deep-iteration", "--json", segment],
        "verify DIR": [*k, "verify", str(pdir.parent)],
        "serve --help": [*k, "serve", "--help"],
    }


def run_once(python: str, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process."""
    t0 = time.perf_counter()
    p = subprocess.Popen([python, *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:  # a clean run: an error path would be timed instead
        raise RuntimeError(f"{python} {' '.join(args)} exited {p.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def serve_once(python: str, root: Path) -> tuple[float, float]:
    """(CPU seconds of the serve process, wall seconds) from spawn to the first ApiVersions answer."""
    data = Path(tempfile.mkdtemp(prefix="serve-", dir=root))
    port = free_port()
    cmd = [python, "-m", "kafkatool", "serve", "--no-banner"]
    cmd += ["-o", f"listeners=PLAINTEXT://127.0.0.1:{port}", "-o", f"log.dirs={data}"]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t0 < 60:
            if p.poll() is not None:
                raise RuntimeError(f"serve exited with {p.returncode}")
            try:
                with WireClient(f"127.0.0.1:{port}", timeout=2) as c:
                    c.api_versions()
            except OSError:
                time.sleep(0.005)
                continue
            wall = time.perf_counter() - t0
            return sum(proc_cpu(p.pid)), wall
        raise RuntimeError("serve did not answer ApiVersions within 60 s")
    finally:
        p.terminate()
        p.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--python", default=sys.executable, help="comma-separated interpreters to compare")
    ap.add_argument("--no-serve", action="store_true", help="leave out serve's spawn to ApiVersions")
    ap.add_argument("--json", action="store_true", help="one JSON row per line (bench/table.py)")
    a = ap.parse_args()
    pythons = [p for p in a.python.split(",") if p]
    root = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        todo = cases(build_log_dir(root))
        for py in pythons:  # bytecode caches written, files in page cache
            for args in todo.values():
                run_once(py, args)
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in range(a.rounds):
            order = pythons if r % 2 == 0 else pythons[::-1]
            for name, args in todo.items():
                for py in order:
                    samples.setdefault((py, name), []).append(run_once(py, args))
            if not a.no_serve:
                for py in order:
                    samples.setdefault((py, "serve -> first ApiVersions"), []).append(serve_once(py, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    rows = []
    for py in pythons:
        # several interpreters: each row names its venv (the folder that holds bin/python)
        tag = f"[{Path(py).parent.parent.name}] " if len(pythons) > 1 else ""
        base = samples[(py, "python -c pass")]
        base_cpu = statistics.median(s[0] for s in base) * 1000
        base_wall = statistics.median(s[1] for s in base) * 1000
        for (p, name), got in samples.items():
            if p != py or name == "python -c pass":
                continue
            cpu = statistics.median(s[0] for s in got) * 1000
            wall = statistics.median(s[1] for s in got) * 1000
            rows.append(Row("startup", f"{tag}{name} CPU", cpu, "ms", base_cpu, "python -c pass"))
            rows.append(Row("startup", f"{tag}{name} wall", wall, "ms", base_wall, "python -c pass"))
    if a.json:
        emit(rows)
    else:
        print(f"{a.rounds} rounds, medians")
        for line in render(rows):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
