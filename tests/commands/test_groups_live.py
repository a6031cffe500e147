"""kafkatool groups --bootstrap-server (issue 15): kafka-consumer-groups.sh's list, describe,
reset-offsets, delete-offsets and delete against a real `kafkatool serve`, with real
confluent-kafka consumers as the group's members and as the judge of what was committed."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from tests.broker.conftest import BrokerProcess, free_port
from tests.cli_result import json_rows as rows
from tests.cli_result import run

ck = pytest.importorskip("confluent_kafka")

N = 30  # records per partition
DAY = 86_400_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One broker; topic t (3 partitions) with N records each, timestamps one second apart
    starting two days ago."""
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("live") / "data"
    port = free_port()
    b = BrokerProcess(
        data,
        port=port,
        extra=["num.partitions=1", "offsets.topic.num.partitions=3", "group.initial.rebalance.delay.ms=0"],
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("t", 3, 1)]).values():
            f.result(15)
        base = int(time.time() * 1000) - 2 * DAY
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for part in range(3):
            for i in range(N):
                p.produce("t", value=b"x", partition=part, timestamp=base + i * 1000)
        assert p.flush(15) == 0
        yield b, base
    finally:
        b.stop()


def _consumer(bootstrap: str, group: str, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{group}-client",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
    }
    conf.update(extra)
    return ck.Consumer(conf)


def _consume_all(c, want: int) -> None:
    got, deadline = 0, time.monotonic() + 30
    while got < want and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == want


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    c = _consumer(bootstrap, group)
    try:
        tps = c.committed([ck.TopicPartition("t", p) for p in range(3)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def _describe(bootstrap: str, group: str) -> dict[int, dict]:
    res = run("groups", "describe", "--bootstrap-server", bootstrap, "--group", group, "--json")
    assert res.exit_code == 0, res.output
    return {r["partition"]: r for r in rows(res) if r["type"] == "offset"}


def test_an_active_group_is_described_and_not_reset(cluster):
    b, _ = cluster
    c = _consumer(b.bootstrap, "active")
    c.subscribe(["t"])
    try:
        _consume_all(c, 3 * N)
        c.commit(asynchronous=False)
        d = _describe(b.bootstrap, "active")
        assert sorted(d) == [0, 1, 2]
        assert all(
            r["current_offset"] == N and r["log_end_offset"] == N and r["lag"] == 0 for r in d.values()
        )
        assert {r["client_id"] for r in d.values()} == {"active-client"}
        st = run(
            "groups", "describe", "--bootstrap-server", b.bootstrap, "--group", "active", "--state", "--json"
        )
        (s,) = rows(st)
        assert (s["state"], s["members"], s["assignment_strategy"]) == ("Stable", 1, "range")
        listed = run("groups", "list", "--bootstrap-server", b.bootstrap, "--state")
        assert listed.exit_code == 0
        assert ["active", "Stable"] in [line.split() for line in listed.stdout.splitlines()]
        res = run(
            "groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "active",
            "--all-topics", "--to-earliest", "--execute",
        )  # fmt: skip
        assert res.exit_code == 1
        assert (
            "Assignments can only be reset if the group 'active' is inactive, but the current state is Stable."
            in res.output
        )
        assert _committed(b.bootstrap, "active") == {0: N, 1: N, 2: N}  # nothing moved
    finally:
        c.close()


def test_reset_offsets_scenarios(cluster):
    b, base = cluster
    c = _consumer(b.bootstrap, "resets")
    c.subscribe(["t"])
    _consume_all(c, 3 * N)
    c.commit(asynchronous=False)
    c.close()
    boot = ["--bootstrap-server", b.bootstrap, "--group", "resets"]

    # dry run (the default): shows, changes nothing, exit 1 (it would change something)
    dry = run("groups", "reset-offsets", *boot, "--topic", "t", "--to-earliest")
    assert dry.exit_code == 1, dry.output
    lines = [x.split() for x in dry.stdout.splitlines() if x.strip()]
    assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert lines[1:] == [["resets", "t", str(p), "0"] for p in range(3)]
    assert _committed(b.bootstrap, "resets") == {0: N, 1: N, 2: N}

    def reset(*how) -> dict[int, int]:
        res = run("groups", "reset-offsets", *boot, *how, "--execute")
        assert res.exit_code == 0, res.output
        return _committed(b.bootstrap, "resets")

    assert reset("--topic", "t", "--to-earliest") == {0: 0, 1: 0, 2: 0}
    assert reset("--topic", "t:1", "--to-offset", "7") == {0: 0, 1: 7, 2: 0}
    # beyond the log end: clamped, with Kafka's warning
    res = run("groups", "reset-offsets", *boot, "--topic", "t:2", "--to-offset", "1000", "--execute")
    assert res.exit_code == 0 and "Value will be set to 30" in res.output
    assert reset("--all-topics", "--shift-by", "-5") == {0: 0, 1: 2, 2: 25}
    assert reset("--topic", "t:0,1", "--to-latest") == {0: N, 1: N, 2: 25}
    at = datetime.fromtimestamp((base + 10_500) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    assert reset("--topic", "t", "--to-datetime", at) == {0: 11, 1: 11, 2: 11}
    assert reset("--topic", "t", "--by-duration", "P3D") == {0: 0, 1: 0, 2: 0}
    # nothing at or after one day ago: every partition falls back to its log end
    assert reset("--topic", "t", "--by-duration", "P1D") == {0: N, 1: N, 2: N}
    assert reset("--topic", "t:2", "--shift-by", "-3") == {0: N, 1: N, 2: N - 3}
    # to-current keeps what is committed
    assert reset("--all-topics", "--to-current") == {0: N, 1: N, 2: N - 3}

    # export, edit, restore with --from-file
    exp = run("groups", "reset-offsets", *boot, "--all-topics", "--to-current", "--export")
    assert exp.stdout == f"t,0,{N}\nt,1,{N}\nt,2,{N - 3}\n"


def test_a_backups_offsets_restored_into_the_cluster(cluster, tmp_path):
    """groups export --log-dir (offline, from the broker's own dir) -> reset-offsets --from-file."""
    b, _ = cluster
    for p, off in ((0, 4), (1, 5), (2, 6)):
        c = _consumer(b.bootstrap, "restored")
        c.commit(offsets=[ck.TopicPartition("t", p, off)], asynchronous=False)
        c.close()
    csv = tmp_path / "backup.csv"
    exp = run("groups", "export", "--log-dir", b.data_dir, "--group", "restored", "--output", csv)
    assert exp.exit_code == 0, exp.output
    assert csv.read_text() == "t,0,4\nt,1,5\nt,2,6\n"
    # the live group moves on, then is put back where the backup had it
    run("groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "restored",
        "--all-topics", "--to-latest", "--execute")  # fmt: skip
    assert _committed(b.bootstrap, "restored") == {0: N, 1: N, 2: N}
    res = run(
        "groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "restored",
        "--from-file", csv, "--execute",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert _committed(b.bootstrap, "restored") == {0: 4, 1: 5, 2: 6}
    bad = tmp_path / "bad.csv"
    bad.write_text("t,0,4\nt,one,5\n")
    res = run("groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "restored",
              "--from-file", bad, "--execute")  # fmt: skip
    assert res.exit_code == 2 and "bad.csv: line 2" in res.output and "Traceback" not in res.output


def test_delete_offsets_and_delete(cluster):
    b, _ = cluster
    for p in range(3):
        c = _consumer(b.bootstrap, "doomed")
        c.commit(offsets=[ck.TopicPartition("t", p, 9)], asynchronous=False)
        c.close()
    res = run(
        "groups", "delete-offsets", "--bootstrap-server", b.bootstrap, "--group", "doomed", "--topic", "t:2"
    )
    assert res.exit_code == 0, res.output
    assert "Request succeed for deleting offsets with topic t:2 group doomed" in res.stdout
    assert ["t", "2", "Successful"] in [x.split() for x in res.stdout.splitlines()]
    assert sorted(_describe(b.bootstrap, "doomed")) == [0, 1]
    res = run("groups", "delete", "--bootstrap-server", b.bootstrap, "--group", "doomed")
    assert (
        res.exit_code == 0
        and "Deletion of requested consumer groups ('doomed') was successful." in res.stdout
    )
    listed = run("groups", "list", "--bootstrap-server", b.bootstrap, "--json")
    assert "doomed" not in {r["group"] for r in rows(listed)}
    gone = run("groups", "describe", "--bootstrap-server", b.bootstrap, "--group", "doomed")
    assert gone.exit_code == 1 and "Consumer group 'doomed' does not exist." in gone.output


def test_a_group_with_members_is_not_deleted(cluster):
    b, _ = cluster
    c = _consumer(b.bootstrap, "busy")
    c.subscribe(["t"])
    try:
        _consume_all(c, 1)
        res = run("groups", "delete", "--bootstrap-server", b.bootstrap, "--group", "busy")
        assert res.exit_code == 1
        assert "* Group 'busy' could not be deleted due to: NON_EMPTY_GROUP" in res.output
    finally:
        c.close()


def test_a_consumer_protocol_group_is_described(cluster):
    if ck.libversion()[1] < 0x020A0000:
        pytest.skip("librdkafka < 2.10 has no group.protocol=consumer")
    b, _ = cluster
    c = ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "next-gen",
            "group.protocol": "consumer",
            "client.id": "ng",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["t"])
    try:
        _consume_all(c, 3 * N)
        c.commit(asynchronous=False)
        res = run(
            "groups",
            "describe",
            "--bootstrap-server",
            b.bootstrap,
            "--group",
            "next-gen",
            "--members",
            "--json",
        )
        assert res.exit_code == 0, res.output
        (m,) = rows(res)
        assert m["state"] == "Stable"
        (member,) = m["members"]
        assert member["client_id"] == "ng" and len(member["partitions"]) == 3
        listed = run("groups", "list", "--bootstrap-server", b.bootstrap, "--type", "--json")
        assert {"group": "next-gen", "group_type": "consumer"}.items() <= next(
            r for r in rows(listed) if r["group"] == "next-gen"
        ).items()
    finally:
        c.close()
    # offline, the same group from the broker's dir
    off = run("groups", "describe", "--log-dir", b.data_dir, "--group", "next-gen", "--json")
    assert off.exit_code == 0, off.output
    assert {r["partition"]: r["current_offset"] for r in rows(off) if r["type"] == "offset"} == {
        0: N,
        1: N,
        2: N,
    }


def test_unreachable_and_bad_arguments(cluster):
    b, _ = cluster
    res = run("groups", "list", "--bootstrap-server", "127.0.0.1:1")
    assert res.exit_code == 2 and "Traceback" not in res.output
    res = run("groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "x", "--to-earliest")
    assert res.exit_code == 2 and "One of the reset scopes should be defined" in res.output
    res = run("groups", "reset-offsets", "--bootstrap-server", b.bootstrap, "--group", "x", "--topic", "t",
              "--by-duration", "yesterday")  # fmt: skip
    assert res.exit_code == 2 and "--by-duration" in res.output
    res = run("groups", "list", "--bootstrap-server", b.bootstrap, "--at", "0")
    assert res.exit_code == 2 and "--at needs --log-dir" in res.output
