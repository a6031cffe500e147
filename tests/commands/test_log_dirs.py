"""kafkatool log-dirs describe (kafka-log-dirs.sh --describe) against a real `kafkatool serve`
with two log dirs, and describe --log-dir on the same dirs while it runs and once it stopped."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import java_collections as J
from kafkatool.protocol import generated as G
from tests.broker.conftest import BrokerProcess
from tests.broker.test_admin import create
from tests.broker.test_protocol import batch, produce
from tests.broker.wire import WireClient

runner = CliRunner()
QUERYING = "Querying brokers for log directories information"


def run(*args):
    res = runner.invoke(app, ["log-dirs", "describe", *map(str, args)])
    assert "Traceback" not in res.output, res.output
    return res


def kafka_output(res) -> tuple[list[str], dict]:
    """LogDirsCommand's two lines and its JSON."""
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == 3, lines
    return lines[:2], json.loads(lines[2])


def replicas(doc: dict) -> dict[tuple[int, str, str, bool], tuple[int, int]]:
    """(broker, dir, partition, isFuture) -> (size, offsetLag)."""
    return {
        (b["broker"], d["logDir"], p["partition"], p["isFuture"]): (p["size"], p["offsetLag"])
        for b in doc["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
    }


def on_disk(dirs: list[Path]) -> dict[tuple[str, str], int]:
    """(dir, partition) -> the bytes of its segment files (.log), as the broker counts a log."""
    out = {}
    for d in dirs:
        for part in d.iterdir():
            if part.is_dir() and "." not in part.name and part.name[-1].isdigit():
                out[str(d), part.name] = sum(f.stat().st_size for f in part.glob("*.log"))
    return out


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    base = tmp_path_factory.mktemp("logdirs")
    dirs = [base / "d1", base / "d2"]
    # a log-dir move copies replica.fetch.max.bytes at a time, the first step whatever the
    # throttle (Kafka's future-replica fetch): 100 B keeps a throttled move of lda in progress
    b = BrokerProcess(dirs[0], extra=[f"log.dirs={dirs[0]},{dirs[1]}", "replica.fetch.max.bytes=100"]).start()
    b.dirs = dirs
    try:
        with WireClient(b.bootstrap) as c:
            assert create(c, "lda", 4).error_code == 0
            assert create(c, "ldb", 2).error_code == 0
            for p in range(4):
                for _ in range(p + 1):
                    produce(c, "lda", batch(5, size=100), partition=p)
            produce(c, "ldb", batch(3, size=50), partition=1)
        yield b
    finally:
        if b.alive():
            b.stop()


def test_live_output_is_kafkas_and_sizes_are_the_brokers(broker):
    heads, doc = kafka_output(run("--bootstrap-server", broker.bootstrap))
    assert heads == [QUERYING, "Received log directory information from brokers 1"]
    got = replicas(doc)
    assert [b["broker"] for b in doc["brokers"]] == [1]
    assert {d["logDir"] for d in doc["brokers"][0]["logDirs"]} == {str(d) for d in broker.dirs}
    assert all(d["error"] is None for d in doc["brokers"][0]["logDirs"])
    disk = on_disk(broker.dirs)
    assert {(d, p): s for (_, d, p, _), (s, _) in got.items()} == disk
    assert sorted(p for _, p in disk) == ["lda-0", "lda-1", "lda-2", "lda-3", "ldb-0", "ldb-1"]
    assert all(lag == 0 for _, lag in got.values()) and not any(k[3] for k in got)
    assert disk[next(k for k in disk if k[1] == "lda-3")] > disk[next(k for k in disk if k[1] == "lda-0")] > 0
    # Jackson's text of Java HashMaps: keys in HashMap order, compact, a null error
    text = run("--bootstrap-server", broker.bootstrap).stdout.splitlines()[2]
    assert text.startswith('{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"')
    assert text.endswith('"}]}],"version":1}') and '"error":null,"logDir":"' in text
    for d in doc["brokers"][0]["logDirs"]:
        names = [tuple(p["partition"].rsplit("-", 1)) for p in d["partitions"]]
        tps = [(t, int(p)) for t, p in names]
        assert tps == J.hash_map_order(sorted(tps), J.topic_partition_hash)
        assert list(d) == ["partitions", "error", "logDir"]
        assert all(list(p) == ["partition", "size", "offsetLag", "isFuture"] for p in d["partitions"])


def test_filters_and_unknown_broker(broker):
    boot = ("--bootstrap-server", broker.bootstrap)
    _, doc = kafka_output(run(*boot, "--topic-list", "ldb,nosuch"))
    assert sorted(k[2] for k in replicas(doc)) == ["ldb-0", "ldb-1"]
    assert len(doc["brokers"][0]["logDirs"]) == 2  # every dir is listed, as Kafka lists it
    _, doc = kafka_output(run(*boot, "--broker-list", "1,"))
    assert [b["broker"] for b in doc["brokers"]] == [1]
    res = run(*boot, "--broker-list", "1,7,5")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.strip() == (
        "kafkatool: error: ERROR: The given brokers do not exist from --broker-list: 5,7. "
        "Current existent brokers: 1"
    )
    lines = [json.loads(x) for x in run(*boot, "--json", "--topic-list", "lda").stdout.splitlines()]
    dirs = [x for x in lines if x["type"] == "log_dir"]
    reps = [x for x in lines if x["type"] == "replica"]
    assert [d["log_dir"] for d in dirs] == sorted(str(d) for d in broker.dirs)
    assert sorted(r["partition"] for r in reps) == [0, 1, 2, 3] and {r["topic"] for r in reps} == {"lda"}
    assert sum(d["partitions"] for d in dirs) == 4 and all(d["error"] is None for d in dirs)
    disk = on_disk(broker.dirs)
    assert all(disk[r["log_dir"], f"lda-{r['partition']}"] == r["size"] for r in reps)


def test_offline_on_the_live_dirs_equals_the_live_answer(broker):
    _, live = kafka_output(run("--bootstrap-server", broker.bootstrap))
    before = {p: p.stat().st_mtime_ns for d in broker.dirs for p in d.rglob("*") if p.is_file()}
    heads, offline = kafka_output(run("--log-dir", broker.dirs[0], "--log-dir", broker.dirs[1]))
    assert heads == [
        f"Reading log directories information from {broker.dirs[0]},{broker.dirs[1]}",
        "Read log directory information of brokers 1",
    ]
    assert replicas(offline) == replicas(live)
    # read-only: nothing of the running broker's dirs written (its checkpoints are its own)
    assert all(p.stat().st_mtime_ns == t for p, t in before.items() if not p.name.endswith("checkpoint"))
    assert (broker.dirs[0] / ".lock").exists() and broker.alive()
    # one partition dir: that partition only, in its dir
    part = next(p for p in broker.dirs[1].iterdir() if p.name.startswith("lda-"))
    _, one = kafka_output(run("--log-dir", part))
    assert list(replicas(one)) == [(1, str(broker.dirs[1]), part.name, False)]
    res = run("--log-dir", broker.dirs[0], "--broker-list", "2")
    assert (
        res.exit_code == 2 and "do not exist from --broker-list: 2. Current existent brokers: 1" in res.stderr
    )


def _alter_dir(c, topic: str, partition: int, path: Path) -> int:
    from kafkatool.protocol.generated.alter_replica_log_dirs_request import (
        AlterReplicaLogDir,
        AlterReplicaLogDirTopic,
    )

    req = G.AlterReplicaLogDirsRequest(
        dirs=[
            AlterReplicaLogDir(
                path=str(path), topics=[AlterReplicaLogDirTopic(name=topic, partitions=[partition])]
            )
        ]
    )
    return c.request(34, 2, req).results[0].partitions[0].error_code


def test_a_log_dir_move_shows_the_future_replica_live_and_offline(broker):
    throttle = "replica.alter.log.dirs.io.max.bytes.per.second"
    res = runner.invoke(
        app,
        ["configs", "alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", f"{throttle}=20",
         "--bootstrap-server", broker.bootstrap],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    _, doc = kafka_output(run("--bootstrap-server", broker.bootstrap, "--topic-list", "lda"))
    src = next(d for (_, d, p, _) in replicas(doc) if p == "lda-3")
    dest = next(d for d in broker.dirs if str(d) != src)
    with WireClient(broker.bootstrap) as c:
        assert _alter_dir(c, "lda", 3, dest) == 0
        try:
            _, doc = kafka_output(run("--bootstrap-server", broker.bootstrap, "--topic-list", "lda"))
            got = replicas(doc)
            assert (1, src, "lda-3", False) in got
            size, lag = got[1, str(dest), "lda-3", True]  # the copy in progress: 100 B, then 20 B/s
            assert lag == 20 and size < got[1, src, "lda-3", False][0]  # nothing copied whole yet
            _, off = kafka_output(
                run("--log-dir", broker.dirs[0], "--log-dir", broker.dirs[1], "--topic-list", "lda")
            )
            got = replicas(off)
            assert (1, src, "lda-3", False) in got and (1, str(dest), "lda-3", True) in got
            assert got[1, str(dest), "lda-3", True][1] == 20  # nothing whole on disk yet: 20 - 0
            # the future dir's own dir alone: no current replica there, Kafka's -1
            _, alone = kafka_output(run("--log-dir", dest, "--topic-list", "lda"))
            assert replicas(alone)[1, str(dest), "lda-3", True][1] == -1
        finally:
            assert _alter_dir(c, "lda", 3, Path(src)) == 0  # pinned where it is: the move is cancelled
    deadline = time.monotonic() + 10
    while any(p.name.endswith("-future") for p in dest.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    _, doc = kafka_output(run("--bootstrap-server", broker.bootstrap, "--topic-list", "lda"))
    assert not any(k[3] for k in replicas(doc))


def test_offline_on_the_stopped_broker_with_a_future_dir_laid_out(broker):
    _, live = kafka_output(run("--bootstrap-server", broker.bootstrap))
    assert broker.stop() == 0
    _, offline = kafka_output(run("--log-dir", broker.dirs[0], "--log-dir", broker.dirs[1]))
    assert replicas(offline) == replicas(live)
    # a move's copy as a crash leaves it: the first batch of lda-2's three, in the other dir
    src = next(d for d in broker.dirs if (d / "lda-2").is_dir())
    dest = next(d for d in broker.dirs if d != src)
    future = dest / "lda-2.0123456789abcdef0123456789abcdef-future"
    future.mkdir()
    seg = src / "lda-2" / "00000000000000000000.log"
    whole = seg.read_bytes()
    one_batch = int.from_bytes(whole[8:12], "big") + 12
    (future / seg.name).write_bytes(whole[:one_batch])
    _, offline = kafka_output(
        run("--log-dir", broker.dirs[0], "--log-dir", broker.dirs[1], "--topic-list", "lda")
    )
    got = replicas(offline)
    assert got[1, str(dest), "lda-2", True] == (one_batch, 15 - 5)
    assert got[1, str(src), "lda-2", False] == (len(whole), 0)
    lines = [
        json.loads(x) for x in run("--log-dir", dest, "--json", "--topic-list", "lda").stdout.splitlines()
    ]
    fut = [x for x in lines if x["type"] == "replica" and x["is_future"]]
    assert fut == [
        {"type": "replica", "broker": 1, "log_dir": str(dest), "topic": "lda", "partition": 2,
         "size": one_batch, "offset_lag": -1, "is_future": True}
    ]  # fmt: skip
    shutil.rmtree(future)
    assert not os.path.exists(future)


def test_bad_input_is_one_line_exit_2(tmp_path):
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8 not kafka")
    # the admin client's timeouts, checked as KafkaAdminClient checks them, before any request
    (tmp_path / "short.properties").write_text("default.api.timeout.ms=1000\n")
    (tmp_path / "nan.properties").write_text("default.api.timeout.ms=2147483648\n")
    for args, words in [
        ((), "exactly one of --bootstrap-server and --log-dir"),
        (("--log-dir", tmp_path, "--bootstrap-server", "127.0.0.1:1"), "exactly one of"),
        (("--log-dir", tmp_path / "nowhere"), "No such file or directory"),
        (("--log-dir", tmp_path / "cat.jpg"), "not a directory"),
        (("--log-dir", tmp_path, "--broker-list", "1,x"), 'For input string: "x"'),
        (("--bootstrap-server", "127.0.0.1:1"), "cannot connect"),
        (("--bootstrap-server", "nohostport"), "is not host:port"),
        (("--bootstrap-server", "127.0.0.1:1", "--command-config", tmp_path / "short.properties"),
         "The specified value of default.api.timeout.ms must be no smaller than the value of request.timeout.ms."),
        (("--bootstrap-server", "127.0.0.1:1", "--command-config", tmp_path / "nan.properties"),
         "Invalid value 2147483648 for configuration default.api.timeout.ms: Not a number of type INT"),
    ]:  # fmt: skip
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 1 and words in res.stderr, (
            args,
            res.stderr,
        )


def test_an_offline_dir_shows_kafkas_exception(tmp_path):
    """A dir the broker could not open at start (its meta.properties unreadable) is offline:
    DescribeLogDirs answers KAFKA_STORAGE_ERROR for it, printed as Kafka's exception class."""
    good, bad = tmp_path / "d1", tmp_path / "d2"
    good.mkdir()
    (bad / "meta.properties").mkdir(parents=True)
    b = BrokerProcess(good, extra=[f"log.dirs={good},{bad}"]).start()
    try:
        _, doc = kafka_output(run("--bootstrap-server", b.bootstrap))
        dirs = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
        assert dirs[str(bad)] == {
            "partitions": [],
            "error": "org.apache.kafka.common.errors.KafkaStorageException",
            "logDir": str(bad),
        }
        assert dirs[str(good)]["error"] is None
        lines = [json.loads(x) for x in run("--bootstrap-server", b.bootstrap, "--json").stdout.splitlines()]
        assert [(x["log_dir"], x["error_code"]) for x in lines] == [(str(good), 0), (str(bad), 56)]
    finally:
        b.stop()


def test_kafka_json_filters_after_the_admin_clients_map():
    """--topic-list filters the admin client's map of all a dir's replicas into a new HashMap,
    so the order of what is left follows the whole map's (the order a JDK printed for
    LogDirsCommand's two maps; filtering first would give k95-1 k95-2 k20-1 k20-2 k95-0 k20-0)."""
    from kafkatool.assign.log_dirs import BrokerLogDirs, LogDir, Replica, kafka_json

    sizes = {"k20": 3, "k95": 3, "o5": 7, "o71": 7, "o90": 6}
    reps = [Replica(t, p, 100 * p, 0, False) for t in sorted(sizes) for p in range(sizes[t])]
    doc = json.loads(kafka_json([BrokerLogDirs(1, [LogDir("/d", 0, reps)])], ["k95", "k20"]))
    (d,) = doc["brokers"][0]["logDirs"]
    assert [p["partition"] for p in d["partitions"]] == ["k95-1", "k95-2", "k20-1", "k95-0", "k20-2", "k20-0"]
