"""``kafkatool retention``: the command, checkpoints, quarantine, locks, and crash tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import checkpoint as ck
from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.recovery import QUARANTINE_DIR
from tests.log.maint_util import (
    NOW,
    batch,
    count_fault_points,
    invoke,
    make_log_dir,
    rec,
    records_of,
    reopen_like_broker,
    run_killed_at,
    run_raising_at,
)

runner = CliRunner()
CFG = LogConfig(segment_bytes=1_000, index_interval_bytes=200)
HOUR = 3_600_000


def cli(*args):
    return runner.invoke(app, ["retention", *map(str, args)])


def lines(res):
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def fill(log, n_segments=5):
    for s in range(n_segments):
        for j in range(3):
            log.append_as_leader(batch([rec(b"k%d" % j, b"x" * 100, NOW - (n_segments - s) * HOUR + j)]), 0)
        log.roll()
    log.append_as_leader(batch([rec(b"k", b"last", NOW)]), 0)


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logs"
    make_log_dir(root, fill, config=CFG)
    return root


def test_deletes_by_time_with_checkpoints_and_quarantine(logdir):
    before = records_of(logdir / "t-0")
    res = cli(logdir, "--now", NOW, "--retention-ms", int(2.5 * HOUR), "--json")
    assert res.exit_code == 0, res.output
    out = lines(res)
    part, segs, summary = out[0], [o for o in out if o["type"] == "segment"], out[-1]
    assert part["settings"]["retention.ms"] == {"value": int(2.5 * HOUR), "source": "flag"}
    assert part["high_watermark_source"] == "replication-offset-checkpoint"
    assert [s["base_offset"] for s in segs] == [0, 3, 6] and all(s["action"] == "deleted" for s in segs)
    assert summary["segments_deleted"] == 3 and summary["bytes"] == sum(s["bytes"] for s in segs)
    after = records_of(logdir / "t-0")
    assert after == [r for r in before if r[0] >= 9]
    # log start offset = first segment base: Kafka leaves it out of log-start-offset-checkpoint
    assert ck.decode_offset_checkpoint((logdir / ck.LOG_START_OFFSET_CHECKPOINT).read_bytes()) == {}
    assert (logdir / ck.CLEAN_SHUTDOWN_FILE).exists()
    q = [p for p in summary["quarantined"] if p.endswith(".log")]
    assert len(q) == 3 and all(QUARANTINE_DIR in p for p in q)
    gone = []
    for p in q:
        gone += [
            (r.offset, r.key, r.value) for b in R.iter_batches(open(p, "rb").read()) for r in b.records()
        ]
    assert sorted(gone + after) == before
    # the broker agrees: it loads the dir as it is
    ends = reopen_like_broker(logdir, CFG)
    assert ends == {("t", 0): before[-1][0] + 1}


def test_dry_run(logdir):
    names = sorted(os.listdir(logdir / "t-0"))
    res = cli(logdir / "t-0", "--now", NOW, "--retention-ms", HOUR, "--dry-run")
    assert res.exit_code == 1, res.output
    assert "would delete" in res.stdout
    assert sorted(os.listdir(logdir / "t-0")) == names
    res = cli(logdir / "t-0", "--now", NOW, "--dry-run", "--json")  # default 7 days: nothing
    assert res.exit_code == 0 and lines(res)[-1]["segments_to_delete"] == 0


def test_no_replication_checkpoint_uses_the_log_end_offset(logdir):
    (logdir / ck.REPLICATION_OFFSET_CHECKPOINT).unlink()
    res = cli(logdir, "--now", NOW, "--retention-ms", 0, "--json", "--no-quarantine")
    part = lines(res)[0]
    assert "log end offset" in part["high_watermark_source"]
    assert part["log_start_offset_after"] == 15  # all but the last segment
    assert not (logdir / "t-0" / QUARANTINE_DIR).exists()


def test_server_properties_and_topic_config(logdir, tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hours=4\nlog.retention.bytes=-1\n")
    res = cli(logdir, "--now", NOW, "--dry-run", "--json", "--config", props)
    part = lines(res)[0]
    assert part["settings"]["retention.ms"] == {
        "value": 4 * HOUR,
        "source": "server.properties (log.retention.hours)",
    }
    assert [o["base_offset"] for o in lines(res) if o["type"] == "segment"] == [0]
    res = cli(
        logdir,
        "--now",
        NOW,
        "--dry-run",
        "--json",
        "--config",
        props,
        "--topic-config",
        "t:cleanup.policy=compact",
    )
    part = lines(res)[0]
    assert part["settings"]["cleanup.policy"] == {"value": "compact", "source": "topic config"}
    assert res.exit_code == 0 and not [o for o in lines(res) if o["type"] == "segment"]
    res = cli(logdir, "--dry-run", "--json", "--config", tmp_path / "missing.properties")
    assert res.exit_code == 2


def test_refuses_a_locked_log_dir(logdir):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import fcntl, os, time
            fd = os.open({str(logdir / ".lock")!r}, os.O_RDWR | os.O_CREAT)
            fcntl.lockf(fd, fcntl.LOCK_EX)
            print("locked", flush=True)
            time.sleep(60)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        names = sorted(os.listdir(logdir / "t-0"))
        res = cli(logdir, "--now", NOW, "--retention-ms", 0)
        assert res.exit_code == 2 and "locked by a running process" in res.stderr
        assert sorted(os.listdir(logdir / "t-0")) == names
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- crash tests


CRASH_RETENTION = str(int(1.5 * HOUR))


def small_fill(log):
    fill(log, 3)


def _retention(logdir):
    def run():
        invoke(["retention", logdir, "--now", NOW, "--retention-ms", CRASH_RETENTION, "--json"])

    return run


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_interrupted_retention_loses_nothing(tmp_path, mode):
    template = tmp_path / "template"
    make_log_dir(template, small_fill, config=CFG)
    original = records_of(template / "t-0")
    ref = tmp_path / "ref"
    shutil.copytree(template, ref)
    ops = count_fault_points(_retention(ref))
    assert len(records_of(ref / "t-0")) == len(original) - 6
    assert len(ops) > 15 and {"rename", "delete", "link"} <= {op for op, _ in ops}
    expected = records_of(ref / "t-0")
    for n in range(0, len(ops), 1 if mode == "raise" else 2):
        work = tmp_path / f"{mode}-{n}"
        shutil.copytree(template, work)
        if mode == "raise":
            assert run_raising_at(_retention(work), n)
        else:
            run_killed_at(_retention(work), n)
        if n % 2:
            reopen_like_broker(work, CFG)
        else:
            Log(work / "t-0", CFG, clock=lambda: NOW).close()
        after = records_of(work / "t-0")
        # a suffix of the original, whole segments only, nothing duplicated
        assert after == original[len(original) - len(after) :], f"fault point {n}: {ops[n]}"
        assert after[0][0] in (0, 3, 6)
        # every record no longer in the log is in the quarantine
        kept = []
        for q in (work / "t-0").glob(f"{QUARANTINE_DIR}/*/*.log"):
            kept += [(r.offset, r.key, r.value) for b in R.iter_batches(q.read_bytes()) for r in b.records()]
        assert set(original) - set(after) <= set(kept)
        assert invoke(["retention", work, "--now", NOW, "--retention-ms", CRASH_RETENTION])[0] == 0
        assert records_of(work / "t-0") == expected
        shutil.rmtree(work)
