"""``kafkatool compact``: the command, its checkpoints and locks, and crash tests at every file operation."""

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
from kafkatool.forensics.verify import verify_path
from kafkatool.formats import checkpoint as ck
from kafkatool.log import topic_settings as ts
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.recovery import QUARANTINE_DIR
from tests.log.maint_util import (
    DAY,
    NOW,
    batch,
    count_fault_points,
    invoke,
    latest_per_key,
    make_log_dir,
    overlong_varint_batch,
    rec,
    records_of,
    reopen_like_broker,
    run_killed_at,
    run_raising_at,
)

runner = CliRunner()
CFG = LogConfig(segment_bytes=1_200, index_interval_bytes=300)


def cli(*args):
    return runner.invoke(app, ["compact", *map(str, args)])


def lines(res):
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def fill(log, n=80):
    for i in range(n):
        key = b"k%d" % (i % 9)
        value = None if i in (n // 2, n - 3) else b"value-%d" % i
        log.append_as_leader(batch([rec(key, value, NOW + i)]), 0)
    log.append_as_leader(batch([rec(None, b"keyless")]), 0)
    log.roll()
    log.append_as_leader(batch([rec(b"k1", b"active")]), 0)


@pytest.fixture
def logdir(tmp_path):
    root = tmp_path / "logs"
    make_log_dir(root, fill, config=CFG)
    return root


def errors(path):
    return [f for r in verify_path(path) for f in r.findings if f.severity == "error"]


def test_compacts_a_log_dir_and_updates_the_cleaner_checkpoint(logdir):
    before = records_of(logdir / "t-0")
    res = cli(logdir, "--now", NOW, "--json", "--config", "/dev/null")
    assert res.exit_code == 0, res.output
    out = lines(res)
    part, summary = out[0], out[-1]
    assert part["action"] == "compacted" and summary["type"] == "summary" and summary["compacted"] == 1
    assert part["high_watermark_source"] == "replication-offset-checkpoint"
    assert part["settings"]["delete.retention.ms"] == {"value": DAY, "source": "default"}
    stats = part["stats"]
    assert stats["keyless_removed"] == 1 and stats["records_removed"] > 0
    after = records_of(logdir / "t-0")
    upper = part["range"]["first_uncleanable_offset"]
    assert latest_per_key([r for r in after if r[0] < upper]) == latest_per_key(
        [r for r in before if r[0] < upper]
    )
    assert set(after) <= set(before)
    cp = ck.decode_offset_checkpoint((logdir / ck.CLEANER_OFFSET_CHECKPOINT).read_bytes())
    assert cp == {("t", 0): upper} == {("t", 0): part["checkpoint_after"]}
    assert (logdir / ck.CLEAN_SHUTDOWN_FILE).exists()
    assert not errors(logdir)
    # the original segments are in the quarantine, readable
    q = summary["quarantined"]
    assert q and all(os.path.exists(p) for p in q) and QUARANTINE_DIR in q[0]
    # a second run has nothing left to clean
    res = cli(logdir, "--now", NOW, "--json")
    assert res.exit_code == 0 and lines(res)[0]["action"] == "nothing_to_do"


def test_dry_run_exit_1_and_no_change(logdir):
    snapshot = {n: (logdir / "t-0" / n).read_bytes() for n in os.listdir(logdir / "t-0")}
    res = cli(logdir / "t-0", "--now", NOW, "--dry-run")
    assert res.exit_code == 1, res.output
    assert "would compact" in res.stdout
    assert {n: (logdir / "t-0" / n).read_bytes() for n in os.listdir(logdir / "t-0")} == snapshot
    assert not (logdir / ck.CLEANER_OFFSET_CHECKPOINT).exists()


def test_a_partition_dir_without_segment_files(logdir):
    """A backup that lost a partition's .log files (its indexes left): a dry run's read-only
    view has no segment and nothing to clean; the run itself loads it as Kafka's LogLoader
    does (the orphaned indexes go, an empty segment at the log start offset)."""
    for f in (logdir / "t-0").glob("*.log"):
        f.unlink()
    res = cli(logdir, "--now", NOW, "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    part = lines(res)[0]
    assert part["action"] == "nothing_to_do" and part["range"]["uncleanable_because"] == "no log segment"
    assert not list((logdir / "t-0").glob("*.log"))
    res = cli(logdir, "--now", NOW, "--json")
    assert res.exit_code == 0 and lines(res)[0]["action"] == "nothing_to_do", res.output


def test_flags_beat_topic_config_beat_server_properties(logdir, tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "log.cleaner.delete.retention.ms=5000\nlog.cleaner.min.compaction.lag.ms=7\nlog.segment.bytes=5000\n"
    )
    res = cli(
        logdir,
        "--now",
        NOW,
        "--dry-run",
        "--json",
        "--config",
        props,
        "--topic-config",
        "t:min.compaction.lag.ms=9",
        "--min-compaction-lag-ms",
        "0",
    )
    s = lines(res)[0]["settings"]
    assert s["delete.retention.ms"] == {
        "value": 5000,
        "source": "server.properties (log.cleaner.delete.retention.ms)",
    }
    assert s["min.compaction.lag.ms"] == {"value": 0, "source": "flag"}
    assert s["segment.bytes"]["value"] == 5000
    res = cli(logdir, "--now", NOW, "--dry-run", "--json", "--topic-config", "min.compaction.lag.ms=9")
    assert lines(res)[0]["settings"]["min.compaction.lag.ms"] == {"value": 9, "source": "topic config"}
    res = cli(logdir, "--topic-config", "nonsense.key=1")
    assert res.exit_code == 2 and "unknown topic config" in res.stderr


def test_the_io_rate_from_the_flag_server_properties_or_no_limit(logdir, tmp_path):
    """log.cleaner.io.max.bytes.per.second: the run's one throttle (tests/log/test_cleaner_throttle.py
    has its decisions); the summary says the rate, where it came from and the seconds slept."""
    props = tmp_path / "server.properties"
    props.write_text("log.cleaner.io.max.bytes.per.second=1e12\n")
    res = cli(logdir, "--now", NOW, "--dry-run", "--json")
    assert lines(res)[-1]["io_max_bytes_per_second"] == {"value": 1.7976931348623157e308, "source": "default"}
    res = cli(logdir, "--now", NOW, "--dry-run", "--json", "--config", props)
    summary = lines(res)[-1]
    assert summary["io_max_bytes_per_second"] == {
        "value": 1e12,
        "source": "server.properties (log.cleaner.io.max.bytes.per.second)",
    }
    assert summary["throttled_seconds"] == 0.0
    res = cli(logdir, "--now", NOW, "--dry-run", "--config", props, "--io-max-bytes-per-second", "5e11")
    assert "throttled 0.000 s at 5e+11 B/s (flag)" in res.stdout
    for bad in ("0", "-5"):
        res = cli(logdir, "--now", NOW, "--io-max-bytes-per-second", bad)
        assert res.exit_code == 2 and "must be above 0" in res.stderr
    props.write_text("log.cleaner.io.max.bytes.per.second=fast\n")
    res = cli(logdir, "--now", NOW, "--config", props)
    assert res.exit_code == 2 and "log.cleaner.io.max.bytes.per.second" in res.stderr


def test_tombstones_go_on_a_run_after_the_horizon(logdir):
    assert cli(logdir, "--now", NOW, "--delete-retention-ms", 1000).exit_code == 0
    tombs = [r for r in records_of(logdir / "t-0") if r[2] is None]
    assert tombs
    res = cli(logdir, "--now", NOW + 2000, "--delete-retention-ms", 1000, "--json")
    # the checkpoint says everything is clean: nothing to do until new dirty data -- as in Kafka
    assert lines(res)[0]["action"] == "nothing_to_do"
    (logdir / ck.CLEANER_OFFSET_CHECKPOINT).unlink()
    res = cli(logdir, "--now", NOW + 2000, "--delete-retention-ms", 1000, "--json")
    assert lines(res)[0]["stats"]["tombstones_removed"] >= 1
    upper = lines(res)[0]["range"]["first_uncleanable_offset"]
    assert not [r for r in records_of(logdir / "t-0") if r[2] is None and r[0] < upper]


def test_refuses_a_locked_log_dir(logdir):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import fcntl, os, sys, time
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
        before = records_of(logdir / "t-0")
        res = cli(logdir / "t-0", "--now", NOW)
        assert res.exit_code == 2
        assert "locked by a running process" in res.stderr and res.stderr.count("\n") == 1
        assert records_of(logdir / "t-0") == before
        # a dry run only reads
        assert cli(logdir / "t-0", "--now", NOW, "--dry-run").exit_code == 1
    finally:
        holder.kill()
        holder.wait()


def test_refuses_a_partition_that_needs_recovery(logdir):
    (logdir / ck.CLEAN_SHUTDOWN_FILE).unlink()
    seg = sorted((logdir / "t-0").glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09garbage-garbage-garbage")
    (logdir / ck.RECOVERY_POINT_CHECKPOINT).unlink()
    res = cli(logdir, "--now", NOW)
    assert res.exit_code == 2 and "kafkatool recover" in res.stderr


def test_bad_input(tmp_path):
    assert cli(tmp_path / "missing").exit_code == 2
    f = tmp_path / "file"
    f.write_text("x")
    res = cli(f)
    assert res.exit_code == 2 and "not a directory" in res.stderr
    assert cli(tmp_path, "--now", "yesterday").exit_code == 2


def test_a_partition_whose_record_the_decoder_refuses_is_left_uncleanable(tmp_path):
    """Kafka's cleaner thread on a record DefaultRecord.readFrom refuses (a 6-byte key length):
    LogCleaningException, the partition marked uncleanable, its segments as they were and its
    checkpoint entry the round's first dirty offset (cleanLog's finally: doneCleaning with the
    start offset; not advanced), the other partitions cleaned and checkpointed.  compact: one
    line naming the file, the batch offset and the byte position, exit 1 (a problem it does
    not fix remains); no traceback.  Before, the key scan read the varint and the record went
    as superseded."""
    root = tmp_path / "logs"

    def bad_fill(log):
        for i in range(40):
            key = b"k%d" % (i % 4)
            if i == 9:
                log.append_as_follower(overlong_varint_batch(9, key, b"v" * 40, "key_length"))
            else:
                log.append_as_follower(batch([rec(key, b"v" * 40, NOW + i)], base_offset=i))
        log.roll()

    make_log_dir(root, bad_fill, config=CFG, topic="bad")
    make_log_dir(root, fill, config=CFG, topic="good")
    bad_files = {p.name: p.read_bytes() for p in (root / "bad-0").iterdir()}
    seg = max(p for p in (root / "bad-0").glob("*.log") if int(p.stem) <= 9)
    at = 0
    for b in batches_of_file(seg):
        if b.base_offset == 9:
            at = b.position + 61 + 4  # the key length varint of the batch's only record
    good_before = records_of(root / "good-0")
    res = cli(root, "--now", NOW, "--json", "--cleanup-policy", "compact")
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    out = {r.get("partition"): r for r in lines(res)}
    assert (
        out["bad-0"]["error"] == f"{seg}: varint longer than 5 bytes in the batch at offset 9 (at byte {at})"
    )
    assert out["bad-0"]["action"] == "nothing_to_do" and out["bad-0"]["checkpoint_after"] == 0
    assert out["good-0"]["action"] == "compacted" and out["good-0"]["error"] is None
    assert out[None]["uncleanable"] == 1 and out[None]["compacted"] == 1
    assert {p.name: p.read_bytes() for p in (root / "bad-0").iterdir()} == bad_files
    good_after = records_of(root / "good-0")
    assert latest_per_key(good_after) == latest_per_key(good_before)
    assert len(good_after) < len(good_before)
    offsets = ck.decode_offset_checkpoint((root / ck.CLEANER_OFFSET_CHECKPOINT).read_bytes())
    assert offsets == {("good", 0): out["good-0"]["checkpoint_after"], ("bad", 0): 0}
    assert offsets[("good", 0)] == out["good-0"]["range"]["first_uncleanable_offset"] > 0
    # the text output: the same one line
    human = cli(root, "--now", NOW, "--cleanup-policy", "compact")
    assert human.exit_code == 1 and "Traceback" not in human.output
    assert f"error: {out['bad-0']['error']}; the partition is left uncleanable" in human.stdout
    assert {p.name: p.read_bytes() for p in (root / "bad-0").iterdir()} == bad_files


@pytest.mark.parametrize("failure", ["io_error", "kill"])
def test_a_partitions_checkpoint_is_written_when_it_is_done(tmp_path, failure):
    """Kafka's doneCleaning writes a partition's cleaner checkpoint as soon as its cleaning
    ends, whatever happens to the next one.  Here the second partition's first file change
    fails (an I/O error: the run stops, exit 2, one line) or kills the process: the first
    partition's entry is on disk, its data cleaned; the second's is not advanced and its
    data is all there.  Before, every entry waited for the end of the run (a kill lost them)."""
    import signal

    from kafkatool.log import fileops

    root = tmp_path / "logs"
    make_log_dir(root, fill, config=CFG, topic="a")
    make_log_dir(root, fill, config=CFG, topic="b")
    a_before, b_before = records_of(root / "a-0"), records_of(root / "b-0")
    b_logs = {p.name: p.read_bytes() for p in (root / "b-0").glob("*.log")}
    args = ["compact", root, "--now", NOW, "--json", "--cleanup-policy", "compact", "--no-quarantine"]

    def hook(op, path):
        if "b-0" in path.parts:
            if failure == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(5, "Input/output error", str(path))

    if failure == "kill":
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                with fileops.fault_hook(hook):
                    invoke(args)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    else:
        with fileops.fault_hook(hook):
            code, _ = invoke(args)
        assert code == 2
        assert not (root / ck.CLEAN_SHUTDOWN_FILE).exists()  # b-0 was abandoned mid-change
    offsets = ck.decode_offset_checkpoint((root / ck.CLEANER_OFFSET_CHECKPOINT).read_bytes())
    assert set(offsets) == {("a", 0)} and offsets[("a", 0)] > 0
    a_after = records_of(root / "a-0")
    assert latest_per_key(a_after) == latest_per_key(a_before) and len(a_after) < len(a_before)
    assert {p.name: p.read_bytes() for p in (root / "b-0").glob("*.log")} == b_logs
    assert records_of(root / "b-0") == b_before


def batches_of_file(path):
    from kafkatool.formats import records as R

    return list(R.iter_batches(path.read_bytes()))


# ---------------------------------------------------------------- crash tests


def _compact(logdir):
    def run():
        invoke(["compact", logdir, "--now", NOW, "--json"])

    return run


CRASH_RECORDS = 36
UPPER = CRASH_RECORDS + 1  # the keyless record, then the roll


def small_fill(log):
    fill(log, CRASH_RECORDS)


def _check_whole(part, original):
    """No committed record lost, none duplicated, nothing invented."""
    after = records_of(part)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets)), "duplicate or out-of-order offsets"
    assert set(after) <= set(original), "a record changed"
    # the latest value of every key survives
    assert latest_per_key(after) == latest_per_key(original)
    # everything above the cleanable range is untouched
    assert [r for r in after if r[0] >= UPPER] == [r for r in original if r[0] >= UPPER]


@pytest.mark.parametrize("mode", ["raise", "kill"])
def test_interrupted_compaction_loses_nothing(tmp_path, mode):
    template = tmp_path / "template"
    make_log_dir(template, small_fill, config=CFG)
    original = records_of(template / "t-0")
    ref = tmp_path / "ref"
    shutil.copytree(template, ref)
    ops = count_fault_points(_compact(ref))
    assert len(ops) > 20 and {"rename", "delete", "link", "write"} <= {op for op, _ in ops}
    expected = records_of(ref / "t-0")
    step = 1 if mode == "raise" else 3
    for n in range(0, len(ops), step):
        work = tmp_path / f"{mode}-{n}"
        shutil.copytree(template, work)
        if mode == "raise":
            assert run_raising_at(_compact(work), n)
        else:
            run_killed_at(_compact(work), n)
        if n % 2:
            # a broker starts on the dir
            reopen_like_broker(work, CFG)
        else:
            # the engine's loader alone (unclean start, recovery points from the checkpoint)
            Log(work / "t-0", CFG, recovery_point=0, clock=lambda: NOW).close()
        _check_whole(work / "t-0", original)
        # and a second run finishes the job: the same result as an uninterrupted one
        assert invoke(["compact", work, "--now", NOW])[0] == 0
        _check_whole(work / "t-0", original)
        assert records_of(work / "t-0") == expected, f"fault point {n}: {ops[n]}"
        if n % 5 == 0:
            assert not errors(work), f"fault point {n}: {ops[n]}"
        shutil.rmtree(work)


def test_the_io_rate_a_serve_keeps_as_a_dynamic_config(tmp_path):
    """log.cleaner.io.max.bytes.per.second set at runtime through a real serve (`kafkatool configs
    alter`: IncrementalAlterConfigs, kept in the log dir's dynamic-config file) is the rate
    compact runs with, in Kafka's order: the flag > the broker's own dynamic config > the
    cluster-wide default one > server.properties > Kafka's default; at every step the rate serve
    itself describes (DescribeConfigs of broker 1).  --dry-run reads the dir beside the running
    broker."""
    from tests.broker.conftest import BrokerProcess
    from tests.broker.test_admin import create, describe
    from tests.broker.wire import WireClient

    rate = "log.cleaner.io.max.bytes.per.second"
    props = tmp_path / "server.properties"
    props.write_text(f"{rate}=3000000\n")
    data = tmp_path / "data"
    b = BrokerProcess(data).start()

    def alter(*args) -> None:
        res = runner.invoke(
            app, ["configs", "alter", "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", *args]
        )
        assert res.exit_code == 0, res.output

    def served() -> float | None:
        with WireClient(b.bootstrap) as c:
            entry = describe(c, "1", keys=[rate], rtype=4)[1][rate]
        return float(entry.value) if entry.value is not None else None

    def compacted(*extra) -> dict:
        res = cli(data, "--dry-run", "--json", "--config", props, *extra)
        assert res.exit_code in (0, 1), res.output
        return lines(res)[-1]["io_max_bytes_per_second"]

    kept = f"{ts.DYNAMIC_CONFIGS_FILE}: dynamic broker config ({rate})"
    try:
        with WireClient(b.bootstrap) as c:
            assert create(c, "cmp", 1, configs={"cleanup.policy": "compact"}).error_code == 0
        static = {"value": 3e6, "source": f"server.properties ({rate})"}
        assert compacted() == static
        alter("--entity-default", "--add-config", f"{rate}=1000000")
        assert compacted() == {"value": 1e6, "source": kept} and served() == 1e6
        alter("--entity-name", "1", "--add-config", f"{rate}=2000000")
        assert compacted() == {"value": 2e6, "source": kept} and served() == 2e6
        assert compacted("--io-max-bytes-per-second", "5e6") == {"value": 5e6, "source": "flag"}
        alter("--entity-default", "--delete-config", rate)
        assert compacted() == {"value": 2e6, "source": kept} and served() == 2e6
        alter("--entity-default", "--add-config", f"{rate}=1000000")
        alter("--entity-name", "1", "--delete-config", rate)
        assert compacted() == {"value": 1e6, "source": kept} and served() == 1e6
        alter("--entity-default", "--delete-config", rate)
        assert compacted() == static
    finally:
        assert b.stop() == 0


def test_the_cleaner_settings_a_kraft_log_keeps(tmp_path):
    """A KRaft dir's dynamic broker configs (ConfigRecords of the broker resource: "" the
    cluster-wide default, "1" the dir's node): the broker's own over the default, for the I/O
    rate and the offset map's memory; a value Kafka refuses is left out with a warning; serve's
    dynamic-config file over the KRaft log, as serve takes them (Broker._take_kraft_configs)."""
    from kafkatool.formats.generated.config_record import ConfigRecord
    from tests.broker.test_topic_config_sources import _metadata_value, write_kraft_dir

    def broker_config(node: str, name: str, value: str) -> bytes:
        return _metadata_value(ConfigRecord(resource_type=4, resource_name=node, name=name, value=value), 4)

    rate, memory = "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size"
    d = tmp_path / "kraft"
    extra = [
        broker_config("", rate, "1000000"),
        broker_config("1", rate, "2000000"),
        broker_config("2", rate, "7000000"),  # another node's: not this dir's broker
        broker_config("", memory, "33554432"),
        broker_config("1", memory, "lots"),  # not a LONG: Kafka leaves it out
    ]
    write_kraft_dir(d, "events", {"cleanup.policy": "compact"}, extra=extra)
    res = cli(d, "--dry-run", "--json", "--now", NOW)
    out = lines(res)
    source = f"{ts.SOURCE_KRAFT}: dynamic broker config"
    assert out[-1]["io_max_bytes_per_second"] == {"value": 2e6, "source": f"{source} ({rate})"}
    assert out[-1]["offset_map"]["memory_source"] == f"{source} ({memory})"
    assert out[-1]["offset_map"]["slots"] == 33554432 // 24
    (warning,) = [x for x in out if x["type"] == "warning"]
    assert (
        f"dynamic broker config {memory} in {d / ts.CLUSTER_METADATA_DIR} (broker 1) ignored"
        in warning["message"]
    )
    # serve's own file (changes made through serve) over the KRaft log's, as serve takes them
    doc = {"version": 1, "broker": 1, "configs": {rate: "4000000"}, "default_configs": {}}
    (d / ts.DYNAMIC_CONFIGS_FILE).write_text(json.dumps(doc))
    out = lines(cli(d, "--dry-run", "--json", "--now", NOW))
    assert out[-1]["io_max_bytes_per_second"] == {
        "value": 4e6,
        "source": f"{ts.DYNAMIC_CONFIGS_FILE}: dynamic broker config ({rate})",
    }
