"""kafkatool consume --group / --include (kafka-console-consumer.sh's consumer group member and
topic pattern) against a real `kafkatool serve`: two kafkatool members split a 6-partition topic
by the range rule and one takes over the other's partitions without re-reading what it
committed; a confluent-kafka (librdkafka) member and a kafkatool member share a group whichever
of them leads; committed offsets as `kafkatool groups` and confluent-kafka see them; a second
run resumes from them (--from-beginning is only the reset policy); --include picks topics by
regex with and without a group; ConsoleConsumer's refusals exit 2 in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkatool.assign.group_consumer import range_assign
from kafkatool.cli import app
from tests.broker.conftest import REPO, BrokerProcess, free_port
from tests.broker.security.test_sasl import command_config, secured  # noqa: F401 (its SASL_SSL broker)
from tests.cli_result import one_line_error

ck = pytest.importorskip("confluent_kafka")

runner = CliRunner()
OVERRIDES = [
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    # a member's session may be shorter than Kafka's 6 s minimum: the expiry test waits 3 s
    "group.min.session.timeout.ms=1000",
]
PER_PARTITION = 10


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("group") / "data", port=free_port(), extra=OVERRIDES).start()
    try:
        yield b
    finally:
        b.stop()


def create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def produce(bootstrap: str, topic: str, partitions: int, tag: str, n: int = PER_PARTITION) -> set[str]:
    """n records per partition, values ``tag-partition-i``; the values."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    values = set()
    for part in range(partitions):
        for i in range(n):
            v = f"{tag}-{part}-{i}"
            p.produce(topic, value=v.encode(), partition=part)
            values.add(v)
    assert p.flush(15) == 0
    return values


#: a member learns of a rebalance from its next Heartbeat's answer: every 500 ms, not Kafka's 3 s
#: (the tests here wait for rebalances, none is about the interval; a test's own value wins)
HEARTBEAT = ("--consumer-property", "heartbeat.interval.ms=500")


class Member:
    """A `kafkatool consume` process; its stdout and stderr in files."""

    def __init__(self, tmp: Path, name: str, *args):
        self.out = tmp / f"{name}.out"
        self.err = tmp / f"{name}.err"
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkatool", "consume", *HEARTBEAT, *map(str, args)],
                stdout=o,
                stderr=e,
                cwd=REPO,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def values(self) -> list[str]:
        return self.out.read_text().split()

    def stop(self, sig=signal.SIGINT, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def members_of(bootstrap: str, group: str) -> tuple[str, dict[str, list]]:
    """(state, {consumer id: sorted partitions}) as `kafkatool groups describe --members` shows."""
    res = run("groups", "describe", "--bootstrap-server", bootstrap, "--group", group, "--members", "--json")
    (row,) = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    if res.exit_code == 1 and row.get("error") == "does not exist":
        return row["state"], {}  # not joined yet
    assert res.exit_code == 0, res.output
    return row["state"], {
        m["consumer_id"]: sorted((p["topic"], p["partition"]) for p in m["partitions"])
        for m in row["members"]
    }


def wait_for(what, check, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last})")


def stable_with(bootstrap: str, group: str, n: int):
    def check():
        state, members = members_of(bootstrap, group)
        if state == "Stable" and len(members) == n and all(members.values()):
            return members
        return None

    return wait_for(f"group {group} Stable with {n} members", check)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka reads them (OffsetFetch of its own)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([ck.TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def boot(broker):
    return ["--bootstrap-server", broker.bootstrap]


# ----------------------------------------------------------------------------- the range rule
def test_range_rule_is_kafkas():
    """RangeAssignor's own examples (its javadoc): t0 and t1 with 3 partitions, C0 and C1:
    C0 [t0p0, t0p1, t1p0, t1p1], C1 [t0p2, t1p2]; static members order by instance id first."""
    got = range_assign({"t0": 3, "t1": 3}, {"C0": (["t0", "t1"], None), "C1": (["t0", "t1"], None)})
    assert got == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}
    got = range_assign({"t": 7}, {"b": (["t"], None), "a": (["t"], None), "z": (["t"], "i0")})
    assert got == {"z": [("t", 0), ("t", 1), ("t", 2)], "a": [("t", 3), ("t", 4)], "b": [("t", 5), ("t", 6)]}
    # a topic without metadata, and one only some members subscribe
    got = range_assign({"x": 2}, {"a": (["x", "gone"], None), "b": (["y"], None)})
    assert got == {"a": [("x", 0), ("x", 1)], "b": []}


def test_consumer_protocol_bytes_are_javas():
    """ConsumerProtocol v3 as Java writes it: int16 version, then the message (a subscription's
    null user data and rack, no owned partitions, the generation; an assignment's null user data);
    read back by the same codec the broker decodes them with."""
    from kafkatool.assign.group_consumer import assignment_bytes, read_subscription, subscription_bytes
    from kafkatool.formats.internal_topics import assigned_partitions

    sub = subscription_bytes(["t"], -1)
    assert (
        sub
        == b"\x00\x03" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff" * 4 + b"\x00" * 4 + b"\xff" * 4 + b"\xff\xff"
    )
    assert read_subscription(sub) == ["t"]
    asg = assignment_bytes([("t", 0), ("t", 1)])
    assert (
        asg
        == b"\x00\x03"
        + b"\x00\x00\x00\x01\x00\x01t"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00\x00\x00\x00\x01"
        + b"\xff" * 4
    )
    assert assigned_partitions(asg) == [("t", 0), ("t", 1)]


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--topic", "t", "--include", "t.*"], "Exactly one of --include/--topic is required."),
        ([], "Exactly one of --include/--topic is required."),
        (["--include", "t.*", "--partition", "0"], "The topic is required when partition is specified."),
        (
            ["--topic", "t", "--group", "g", "--partition", "0"],
            "Options group and partition cannot be specified together.",
        ),
        (
            ["--topic", "t", "--consumer-property", "group.id=g", "--partition", "0"],
            "Options group and partition cannot be specified together.",
        ),
        (
            ["--topic", "t", "--group", "a", "--consumer-property", "group.id=b"],
            "do not match. Detected group ids: 'a', 'b'",
        ),
        (
            ["--topic", "t", "--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
            "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please remove one option",
        ),
        (["--topic", "t", "--consumer-property", "interceptor.classes=a.B"], "has no interceptors"),
        (["--topic", "t", "--consumer-property", "security.protocol=SASL_SSH"], "consumer configs: security"),
        (["--topic", "t", "--consumer-property", "nokey"], "expected KEY=VALUE"),
        (
            ["--topic", "t", "--consumer-property", "session.timeout.ms=soon"],
            "Invalid value soon for configuration session.timeout.ms",
        ),
        (
            ["--topic", "t", "--consumer-property", "auto.offset.reset=oldest"],
            "String must be one of: latest, earliest, none",
        ),
        (
            ["--topic", "t", "--consumer-property", "heartbeat.interval.ms=50000"],
            "Heartbeat must be set lower than the session timeout",
        ),
        (
            ["--topic", "t", "--consumer-property", "partition.assignment.strategy=roundrobin"],
            "range assignor only",
        ),
        (["--include", "(unclosed"], "is an invalid regex"),
        (["--topic", "t", "--whitelist", "t.*"], "--whitelist is DEPRECATED use --include instead"),
    ],
)
def test_bad_combinations_exit_2_in_one_line(args, words):
    # refused before any connection: the bootstrap server is never reached
    line = one_line_error(run("consume", "--bootstrap-server", "127.0.0.1:1", *args))
    assert words in line


def test_unknown_configs_are_warned_about_and_known_ones_taken(broker):
    """Kafka's consumer logs a name it does not know and goes on (AbstractConfig.logUnused), and
    takes its own fetch/socket configs: the same records, one warning line for the unknown one."""
    create(broker.bootstrap, "cfgwarn", 1)
    want = produce(broker.bootstrap, "cfgwarn", 1, "w", 2)
    res = run(
        "consume", *boot(broker), "--topic", "cfgwarn", "--from-beginning", "--exit-at-end",
        "--consumer-property", "fetch.min.bytes=1", "--consumer-property", "max.poll.records=10",
        "--consumer-property", "no.such.config=1",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert sorted(res.stdout.split()) == sorted(want)
    assert res.stderr.splitlines() == [
        "kafkatool: WARNING: The configuration 'no.such.config' was supplied but isn't a known config.",
        "Processed a total of 2 messages",
    ]


def test_group_needs_a_cluster(tmp_path):
    line = one_line_error(run("consume", "--log-dir", tmp_path, "--topic", "t", "--group", "g"))
    assert "need --bootstrap-server" in line


def test_consumer_config_file_and_precedence(broker, tmp_path):
    """--consumer.config's group.id names the group; a --consumer-property of the same key
    wins over the file's other values; a group id in both places must agree."""
    create(broker.bootstrap, "cfg", 1)
    produce(broker.bootstrap, "cfg", 1, "cfg", 4)
    conf = tmp_path / "consumer.properties"
    conf.write_text("group.id=from-file\nauto.offset.reset=latest\n")
    res = run(
        "consume", *boot(broker), "--topic", "cfg", "--consumer.config", conf,
        "--consumer-property", "auto.offset.reset=earliest", "--max-messages", 4, "--timeout-ms", 10000,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == [f"cfg-0-{i}" for i in range(4)]
    assert committed(broker.bootstrap, "from-file", "cfg", 1) == {0: 4}
    line = one_line_error(
        run("consume", *boot(broker), "--topic", "cfg", "--consumer.config", conf, "--group", "other")
    )
    assert "Detected group ids: 'other', 'from-file'" in line
    missing = one_line_error(
        run("consume", *boot(broker), "--topic", "cfg", "--consumer.config", tmp_path / "none")
    )
    assert "--consumer.config" in missing and "No such file" in missing


# ----------------------------------------------------------------------------- a group
def test_commits_visible_and_a_second_run_resumes(broker):
    """25 of 60 records printed: exactly those are committed (the fetched rest given back), as
    `groups describe` and confluent-kafka see it; the next run of the group prints the other 35,
    --from-beginning notwithstanding (a committed offset wins over the reset policy)."""
    create(broker.bootstrap, "resume", 6)
    values = produce(broker.bootstrap, "resume", 6, "r")
    first = run(
        "consume", *boot(broker), "--topic", "resume", "--group", "gr", "--from-beginning",
        "--max-messages", 25, "--timeout-ms", 15000,
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    got1 = first.stdout.split()
    assert len(got1) == 25 and first.stderr.strip().endswith("Processed a total of 25 messages")
    offsets = committed(broker.bootstrap, "gr", "resume", 6)
    printed = {p: sum(1 for v in got1 if v.startswith(f"r-{p}-")) for p in range(6)}
    # a partition never fetched from has its reset position (0: earliest) committed, as Kafka's
    assert offsets == printed, (offsets, printed)
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("gr")])["gr"].result(15)
    assert {tp.partition: tp.offset for tp in listed.topic_partitions if tp.topic == "resume"} == printed
    res = run("groups", "describe", *boot(broker), "--group", "gr", "--json")
    rows = {r["partition"]: r for r in map(json.loads, res.stdout.splitlines()) if r["type"] == "offset"}
    assert {p: r["current_offset"] for p, r in rows.items()} == printed
    assert all(r["lag"] == PER_PARTITION - printed[p] for p, r in rows.items())
    second = run("consume", *boot(broker), "--topic", "resume", "--group", "gr", "--from-beginning",
                 "--timeout-ms", 4000)  # fmt: skip
    assert second.exit_code == 0, second.output
    got2 = second.stdout.split()
    assert sorted(got1 + got2) == sorted(values)
    assert committed(broker.bootstrap, "gr", "resume", 6) == dict.fromkeys(range(6), PER_PARTITION)
    # the group is empty again: both members left (LeaveGroup), nothing waits for a session timeout
    assert members_of(broker.bootstrap, "gr") == ("Empty", {})


def test_auto_commit_while_running_and_off(broker, tmp_path):
    """Auto commit every auto.commit.interval.ms while the member runs (seen before it exits);
    enable.auto.commit=false commits nothing, not even at the end (ConsoleConsumer never commits
    by hand)."""
    bs = broker.bootstrap
    create(bs, "autoc", 2)
    want = produce(bs, "autoc", 2, "ac", 4)
    m = Member(tmp_path, "autoc", "--bootstrap-server", bs, "--topic", "autoc", "--group", "gauto",
               "--from-beginning", "--consumer-property", "auto.commit.interval.ms=300")  # fmt: skip
    try:
        wait_for("read", lambda: sorted(m.values()) == sorted(want))
        wait_for("committed while running", lambda: committed(bs, "gauto", "autoc", 2) == {0: 4, 1: 4})
        assert m.proc.poll() is None
    finally:
        m.stop()
        m.kill()
    res = run("consume", *boot(broker), "--topic", "autoc", "--group", "goff", "--from-beginning",
              "--consumer-property", "enable.auto.commit=false", "--max-messages", 8, "--timeout-ms", 10000)  # fmt: skip
    assert res.exit_code == 0 and sorted(res.stdout.split()) == sorted(want)
    assert committed(bs, "goff", "autoc", 2) == {0: -1001, 1: -1001}  # OFFSET_INVALID: none


def test_reset_none_without_committed_offsets(broker):
    create(broker.bootstrap, "nonetopic", 1)
    res = run(
        "consume", *boot(broker), "--topic", "nonetopic", "--group", "gnone",
        "--consumer-property", "auto.offset.reset=none", "--timeout-ms", 5000,
    )  # fmt: skip
    # NoOffsetForPartitionException's words, then ConsoleConsumer's count as it ends
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines() == [
        "kafkatool: error: Undefined offset with no reset policy for partitions: [nonetopic-0]",
        "Processed a total of 0 messages",
    ]


def test_two_members_split_then_one_takes_over(broker, tmp_path):
    """Two kafkatool members split 6 partitions 3/3 (range, by member id); records produced then
    are read once, each by the member owning its partition; member A stops (Ctrl-C: commit,
    LeaveGroup), B takes all 6 and reads only what A had not: every record exactly once."""
    bs = broker.bootstrap
    create(bs, "split", 6)
    common = ["--bootstrap-server", bs, "--topic", "split", "--group", "gsplit", "--from-beginning"]
    a = Member(tmp_path, "a", *common)
    b = Member(tmp_path, "b", *common)
    try:
        members = stable_with(bs, "gsplit", 2)
        first, second = sorted(members)  # range: the lower member id takes partitions 0-2
        assert members[first] == [("split", p) for p in range(3)]
        assert members[second] == [("split", p) for p in range(3, 6)]
        wave1 = produce(bs, "split", 6, "w1")
        wait_for("wave 1 read", lambda: len(a.values()) + len(b.values()) == len(wave1))
        by_partition = {m: {int(v.split("-")[1]) for v in x.values()} for m, x in (("a", a), ("b", b))}
        assert sorted(by_partition["a"] | by_partition["b"]) == list(range(6))
        assert not by_partition["a"] & by_partition["b"]
        assert a.stop() == 130
        assert "Processed a total of" in a.err.read_text().splitlines()[-1]
        # A committed what it printed and left: B is alone at once (no session timeout)
        taken = stable_with(bs, "gsplit", 1)
        assert list(taken.values()) == [[("split", p) for p in range(6)]]
        wave2 = produce(bs, "split", 6, "w2")
        wait_for("wave 2 read by B", lambda: len(b.values()) == len(wave1) - len(a.values()) + len(wave2))
        assert b.stop(signal.SIGTERM) == 130  # kill ends a member as Ctrl-C does: commit, LeaveGroup
        assert members_of(bs, "gsplit") == ("Empty", {})
        everything = a.values() + b.values()
        assert sorted(everything) == sorted(wave1 | wave2)  # each once: nothing re-read
        assert committed(bs, "gsplit", "split", 6) == dict.fromkeys(range(6), 2 * PER_PARTITION)
    finally:
        a.kill()
        b.kill()


def test_commits_before_a_rebalance_takes_partitions_away(broker, tmp_path):
    """A reads all 6 partitions alone; B joins: A commits what it printed before it gives up
    partitions 3-5 (ConsumerCoordinator.onJoinPrepare; the periodic commit is a minute away), so
    B, --from-beginning, starts them at A's progress: nothing is read twice."""
    bs = broker.bootstrap
    create(bs, "handover", 6)
    common = ["--bootstrap-server", bs, "--topic", "handover", "--group", "ghand", "--from-beginning",
              "--consumer-property", "auto.commit.interval.ms=60000"]  # fmt: skip
    a = Member(tmp_path, "ha", *common)
    b = None
    try:
        stable_with(bs, "ghand", 1)
        wave0 = produce(bs, "handover", 6, "h0")
        wait_for("A read wave 0", lambda: len(a.values()) == len(wave0))
        b = Member(tmp_path, "hb", *common)
        stable_with(bs, "ghand", 2)
        wave1 = produce(bs, "handover", 6, "h1")
        wait_for("wave 1 read", lambda: len(a.values()) + len(b.values()) == len(wave0) + len(wave1))
        time.sleep(1)  # anything read twice would show by now
        assert sorted(a.values() + b.values()) == sorted(wave0 | wave1)
        assert all(v.startswith("h1-") for v in b.values())
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_a_member_whose_session_expired_joins_again(broker, tmp_path):
    """A member stopped (SIGSTOP) past its session timeout is removed by the coordinator; once
    it runs again its Heartbeat gets UNKNOWN_MEMBER_ID, it joins anew with a new member id (as
    AbstractCoordinator's resetGenerationAndRejoin) and reads on from the committed offsets."""
    bs = broker.bootstrap
    create(bs, "expire", 2)
    m = Member(tmp_path, "exp", "--bootstrap-server", bs, "--topic", "expire", "--group", "gexp",
               "--from-beginning", "--consumer-property", "session.timeout.ms=3000",
               "--consumer-property", "heartbeat.interval.ms=500",
               "--consumer-property", "auto.commit.interval.ms=200")  # fmt: skip
    try:
        (before,) = stable_with(bs, "gexp", 1)
        wave0 = produce(bs, "expire", 2, "e0", 2)
        wait_for("wave 0 read", lambda: sorted(m.values()) == sorted(wave0))
        wait_for("wave 0 committed", lambda: committed(bs, "gexp", "expire", 2) == {0: 2, 1: 2})
        m.proc.send_signal(signal.SIGSTOP)
        wait_for("the member expired", lambda: members_of(bs, "gexp") == ("Empty", {}), timeout=20)
        m.proc.send_signal(signal.SIGCONT)
        (after,) = stable_with(bs, "gexp", 1)
        assert after != before
        wave1 = produce(bs, "expire", 2, "e1", 2)
        wait_for("wave 1 read", lambda: sorted(m.values()) == sorted(wave0 | wave1))
    finally:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGCONT)
        m.kill()


@pytest.mark.parametrize("first", ["kafkatool", "confluent"])
def test_shares_a_group_with_confluent_kafka(broker, tmp_path, first):
    """A librdkafka member (range) and a kafkatool member in one group, either of them the
    leader that assigns: 3 partitions each, consecutive ranges, every record read once."""
    bs = broker.bootstrap
    topic, group = f"mixed-{first}", f"gmixed-{first}"
    create(bs, topic, 6)
    c = ck.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "partition.assignment.strategy": "range",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
        }
    )
    k = None
    ours = ["--bootstrap-server", bs, "--topic", topic, "--group", group, "--from-beginning"]
    try:
        if first == "kafkatool":
            k = Member(tmp_path, "k", *ours)
            stable_with(bs, group, 1)
            c.subscribe([topic])
        else:
            c.subscribe([topic])
            wait_for("confluent member assigned", lambda: c.poll(0.2) is None and c.assignment())
            k = Member(tmp_path, "k", *ours)
        deadline = time.monotonic() + 40
        members = {}
        while time.monotonic() < deadline:
            c.poll(0.2)  # librdkafka rejoins inside poll
            state, members = members_of(bs, group)
            if state == "Stable" and len(members) == 2 and all(members.values()) and len(c.assignment()) == 3:
                break
        assert len(members) == 2, members
        ours = sorted(p.partition for p in c.assignment())
        assert ours in ([0, 1, 2], [3, 4, 5])
        values = produce(bs, topic, 6, "m")
        got_c: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got_c) + len(k.values()) < len(values):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got_c.append(m.value().decode())
        assert {int(v.split("-")[1]) for v in got_c} == set(ours)
        assert sorted(got_c + k.values()) == sorted(values)
        _, desc = members_of(bs, group)
        assert sorted(p for ps in desc.values() for _, p in ps) == list(range(6))
    finally:
        c.close()
        if k is not None:
            k.kill()


# ----------------------------------------------------------------------------- --include
def test_include_picks_topics_by_regex(broker):
    bs = broker.bootstrap
    for t in ("inc-a", "inc-b", "incx", "other-inc-a"):
        create(bs, t, 2)
    want = produce(bs, "inc-a", 2, "a", 3) | produce(bs, "inc-b", 2, "b", 3)
    produce(bs, "incx", 2, "x", 3)
    produce(bs, "other-inc-a", 2, "o", 3)
    # without a group: every partition of the matching topics (the whole name must match)
    res = run("consume", *boot(broker), "--include", "inc-.*", "--from-beginning", "--exit-at-end",
              "--property", "print.key=false")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert sorted(res.stdout.split()) == sorted(want)
    # a Java regex as Pattern.compile takes it: no TopicFilter comma rewrite
    res = run("consume", *boot(broker), "--include", "inc-a|inc-b", "--from-beginning", "--exit-at-end")
    assert sorted(res.stdout.split()) == sorted(want)
    # the deprecated --whitelist is the same option where --include is not given
    res = run("consume", *boot(broker), "--whitelist", "inc-a|inc-b", "--from-beginning", "--exit-at-end")
    assert sorted(res.stdout.split()) == sorted(want)
    res = run("consume", *boot(broker), "--include", "inc-a", "--whitelist", "inc-b", "--from-beginning",
              "--exit-at-end")  # fmt: skip
    assert sorted(res.stdout.split()) == sorted(v for v in want if v.startswith("a-"))
    # in a group: subscribed by pattern, the committed offsets per topic
    res = run("consume", *boot(broker), "--include", "inc-[ab]", "--group", "ginc", "--from-beginning",
              "--timeout-ms", 4000)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert sorted(res.stdout.split()) == sorted(want)
    assert committed(bs, "ginc", "inc-a", 2) == {0: 3, 1: 3}
    assert committed(bs, "ginc", "inc-b", 2) == {0: 3, 1: 3}
    # an internal topic never matches (exclude.internal.topics): nothing assigned, so
    # --exit-at-end waits (kcat -e) until --timeout-ms
    res = run("consume", *boot(broker), "--include", "__.*", "--from-beginning", "--exit-at-end",
              "--timeout-ms", 300)  # fmt: skip
    assert res.exit_code == 0 and res.stdout == ""
    # the same pattern read-only from the broker's log dir: the same records
    res = run("consume", "--log-dir", broker.data_dir, "--include", "inc-.*")
    assert res.exit_code == 0, res.output
    assert sorted(res.stdout.split()) == sorted(want)
    res = run("consume", "--log-dir", broker.data_dir, "--include", "__consumer_offsets|inc-a")
    assert sorted(res.stdout.split()) == sorted(v for v in want if v.startswith("a-"))


def test_include_group_picks_up_a_new_topic(broker, tmp_path):
    """A pattern member sees a topic created after it joined at the next metadata refresh and
    rejoins for it (metadata.max.age.ms)."""
    bs = broker.bootstrap
    create(bs, "late-1", 1)
    m = Member(tmp_path, "late", "--bootstrap-server", bs, "--include", "late-.*", "--group", "glate",
               "--from-beginning", "--consumer-property", "metadata.max.age.ms=500")  # fmt: skip
    try:
        stable_with(bs, "glate", 1)
        create(bs, "late-2", 1)
        want = produce(bs, "late-1", 1, "l1", 2) | produce(bs, "late-2", 1, "l2", 2)
        wait_for("both topics read", lambda: sorted(m.values()) == sorted(want))
        _, members = members_of(bs, "glate")
        assert list(members.values()) == [[("late-1", 0), ("late-2", 0)]]
    finally:
        m.stop()
        m.kill()


def test_exit_at_end_waits_while_nothing_is_assigned(broker, tmp_path):
    """kcat -e in a group exits once every *assigned* partition reached its end: a member given no
    partition (two members, one partition) waits, and once the other leaves it takes the
    partition, reads it to its end and exits."""
    bs = broker.bootstrap
    create(bs, "lone", 1)
    want = produce(bs, "lone", 1, "lone", 3)
    # client ids order the member ids, so the range rule gives the partition to "a"
    a = Member(tmp_path, "a", "--bootstrap-server", bs, "--topic", "lone", "--group", "glone",
               "--from-beginning", "--consumer-property", "client.id=a",
               "--consumer-property", "enable.auto.commit=false")  # fmt: skip
    b = None
    try:
        stable_with(bs, "glone", 1)
        b = Member(tmp_path, "b", "--bootstrap-server", bs, "--topic", "lone", "--group", "glone",
                   "--from-beginning", "--exit-at-end", "--consumer-property", "client.id=b")  # fmt: skip

        def both_in():
            state, members = members_of(bs, "glone")
            return state == "Stable" and len(members) == 2 and members

        members = wait_for("b joined", both_in)
        assert sorted(members.values()) == [[], [("lone", 0)]]
        time.sleep(1)  # several fetch rounds of b with nothing assigned
        assert b.proc.poll() is None, b.err.read_text()
        # Ctrl-C; a read the partition again from the start after the rebalance: it commits nothing
        assert a.stop() == 130 and set(a.values()) == want
        assert b.proc.wait(30) == 0, b.err.read_text()
        assert sorted(b.values()) == sorted(want)  # a committed nothing: from the beginning
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_a_member_waits_for_its_topic(broker, tmp_path):
    """A group member's Metadata asks the broker to create its topic (allow.auto.create.topics);
    with it false the member joins, is given nothing, says once that it waits, and once the topic
    is made the leader's metadata changed: it joins again and reads it."""
    from confluent_kafka.admin import AdminClient

    bs = broker.bootstrap
    res = run("consume", *boot(broker), "--topic", "g-auto", "--group", "gauto", "--timeout-ms", 500)
    assert res.exit_code == 0, res.output
    assert "g-auto" in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics
    m = Member(tmp_path, "gwait", "--bootstrap-server", bs, "--topic", "g-later", "--group", "gwait",
               "--from-beginning", "--consumer-property", "allow.auto.create.topics=false")  # fmt: skip
    try:
        wait_for("the waiting line", lambda: "waiting for it" in m.err.read_text())
        assert m.proc.poll() is None
        create(bs, "g-later", 2)
        want = produce(bs, "g-later", 2, "gl", 2)
        wait_for("the new topic read", lambda: sorted(m.values()) == sorted(want))
        assert m.stop() == 130
        err = m.err.read_text().splitlines()
        assert err == [
            "kafkatool: WARNING: Topic 'g-later' does not exist (UNKNOWN_TOPIC_OR_PARTITION): waiting for it, "
            "as Kafka's consumer does (until --timeout-ms or Ctrl-C)",
            "Processed a total of 4 messages",
        ]
    finally:
        m.kill()


def test_a_static_member_does_not_leave(broker):
    """group.instance.id: a static member (JoinGroup v5+ with the instance id); it sends no
    LeaveGroup at the end, so the group keeps it until its session times out (Kafka's rule), and
    the same instance id joining again takes its place and its partitions back."""
    bs = broker.bootstrap
    create(bs, "static", 2)
    want = produce(bs, "static", 2, "s", 3)
    args = ["consume", *boot(broker), "--topic", "static", "--group", "gstatic", "--from-beginning",
            "--consumer-property", "group.instance.id=inst-1", "--consumer-property", "session.timeout.ms=30000"]  # fmt: skip
    res = run(*args, "--max-messages", 6, "--timeout-ms", 10000)
    assert res.exit_code == 0, res.output
    assert sorted(res.stdout.split()) == sorted(want)
    state, members = members_of(bs, "gstatic")
    assert state == "Stable" and list(members.values()) == [[("static", 0), ("static", 1)]]
    res = run("groups", "describe", *boot(broker), "--group", "gstatic", "--members", "--json")
    (row,) = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert [m["group_instance_id"] for m in row["members"]] == ["inst-1"]
    # the same instance again: it replaces the member and resumes from the committed offsets
    more = produce(bs, "static", 2, "t", 1)
    again = run(*args, "--max-messages", 2, "--timeout-ms", 10000)
    assert again.exit_code == 0, again.output
    assert sorted(again.stdout.split()) == sorted(more)


def test_shares_a_group_with_kafka_python(broker, tmp_path):
    """kafka-python's range assignor leads (it joined first) and assigns the kafkatool member
    its range; every record read once between them."""
    kafka = pytest.importorskip("kafka")
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    bs = broker.bootstrap
    create(bs, "kp", 6)
    kp = kafka.KafkaConsumer(
        bootstrap_servers=bs,
        group_id="gkp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        partition_assignment_strategy=[RangePartitionAssignor],
    )
    k = None
    try:
        # subscribed once its metadata has the topic's 6 partitions; polls of a second and
        # heartbeats every 200 ms: kafka-python 3.0.12 can lose a leader's SyncGroup completion
        # when poll() returns early mid-join (tests/broker/test_group_clients.py saw it too) and
        # then sends neither Heartbeat nor JoinGroup until its session expires (the broker's log;
        # 1 in 6 runs with polls of 200 ms, 0 in 10 with 1 s)
        wait_for("kafka-python sees the topic", lambda: len(kp.partitions_for_topic("kp") or ()) == 6)
        kp.subscribe(["kp"])
        wait_for("kafka-python member assigned", lambda: kp.poll(1000) == {} and kp.assignment())
        k = Member(
            tmp_path, "k", "--bootstrap-server", bs, "--topic", "kp", "--group", "gkp", "--from-beginning"
        )
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            kp.poll(1000)
            state, members = members_of(bs, "gkp")
            if (
                state == "Stable"
                and len(members) == 2
                and all(members.values())
                and len(kp.assignment()) == 3
            ):
                break
        theirs = sorted(tp.partition for tp in kp.assignment())
        assert theirs in ([0, 1, 2], [3, 4, 5])
        values = produce(bs, "kp", 6, "kp")
        got: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) + len(k.values()) < len(values):
            for records in kp.poll(1000).values():
                got.extend(r.value.decode() for r in records)
        assert {int(v.split("-")[1]) for v in got} == set(theirs)
        assert sorted(got + k.values()) == sorted(values)
    finally:
        kp.close()
        if k is not None:
            k.kill()


def test_the_leader_rejoins_when_a_topic_grows(broker, tmp_path):
    """Partitions added to a subscribed topic: the leader sees the count change at a metadata
    refresh and rejoins, so the new partition is assigned and read (ConsumerCoordinator's
    assignment snapshot rule)."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    bs = broker.bootstrap
    create(bs, "grow", 1)
    m = Member(tmp_path, "grow", "--bootstrap-server", bs, "--topic", "grow", "--group", "ggrow",
               "--from-beginning", "--consumer-property", "metadata.max.age.ms=500")  # fmt: skip
    try:
        stable_with(bs, "ggrow", 1)
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_partitions([NewPartitions("grow", 2)])["grow"].result(15)
        want = produce(bs, "grow", 2, "g", 2)
        wait_for("the new partition read", lambda: sorted(m.values()) == sorted(want))
        _, members = members_of(bs, "ggrow")
        assert list(members.values()) == [[("grow", 0), ("grow", 1)]]
    finally:
        m.stop()
        m.kill()


def test_a_group_over_sasl_ssl_with_the_consumer_config(secured, tmp_path):  # noqa: F811
    """The security configs of --consumer.config (kafka-console-consumer.sh's usual place for
    them) reach every connection: a group member over SASL_SSL with SCRAM, no --command-config."""
    p = ck.Producer({"bootstrap.servers": secured.bootstrap, "linger.ms": 0})
    for i in range(3):
        p.produce("secured-group", value=b"s%d" % i, partition=0)
    assert p.flush(15) == 0
    cfg = command_config(secured, tmp_path / "consumer.properties")
    with open(cfg, "a") as f:
        f.write("group.id=gsecure\n")
    res = run("consume", "--bootstrap-server", secured.sasl_ssl, "--consumer.config", cfg,
              "--topic", "secured-group", "--from-beginning", "--max-messages", 3, "--timeout-ms", 15000)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["s0", "s1", "s2"]
    assert committed(secured.bootstrap, "gsecure", "secured-group", 1) == {0: 3}
