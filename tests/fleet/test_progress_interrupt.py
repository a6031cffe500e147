"""Issue 12: ``fleet scan`` shows progress (terminal and --json) and stops cleanly on Ctrl-C.

Cases: no progress for a long scan; Ctrl-C printed 49 lines of py4j tracebacks;
"broker None" in the human view.  The JSON stream runs in-process on the suite's
Spark session; Ctrl-C is a real SIGINT to a real ``kafkatool fleet scan`` process
group (as a terminal sends it) whose stderr is a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from kafkatool.cli import app

REPO = Path(__file__).resolve().parents[2]


def test_json_progress_events_on_stderr(spark, fleet):
    r = CliRunner().invoke(
        app, ["fleet", "scan", "--inventory", str(fleet.inventory_path), "--json", "--quick"]
    )
    events = [json.loads(x) for x in r.stderr.splitlines() if x.startswith('{"type": "progress"')]
    assert events, r.stderr
    stages = [e["stage"] for e in events]
    assert stages[0] == "list" and stages[-1] == "done"
    assert [s for i, s in enumerate(stages) if i == 0 or stages[i - 1] != s] == [
        "list",
        "scan",
        "summarize",
        "compare",
        "collect",
        "done",
    ]
    last = events[-1]
    assert last["segments_done"] == last["segments_total"] > 0
    assert last["bytes_done"] == last["bytes_total"] > 0
    assert all(set(e) >= {"spark_stages", "elapsed_s"} for e in events)
    # stdout is the report alone
    assert {json.loads(x)["type"] for x in r.stdout.splitlines()} <= {
        "finding",
        "divergence",
        "partition_size",
        "summary",
    }


def test_human_view_never_says_broker_none(spark, tmp_path):
    from fleet.fleetgen import build_fleet

    f = build_fleet(tmp_path / "nometa", topics=[("t", 1, 1)], batches=4, damage=False)
    pdir = f.partition_dirs[("t", 0, f.assignment[("t", 0)][0])]
    d = pdir.parent
    (d / "meta.properties").unlink()
    log = sorted(pdir.glob("*.log"))[0]
    with log.open("ab") as fh:
        fh.write(b"\xff" * 40)  # a finding on that dir
    r = CliRunner().invoke(app, ["fleet", "scan", str(d)])
    assert "None" not in r.stdout, r.stdout
    assert "log dir" in r.stdout or "unknown" in r.stdout


def test_ctrl_c_stops_spark_with_one_line(fleet, tmp_path):
    """SIGINT to the process group mid-scan: exit 130, one line, no traceback; the terminal
    display showed the scan's stages and segment counts before."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatool", "fleet", "scan", "--inventory", str(fleet.inventory_path)]
        + ["--master", "local[1]", "--conf", f"spark.local.dir={tmp_path}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    sent = False
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            if not sent and re.search(rb"scan\s.*segments", seen):
                os.killpg(proc.pid, signal.SIGINT)
                sent = True
                mark = len(seen)
            if proc.poll() is not None and not ready:
                break
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(master)
    assert sent, seen[-2000:]
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen).decode(errors="replace")
    after = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen[mark:]).decode(errors="replace")
    assert rc == 130, text[-2000:]
    assert "segments" in text and "spark stage" in text
    lines = [x for x in re.split(r"[\r\n]+", after) if x.strip() and "segments" not in x]
    assert lines == ["kafkatool: error: interrupted: the Spark jobs were cancelled; no report"], lines
    assert "Traceback" not in text and "py4j" not in text.lower()
    assert proc.stdout.read() == b""


def test_offset_gaps_of_compacted_topics_from_their_policy(spark, tmp_path):
    """A compacted topic's gaps are the cleaner's work: known from the dir's metadata (internal
    topics by definition, embedded/KRaft configs), not only from cleaner-offset-checkpoint."""
    import json as _json

    from tests.segments import make_partition

    d = tmp_path / "logdir"
    for name in ("__consumer_offsets-0", "cmp-0", "plain-0"):
        pdir = make_partition(d, name, segments=3, batches_per_segment=4)
        for suffix in ("log", "index", "timeindex"):
            sorted(pdir.glob(f"*.{suffix}"))[1].unlink()  # the cleaner emptied the middle segment
    (d / "kafkatool-cluster.json").write_text(
        _json.dumps(
            {
                "topics": {
                    "cmp": {
                        "id": "AAAAAAAAAAAAAAAAAAAAAA",
                        "partitions": 1,
                        "configs": {"cleanup.policy": "compact"},
                    }
                }
            }
        )
    )
    r = CliRunner().invoke(app, ["fleet", "scan", str(d), "--json"])
    gaps = {
        o["topic"]: o["severity"]
        for o in map(json.loads, r.stdout.splitlines())
        if o["type"] == "finding" and o["kind"] == "offset_gap"
    }
    assert gaps == {"__consumer_offsets": "info", "cmp": "info", "plain": "warning"}, r.stdout
