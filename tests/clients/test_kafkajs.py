"""kafkajs 2.2 (a JavaScript implementation of Kafka's protocol, tests/clients/js) against ``kafkatool
serve``: the shared client matrix's scenarios it supports, each by tests/clients/js/scenarios.js in
a node process of its own, checked here byte for byte with the matrix's own data sets and checks.

kafkajs compresses with gzip alone without plugins (snappy, lz4 and zstd are codec packages of
their own), and has no assign(): it reads through a consumer group of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parent / "js"
SCRIPT = JS / "scenarios.js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (JS / "node_modules" / "kafkajs").is_dir(),
    reason="node or kafkajs missing: scripts/setup.sh installs both (tests/clients/js)",
)


def run_js(scenario: str, serve, work: Path, budget: float = 40.0, **args) -> dict:
    """scenarios.js SCENARIO on ``serve`` with ``args`` (args.json in ``work``); its result."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "args.json").write_text(json.dumps({**args, "budget": budget}))
    try:
        proc = subprocess.run(
            [NODE, str(SCRIPT), scenario, serve.bootstrap, str(work)],
            capture_output=True,
            text=True,
            timeout=budget + 15,
            cwd=JS,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(
            f"kafkajs {scenario}: no end within {budget + 15} s: {e.stderr!r:.3000}"
        ) from None
    (work / "kafkajs.log").write_text(proc.stderr)  # KAFKAJS_LOG_LEVEL=debug: the client's log
    lines = proc.stdout.strip().splitlines()
    assert lines, f"kafkajs {scenario}: exit {proc.returncode}, no result: {proc.stderr[-3000:]}"
    out = json.loads(lines[-1])
    assert out["ok"], f"kafkajs {scenario}: {out['error']} ({out['type']}): {proc.stderr[-3000:]}"
    return out["result"]


def name(prefix: str) -> str:
    return f"kjs-{prefix}-{uuid.uuid4().hex[:8]}"


def delivered_of(result: dict, key: str = "delivered") -> dict:
    return {int(i): tuple(po) for i, po in result[key].items()}


def test_metadata(serve, tmp_path):
    r = run_js("metadata", serve, tmp_path)
    [broker] = r["cluster"]["brokers"]
    assert (broker["host"], broker["port"]) == ("127.0.0.1", serve.port)
    assert r["cluster"]["controller"] == broker["nodeId"]
    assert r["cluster"]["clusterId"]


def test_create_and_delete_topic(serve, tmp_path):
    topic = name("admin")
    r = run_js("create_delete_topic", serve, tmp_path, topic=topic, partitions=3)
    node = r["described"][0]["leader"]
    # createTopics says whether it created the topic: the second time TOPIC_ALREADY_EXISTS,
    # which kafkajs takes as "not created" rather than an error
    assert (r["created"], r["again"]) == (True, False)
    assert r["described"] == [
        {"partitionId": p, "leader": node, "replicas": [node], "isr": [node], "partitionErrorCode": 0}
        for p in range(3)
    ]
    assert r["listed"] and r["gone"]
    # DeleteTopics of a topic no longer there: UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers
    # (retriable: kafkajs asks again, then gives up with it as the cause)
    assert r["deleteAgain"] == ["KafkaJSNumberOfRetriesExceeded", "UNKNOWN_TOPIC_OR_PARTITION"]


# gzip is kafkajs' one codec without plugins
@pytest.mark.parametrize("codec", ["gzip", "none"])
def test_produce_consume(serve, tmp_path, compat, codec):
    ds = compat.make_dataset(compat.N_MESSAGES, seed=11)
    compat.dataset_to_jsonl(ds, str(tmp_path / "dataset.jsonl"))
    r = run_js("produce_consume", serve, tmp_path, topic=name(f"pc-{codec}"), partitions=3, codec=codec)
    recs = compat.records_from_jsonl(str(tmp_path / "records.jsonl"))
    compat.verify(ds, recs, delivered=delivered_of(r))


def test_idempotent(serve, tmp_path, compat):
    ds = compat.make_dataset(compat.IDEMPOTENT_N, seed=41, key_prefix="i-")
    compat.dataset_to_jsonl(ds, str(tmp_path / "dataset.jsonl"))
    r = run_js(
        "produce_consume", serve, tmp_path, topic=name("idem"), partitions=3, codec="none", idempotent=True
    )
    recs = compat.records_from_jsonl(str(tmp_path / "records.jsonl"))
    compat.verify(ds, recs, delivered=delivered_of(r))


def test_large_message(serve, tmp_path, compat):
    ds = compat.make_dataset(1, seed=61, key_prefix="big-")
    ds[0].value = os.urandom(compat.LARGE_VALUE)
    compat.dataset_to_jsonl(ds, str(tmp_path / "dataset.jsonl"))
    r = run_js("produce_consume", serve, tmp_path, topic=name("big"), partitions=1, codec="none", chunk=1)
    recs = compat.records_from_jsonl(str(tmp_path / "records.jsonl"))
    compat.verify(ds, recs, delivered=delivered_of(r))


def test_transactions(serve, tmp_path, compat):
    c1, ab, c2 = compat.txn_datasets()
    for ds, file in ((c1, "c1"), (ab, "ab"), (c2, "c2")):
        compat.dataset_to_jsonl(ds, str(tmp_path / f"{file}.jsonl"))
    topic = name("txn")
    r = run_js(
        "transactions",
        serve,
        tmp_path,
        topic=topic,
        partitions=3,
        transactionalId=f"kjs-txn-{topic}",
        group=topic,
    )
    # the group's offset after each transaction: the aborted one's offset never became the group's
    assert (r["c1.jsonl"], r["ab.jsonl"], r["c2.jsonl"]) == (50, 50, 110)
    rc = compat.records_from_jsonl(str(tmp_path / "read_committed.jsonl"))
    ru = compat.records_from_jsonl(str(tmp_path / "read_uncommitted.jsonl"))
    compat.check_transactions(c1, ab, c2, rc, ru, how_abort="transaction.abort()")


def test_offsets_for_times(serve, tmp_path, compat):
    base = (int(time.time()) - 3600) * 1000
    ds = compat.make_dataset(30, seed=31, key_prefix="t-")
    for m in ds:
        m.timestamp = base + m.idx * 1000
    compat.dataset_to_jsonl(ds, str(tmp_path / "dataset.jsonl"))
    times = {"ts10": base + 10_000, "ts10-500ms": base + 9_500, "ts0": base, "after_last": base + 100_000}
    r = run_js("offsets_for_times", serve, tmp_path, topic=name("times"), times=times)
    assert (r["low"], r["high"]) == (0, 30)
    # ListOffsets past the last record answers -1, which kafkajs turns into the high watermark
    assert r["byTime"] == {"ts10": 10, "ts10-500ms": 10, "ts0": 0, "after_last": 30}


def test_group(serve, tmp_path, compat):
    parts = compat.GROUP_PARTITIONS
    first = compat.make_dataset(compat.GROUP_FIRST, seed=21, key_prefix="g1-")
    second = compat.make_dataset(compat.GROUP_SECOND, seed=22, key_prefix="g2-")
    compat.dataset_to_jsonl(first, str(tmp_path / "first.jsonl"))
    compat.dataset_to_jsonl(second, str(tmp_path / "second.jsonl"))
    topic = name("group")
    r = run_js("group", serve, tmp_path, topic=topic, group=f"{topic}-g", partitions=parts)
    a1, a2 = r["assignment"]["1"], r["assignment"]["2"]
    assert sorted(a1 + a2) == list(range(parts)) and a1 and a2
    got = {i: compat.records_from_jsonl(str(tmp_path / f"got{i}.jsonl")) for i in (1, 2, 3)}
    for i, mine in ((1, a1), (2, a2)):
        assert {rec.partition for rec in got[i]} <= set(mine), f"member {i} read outside {mine}"
    compat.verify(first, got[1] + got[2], delivered=delivered_of(r, "delivered1"))
    # the fresh member resumed at the committed offsets: only the new records
    compat.verify(second, got[3], delivered=delivered_of(r, "delivered2"))
    # what the two members committed (the fresh one committed nothing)
    per_partition = {p: 0 for p in range(parts)}
    for m in first:
        per_partition[m.idx % parts] += 1
    [committed] = r["committed"]
    assert {int(p["partition"]): int(p["offset"]) for p in committed["partitions"]} == per_partition


class Member:
    """scenarios.js ``member`` in a node process of its own: what it says, each line with the
    time it came."""

    def __init__(self, serve, work: Path, budget: float, **args):
        work.mkdir(parents=True, exist_ok=True)
        (work / "args.json").write_text(json.dumps({**args, "budget": budget}))
        self.proc = subprocess.Popen(
            [NODE, str(SCRIPT), "member", serve.bootstrap, str(work)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(work / "kafkajs.log", "wb"),
            cwd=JS,
        )
        self.said: list[tuple[float, dict]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.said.append((time.monotonic(), json.loads(line)))

    def assigned(self, since: float = 0.0) -> list | None:
        """Its assignment as of its last join after ``since`` (None while it rebalances)."""
        now = None
        for t, d in list(self.said):
            if t >= since and "assigned" in d:
                now = d["assigned"]
            elif t >= since and "rebalancing" in d:
                now = None
        return now

    def records(self, compat, prefix: bytes = b"") -> list:
        """What it read (and committed), of the keys starting with ``prefix``."""
        out = []
        for _, d in list(self.said):
            if "rec" in d and compat.unb64(d["rec"]["k"]).startswith(prefix):
                r = d["rec"]
                headers = [(k, compat.unb64(v)) for k, v in r["h"]]
                out.append(
                    compat.Rec(r["p"], int(r["o"]), compat.unb64(r["k"]), compat.unb64(r["v"]), headers)
                )
        return out

    def stop(self, timeout: float = 20.0):
        """Stdin closed: it leaves the group (LeaveGroup) and ends."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout)
        self._reader.join(5)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(what: str, cond, timeout: float):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_group_member_failure(serve, tmp_path, compat):
    """A member killed (no LeaveGroup) is expired by the coordinator after its session timeout
    (6 s), not before; the other member then takes its partitions and reads on from the offsets
    the dead one committed: each record once. About 15 s."""
    parts = compat.GROUP_PARTITIONS
    topic = name("failover")
    first = compat.make_dataset(200, seed=23, key_prefix="f1-")
    second = compat.make_dataset(100, seed=24, key_prefix="f2-")
    run_js("produce", serve, tmp_path / "create", topic=topic, partitions=parts)
    args = {"topic": topic, "group": f"{topic}-g"}
    a = Member(serve, tmp_path / "a", 50, **args)
    b = Member(serve, tmp_path / "b", 50, **args)
    try:
        wait_until(
            "both members assigned",
            lambda: (
                a.assigned() and b.assigned() and sorted(a.assigned() + b.assigned()) == list(range(parts))
            ),
            20,
        )
        (tmp_path / "first").mkdir()
        compat.dataset_to_jsonl(first, str(tmp_path / "first" / "dataset.jsonl"))
        first_sent = run_js("produce", serve, tmp_path / "first", topic=topic, partitions=parts)
        wait_until("the first records read", lambda: len(a.records(compat) + b.records(compat)) >= 200, 20)
        a.kill()
        killed = time.monotonic()
        (tmp_path / "second").mkdir()
        compat.dataset_to_jsonl(second, str(tmp_path / "second" / "dataset.jsonl"))
        run_js("produce", serve, tmp_path / "second", topic=topic, partitions=parts)
        wait_until("b holds every partition", lambda: b.assigned(killed) == list(range(parts)), 25)
        took_over = next(t for t, d in b.said if t >= killed and d.get("assigned") == list(range(parts)))
        wait_until("the second records read", lambda: len(b.records(compat, b"f2-")) >= 100, 15)
        time.sleep(1.0)  # a record read twice would show now
    finally:
        a.kill()
        b.stop()
    # the session timeout is 6 s from the last heartbeat (every 300 ms): not expired before
    assert 5.5 <= took_over - killed <= 20, took_over - killed
    # each record once: b read on from the offsets a committed
    compat.verify(first, a.records(compat) + b.records(compat, b"f1-"), delivered=delivered_of(first_sent))
    compat.verify(second, b.records(compat, b"f2-"))
