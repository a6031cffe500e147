"""Issue 16's benchmarks in one command, one table (opt-in, never part of the test suite).

Runs, one after another and each in its own process (its own brokers, its own temp dirs):

* ``bench_limits``  the machine's ingest and egress ceilings, and serve's produce
  (1 MB and 16 KiB batches) and a raw fetch loop of one partition against them; ``limits-processes``: the same
  with ``kafkatool.processes`` = the machine's cores (rows marked ``[N processes]``);
* ``bench_stalls``  acks=all latency at 1,000 msg/s idle (with the generator's own
  lateness) and while the cleaner compacts and retention deletes 1 GB each;
* ``bench_scale``   100 / 1,000 / 10,000 partitions: CreateTopics, RSS, Metadata,
  start-up clean and after kill -9, produce to many partitions;
* ``bench_cores``   the broker on 1 core, on 2 cores as 2 processes, and as 1 process on 2 cores;
* ``bench_cluster`` three brokers, replication factor 3, acks=all, against one broker.

and prints every figure with its limit or baseline (measured in the same run), the ratio,
the issue's target and whether it is met.  Before each bench it writes the dirty pages
back and waits (bounded) for an idle machine (``bench/quiet.py``), and says what it
waited for; figures that need an idle machine note the state they started on.
``--quick`` passes ``--quick`` to each (a smoke run of a few minutes); ``--only
limits,stalls`` picks benches; ``--override K=V`` (repeatable) gives every bench's brokers
a serve property (e.g. ``kafkatool.append.writer=true``: its A/B against the default is two
runs), printed above the table.  Exit status 0 when every bench ran (met or not: the
table says), 1 when one failed to run.

    python bench/run_all.py            # the full run, about 15-20 minutes
    python bench/run_all.py --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_broker import OVERRIDES_ENV  # noqa: E402
from quiet import wait_quiet  # noqa: E402
from table import Row, hot_path_line, render  # noqa: E402

BENCHES = ("limits", "limits-processes", "stalls", "scale", "cores", "cluster")


def run_one(name: str, quick: bool, timeout: float) -> tuple[list[Row], str | None]:
    script, args = name, []
    if name == "limits-processes":
        script, args = "limits", ["--processes", str(max(2, len(os.sched_getaffinity(0))))]
    cmd = [sys.executable, str(HERE / f"bench_{script}.py"), "--json", *args] + (["--quick"] if quick else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s"
    rows = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            rows.append(Row.from_json(line))
    if p.returncode != 0 or not rows:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return rows, f"exit {p.returncode}: {tail}"
    return rows, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="pass --quick to every bench")
    ap.add_argument(
        "--only", default=",".join(BENCHES), help="comma-separated subset of " + ",".join(BENCHES)
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="per bench, seconds")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="K=V",
        help="a serve property every bench's brokers take (repeatable), e.g. kafkatool.append.writer=true",
    )
    a = ap.parse_args()
    bad = [kv for kv in a.override if "=" not in kv or not kv.split("=", 1)[0] or " " in kv]
    if bad:
        ap.error(f"--override takes K=V without spaces: {', '.join(bad)}")
    if a.override:  # the benches' brokers read it (bench_broker.override_args)
        os.environ[OVERRIDES_ENV] = " ".join(a.override)
    names = [n.strip() for n in a.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown bench: {', '.join(unknown)}")
    # every table says which code ran (the benches' brokers decide as this process does)
    print(hot_path_line(), flush=True)
    if a.override:
        print(f"serve overrides in every bench: {' '.join(a.override)}", flush=True)
    rows: list[Row] = []
    failed = []
    for name in names:
        # each bench starts from a settled machine: the previous one's writes written back,
        # the cores idle (bounded; it prints what it waited for).  The latency-sensitive
        # figures wait again themselves, right before they start (bench_stalls' idle window)
        wait_quiet(f"bench_{name}", max_seconds=30.0)
        t0 = time.monotonic()
        print(f"running bench_{name} ...", file=sys.stderr, flush=True)
        got, err = run_one(name, a.quick, a.timeout)
        rows += got
        print(
            f"  bench_{name}: {len(got)} figures in {time.monotonic() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        if err:
            failed.append(f"bench_{name}: {err}")
    for line in render(rows):
        print(line)
    met = sum(1 for r in rows if r.ok)
    judged = sum(1 for r in rows if r.ok is not None)
    print(f"\ntargets met: {met} of {judged}")
    for f in failed:
        print(f"did not run: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
