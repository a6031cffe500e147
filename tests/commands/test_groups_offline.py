"""kafkatool groups --log-dir (issue 15): consumer groups read from a log dir alone, as of any
instant, against what a real client committed to a real `kafkatool serve`."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.broker.conftest import BrokerProcess, free_port
from tests.cli_result import json_rows as rows
from tests.cli_result import run

pytest.importorskip("confluent_kafka")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=partition)
    assert p.flush(15) == 0


def _commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        c.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A broker's dir with three groups' history and the instants between their commits."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("groups") / "data"
    port = free_port()
    b = BrokerProcess(
        data,
        port=port,
        # small __consumer_offsets segments: the compaction test below has inactive segments to clean
        extra=[
            "num.partitions=1",
            "offsets.topic.num.partitions=4",
            "offsets.topic.segment.bytes=600",
            "group.initial.rebalance.delay.ms=0",
        ],
    ).start()
    t: dict[str, int] = {}
    live = None
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("orders", 1, 1), NewTopic("pay", 2, 1)]).values():
            f.result(15)
        _produce(b.bootstrap, "orders", 100)
        t["before"] = _now_ms()
        time.sleep(0.05)
        _commit(b.bootstrap, "billing", "orders", 0, 10)
        _commit(b.bootstrap, "audit", "orders", 0, 5)
        time.sleep(0.05)
        t["t1"] = _now_ms()
        time.sleep(0.05)
        _produce(b.bootstrap, "orders", 50)  # log end 150 from here on
        _commit(b.bootstrap, "billing", "orders", 0, 30)
        time.sleep(0.05)
        t["t2"] = _now_ms()
        time.sleep(0.05)
        admin.delete_consumer_groups(["audit"])["audit"].result(15)
        _commit(b.bootstrap, "billing", "orders", 0, 60)
        time.sleep(0.05)
        t["t3"] = _now_ms()
        # a subscribed member: its assignment is in the group's metadata record
        _produce(b.bootstrap, "pay", 7, partition=1)
        live = Consumer(
            {
                "bootstrap.servers": b.bootstrap,
                "group.id": "live",
                "client.id": "live-client",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        live.subscribe(["pay"])
        got = 0
        deadline = time.monotonic() + 30
        while got < 7 and time.monotonic() < deadline:
            m = live.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == 7
        live.commit(asynchronous=False)
        yield data, t, b
    finally:
        if live is not None:
            live.close()
        b.stop()


def test_offsets_as_of_each_instant(history):
    data, t, _ = history
    expected = {"t1": (10, 100), "t2": (30, 150), "t3": (60, 150)}
    for at, (committed, log_end) in expected.items():
        res = run("groups", "describe", "--log-dir", data, "--group", "billing", "--at", t[at], "--json")
        assert res.exit_code == 0, res.output
        (off,) = [r for r in rows(res) if r["type"] == "offset"]
        assert (off["topic"], off["partition"], off["current_offset"]) == ("orders", 0, committed), at
        assert (off["log_end_offset"], off["lag"]) == (log_end, log_end - committed), at
    # before the first commit the group did not exist: exit 1, one line
    res = run("groups", "describe", "--log-dir", data, "--group", "billing", "--at", t["before"])
    assert res.exit_code == 1 and "Consumer group 'billing' does not exist." in res.output


def test_the_human_view_is_kafka_consumer_groups_layout(history):
    data, _, _ = history
    res = run("groups", "describe", "--log-dir", data, "--group", "billing")
    assert res.exit_code == 0, res.output
    # Kafka's note goes to stderr, the table to stdout
    assert "Consumer group 'billing' has no active members." in res.stderr
    lines = [x for x in res.stdout.splitlines() if x.strip()]
    assert lines[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[1].split() == ["billing", "orders", "0", "60", "150", "90", "-", "-", "-"]
    # ConsumerGroupCommand's widths: group and topic 15, partition 10, offsets and lag 15
    assert lines[1].index("orders") == 16 and lines[1].index("60") == 16 + 16 + 11


def test_a_deleted_group_is_gone_now_and_present_before(history):
    data, t, _ = history
    now = run("groups", "list", "--log-dir", data, "--json")
    assert now.exit_code == 0, now.output
    assert {r["group"] for r in rows(now)} == {"billing", "live"}
    before = run("groups", "list", "--log-dir", data, "--at", t["t2"], "--state")
    assert before.exit_code == 0, before.output
    states = dict(line.split() for line in before.stdout.splitlines()[1:])
    assert states == {"audit": "Empty", "billing": "Empty"}


def test_members_and_state_of_a_live_group(history):
    data, _, _ = history
    res = run("groups", "describe", "--log-dir", data, "--group", "live", "--members", "--json")
    assert res.exit_code == 0, res.output
    (m,) = rows(res)
    assert m["state"] == "Stable"
    (member,) = m["members"]
    assert member["client_id"] == "live-client"
    assert member["partitions"] == [{"topic": "pay", "partition": 0}, {"topic": "pay", "partition": 1}]
    off = run("groups", "describe", "--log-dir", data, "--group", "live", "--json")
    by_part = {r["partition"]: r for r in rows(off) if r["type"] == "offset"}
    assert by_part[1]["current_offset"] == 7 and by_part[1]["lag"] == 0
    assert by_part[1]["client_id"] == "live-client"
    st = run("groups", "describe", "--log-dir", data, "--group", "live", "--state")
    assert st.exit_code == 0 and "range" in st.stdout and "Stable" in st.stdout, st.output


def test_export_writes_kafkas_reset_csv(history, tmp_path):
    data, t, _ = history
    res = run("groups", "export", "--log-dir", data, "--group", "billing", "--at", t["t2"])
    assert res.exit_code == 0, res.output
    assert res.stdout == "orders,0,30\n"
    out = tmp_path / "all.csv"
    res = run("groups", "export", "--log-dir", data, "--all-groups", "--output", out)
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert "billing,orders,0,60" in lines and "live,pay,1,7" in lines
    assert all(len(x.split(",")) == 4 for x in lines)


def test_offsets_expire_by_the_coordinators_rule(history):
    data, t, _ = history
    later = t["t3"] + 2 * 60_000
    res = run(
        "groups", "describe", "--log-dir", data, "--group", "billing", "--at", later,
        "--offsets-retention-minutes", "1", "--json",
    )  # fmt: skip
    # an Empty group's offsets go one retention period after the last commit; the group with them
    assert res.exit_code == 1, res.output
    kept = run(
        "groups", "describe", "--log-dir", data, "--group", "billing", "--at", later,
        "--offsets-retention-minutes", "10", "--json",
    )  # fmt: skip
    assert kept.exit_code == 0
    assert [r["current_offset"] for r in rows(kept) if r["type"] == "offset"] == [60]


def test_bad_input_is_one_line(history, tmp_path):
    data, _, _ = history
    res = run("groups", "describe", "--log-dir", data, "--group", "billing", "--at", "yesterday")
    assert res.exit_code == 2 and "--at 'yesterday'" in res.output and "Traceback" not in res.output
    res = run("groups", "list", "--log-dir", tmp_path / "nope")
    assert res.exit_code == 2 and "not a directory" in res.output
    res = run("groups", "describe", "--log-dir", data)
    assert res.exit_code == 2 and "--all-groups" in res.output


def test_a_compacted_offsets_topic_gives_the_same_answers(history, tmp_path):
    """The cleaner keeps the last value per key and the tombstones: what the groups are now
    does not change (the past does: --at before compaction is no longer answerable)."""
    data, _, b = history
    for off in range(1, 21):  # superseded commits: segments of 600 bytes roll, the cleaner has work
        _commit(b.bootstrap, "churn", "orders", 0, off)
    copy = tmp_path / "copy"
    shutil.copytree(data, copy, ignore=shutil.ignore_patterns(".lock"))

    def now(d):
        res = run("groups", "describe", "--log-dir", d, "--all-groups", "--json")
        assert res.exit_code == 0, res.output
        return sorted(
            (r["group"], r["topic"], r["partition"], r["current_offset"])
            for r in rows(res)
            if r["type"] == "offset"
        )

    before = now(copy)
    res = run("compact", "--json", copy)
    assert res.exit_code == 0, res.output
    assert rows(res)[-1]["compacted"] > 0, res.output  # the cleaner had superseded commits to drop
    assert now(copy) == before
    assert ("billing", "orders", 0, 60) in before and ("churn", "orders", 0, 20) in before
    listed = run("groups", "list", "--log-dir", copy, "--json")
    assert {r["group"] for r in rows(listed)} == {"billing", "churn", "live"}  # audit's tombstones kept
