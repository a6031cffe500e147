"""kafkatool streams-reset (Kafka 3.7's kafka-streams-application-reset.sh) against a real
`kafkatool serve`: a Streams application's footprint made by real clients (a confluent-kafka
consumer group named by the application id with offsets committed on the input topics, the
application's changelog and repartition topics beside unrelated ones), reset per specifier,
judged by a real consumer of the group and by the cluster's topic list."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from kafkatool.assign import streams_reset as S
from kafkatool.cli import app
from tests.broker.conftest import BrokerProcess, free_port

ck = pytest.importorskip("confluent_kafka")
runner = CliRunner()

N = 10  # records per partition of the input topic
DAY = 86_400_000
DRY_HEADER = "----Dry run displays the actions which will be performed when running Streams Reset Tool----"


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One broker; input topic `in` (2 partitions, N records each, one second apart from two
    days ago), intermediate topic `mid` (1 partition, 4 records) and unrelated topics."""
    from confluent_kafka.admin import AdminClient, NewTopic

    data = tmp_path_factory.mktemp("streams") / "data"
    b = BrokerProcess(
        data,
        port=free_port(),
        extra=["num.partitions=1", "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0"],
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics(
            [NewTopic("in", 2, 1), NewTopic("mid", 1, 1), NewTopic("other", 1, 1)]
        ).values():
            f.result(15)
        base = int(time.time() * 1000) - 2 * DAY
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for part in range(2):
            for i in range(N):
                p.produce("in", value=b"x", partition=part, timestamp=base + i * 1000)
        for i in range(4):
            p.produce("mid", value=b"y", partition=0, timestamp=base + i * 1000)
        assert p.flush(15) == 0
        yield b, base, admin
    finally:
        b.stop()


def _consumer(bootstrap: str, group: str, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{group}-client",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    conf.update(extra)
    return ck.Consumer(conf)


def _footprint(cluster, appid: str, offsets: dict[tuple[str, int], int]) -> list[str]:
    """The application's group with ``offsets`` committed (a real consumer's commit), and its
    internal topics: a store's changelog, a repartition topic, a foreign-key join's
    subscription topic; plus topics that only look related."""
    b, _, admin = cluster
    internal = [
        f"{appid}-store-changelog",
        f"{appid}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",
        f"{appid}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007-topic",
    ]
    from confluent_kafka.admin import NewTopic

    lookalikes = [f"{appid}-output", f"x{appid}-store-changelog"]
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in internal + lookalikes]).values():
        f.result(15)
    c = _consumer(b.bootstrap, appid)
    try:
        c.commit(offsets=[ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()
    return internal


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    c = _consumer(bootstrap, group)
    try:
        tps = c.committed(
            [ck.TopicPartition("in", 0), ck.TopicPartition("in", 1), ck.TopicPartition("mid", 0)], timeout=10
        )
        return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def _first_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """Where a real consumer of the group starts on `in` (its committed offsets)."""
    c = _consumer(bootstrap, group)
    try:
        c.assign([ck.TopicPartition("in", 0), ck.TopicPartition("in", 1)])
        out: dict[int, int] = {}
        deadline = time.monotonic() + 10
        while len(out) < 2 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.setdefault(m.partition(), m.offset())
        return out
    finally:
        c.close()


def _topics(admin) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def test_internal_topic_rule():
    assert S.matches_internal_topic_format("a-store-changelog")
    assert S.matches_internal_topic_format("a-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition")
    assert S.matches_internal_topic_format("a-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic")
    assert S.matches_internal_topic_format("a-fk-subscription-registration-topic")
    assert not S.matches_internal_topic_format("a-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-00x-topic")
    assert not S.matches_internal_topic_format("a-changelog-x")
    assert S.is_inferred_internal_topic("app-s-changelog", "app", [], [])
    assert not S.is_inferred_internal_topic("app2-s-changelog", "app", [], [])
    assert not S.is_inferred_internal_topic("app-changelog", "app-changelog", [], [])
    # KAFKA-7930: a user topic named like an internal one is not deleted
    assert not S.is_inferred_internal_topic("app-s-changelog", "app", ["app-s-changelog"], [])
    assert not S.is_inferred_internal_topic("app-s-repartition", "app", [], ["app-s-repartition"])


def test_dry_run_prints_the_plan_and_changes_nothing(cluster):
    b, _, admin = cluster
    internal = _footprint(cluster, "dry", {("in", 0): 7, ("in", 1): 3, ("mid", 0): 1})
    before = _topics(admin)
    res = run(
        "streams-reset", "--application-id", "dry", "--bootstrap-server", b.bootstrap,
        "--input-topics", "in,gone", "--intermediate-topics", "mid", "--dry-run",
    )  # fmt: skip
    assert res.exit_code == 1, res.output  # would change: the contract's dry run
    # the input partitions in the order of Java's HashSet<TopicPartition>: hash 31*(31+p) +
    # "in".hashCode() (3365): 4326 (bucket 6) for in-0, 4357 (bucket 5) for in-1
    # the inferred internal topics in the order of listTopics' HashMap<String, ...> (fewer
    # than 13 topics: a table of 16 buckets)
    order = sorted(internal, key=_bucket16)
    assert len({_bucket16(t) for t in internal}) == 3 and len(before) <= 13
    assert res.stdout.splitlines() == [
        DRY_HEADER,
        "Reset-offsets for input topics [in, gone]",
        "Seek-to-end for intermediate topics [mid]",
        "Following input topics are not found, skipping them",
        "Topic: gone",
        "Following input topics offsets will be reset to (for consumer group dry)",
        "Topic: in Partition: 1 Offset: 0",
        "Topic: in Partition: 0 Offset: 0",
        "Following intermediate topics offsets will be reset to end (for consumer group dry)",
        "Topic: mid",
        "Done.",
        f"Deleting inferred internal topics [{', '.join(order)}]",
        "Done.",
    ]
    assert _committed(b.bootstrap, "dry") == {("in", 0): 7, ("in", 1): 3, ("mid", 0): 1}
    assert _topics(admin) == before


def _bucket16(name: str) -> int:
    """A String key's bucket in a java.util.HashMap of 16 buckets (String.hashCode, spread)."""
    h = 0
    for ch in name:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & 15


def test_execute_resets_the_group_and_deletes_only_internal_topics(cluster):
    b, _, admin = cluster
    internal = _footprint(cluster, "app", {("in", 0): 7, ("in", 1): 3, ("mid", 0): 1})
    before = _topics(admin)
    res = run(
        "streams-reset", "--application-id", "app", "--bootstrap-server", b.bootstrap,
        "--input-topics", "in", "--intermediate-topics", "mid", "--json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    objs = [json.loads(x) for x in res.stdout.splitlines()]
    offsets = {(o["topic"], o["partition"]): (o["kind"], o["current_offset"], o["new_offset"], o["executed"])
               for o in objs if o["type"] == "offset"}  # fmt: skip
    assert offsets == {
        ("in", 0): ("input", 7, 0, True),
        ("in", 1): ("input", 3, 0, True),
        ("mid", 0): ("intermediate", 1, 4, True),
    }
    assert sorted(o["topic"] for o in objs if o["type"] == "internal_topic" and o["deleted"]) == sorted(
        internal
    )
    assert _committed(b.bootstrap, "app") == {("in", 0): 0, ("in", 1): 0, ("mid", 0): 4}
    assert _first_offsets(b.bootstrap, "app") == {0: 0, 1: 0}
    deadline = time.monotonic() + 10
    while _topics(admin) & set(internal) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _topics(admin) == before - set(internal)  # app-output, xapp-...-changelog, other: kept

    # nothing left to do: exit 0, and no internal topic any more
    again = run("streams-reset", "--application-id", "app", "--bootstrap-server", b.bootstrap, "--dry-run")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == [
        DRY_HEADER,
        "No input or intermediate topics specified. Skipping seek.",
        "Deleting inferred internal topics []",
        "Done.",
    ]


def test_each_reset_specifier(cluster, tmp_path):
    b, base, _ = cluster
    _footprint(cluster, "spec", {("in", 0): 5, ("in", 1): 5})
    boot = [
        "streams-reset",
        "--application-id",
        "spec",
        "--bootstrap-server",
        b.bootstrap,
        "--input-topics",
        "in",
    ]

    def reset(*how, lines=False):
        res = run(*boot, *how)
        assert res.exit_code == 0, res.output
        got = _committed(b.bootstrap, "spec")
        return (got, res.stdout.splitlines()) if lines else {p: o for (_, p), o in got.items()}

    # past the end: clamped, in the tool's words; the one internal topic named is deleted
    got, out = reset("--to-offset", "12", "--internal-topics", "spec-store-changelog", lines=True)
    assert {p: o for (_, p), o in got.items()} == {0: N, 1: N}
    assert out.count(f"New offset (12) is higher than latest offset. Value will be set to {N}") == 2
    assert "Deleting specified internal topics [spec-store-changelog]" in out
    assert reset("--shift-by", "-3") == {0: N - 3, 1: N - 3}
    # at the log start: Kafka's range check says so too
    got, out = reset("--to-offset", "0", lines=True)
    assert out.count("New offset (0) is lower than earliest offset. Value will be set to 0") == 2
    assert out[-2] == "Deleting inferred internal topics []"  # the shift-by run deleted the other two
    assert reset("--to-latest") == {0: N, 1: N}
    assert reset("--to-earliest") == {0: 0, 1: 0}
    at = datetime.fromtimestamp((base + 4_500) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    assert reset("--to-datetime", at) == {0: 5, 1: 5}
    got, out = reset("--by-duration", "P1D", lines=True)  # nothing as recent: the log end
    assert {p: o for (_, p), o in got.items()} == {0: N, 1: N}
    assert (
        "Partition 0 from topic in is empty, without a committed record. Falling back to latest known offset."
        in out
    )
    assert reset("--by-duration", "P3D") == {0: 0, 1: 0}
    plan = tmp_path / "plan.csv"
    plan.write_text("in,0,2\nin,1,8\n")
    assert reset("--from-file", plan) == {0: 2, 1: 8}
    assert _first_offsets(b.bootstrap, "spec") == {0: 2, 1: 8}

    # refusals: one line, nothing changed
    for how, words, code in (
        (
            ["--to-offset", "1", "--to-latest"],
            'Option "[to-offset]" can\'t be used with option "[to-latest]"',
            2,
        ),
        (["--by-duration", "1 day"], "expected an ISO-8601 duration", 2),
        (["--from-file", tmp_path / "nope.csv"], "nope.csv", 2),
    ):
        res = run(*boot, *how)
        assert res.exit_code == code and words in res.output and "Traceback" not in res.output, res.output
    partial = tmp_path / "partial.csv"
    partial.write_text("in,0,1\n")
    res = run(*boot, "--from-file", partial)
    assert res.exit_code == 2 and "no offset for input partition in-1" in res.output
    res = run(*boot, "--internal-topics", "other")
    assert res.exit_code == 2 and "Invalid topic specified in the --internal-topics option." in res.output
    assert _committed(b.bootstrap, "spec") == {("in", 0): 2, ("in", 1): 8}


def test_active_members_refused_without_force_removed_with_it(cluster):
    b, _, admin = cluster
    _footprint(cluster, "busy", {("in", 0): 6, ("in", 1): 6})
    # a static member that stopped without leaving (a long session timeout keeps it in the group)
    c = _consumer(b.bootstrap, "busy", **{"group.instance.id": "busy-1", "session.timeout.ms": 45000})
    c.subscribe(["in"])
    deadline = time.monotonic() + 15
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment()
    c.close()  # a static member does not leave
    boot = [
        "streams-reset",
        "--application-id",
        "busy",
        "--bootstrap-server",
        b.bootstrap,
        "--input-topics",
        "in",
    ]
    res = run(*boot)
    assert res.exit_code == 1
    err = res.stderr.strip()
    assert err.startswith(
        "kafkatool: error: Consumer group 'busy' is still active and has following members: [(memberId="
    )
    assert "groupInstanceId=busy-1, clientId=busy-client, host=/127.0.0.1, " in err
    assert (
        "assignment=(topicPartitions=in-1,in-0))]. Make sure to stop all running application instances" in err
    )
    assert err.endswith("You can use option '--force' to remove active members from the group.")
    assert _committed(b.bootstrap, "busy") == {("in", 0): 6, ("in", 1): 6}

    dry = run(*boot, "--force", "--dry-run")
    assert dry.exit_code == 1 and dry.stdout.startswith(
        "Force deleting all active members in the group: busy\n"
    )
    state = run(
        "groups", "describe", "--bootstrap-server", b.bootstrap, "--group", "busy", "--state", "--json"
    )
    assert json.loads(state.stdout)["members"] == 1  # a dry run removes no one

    res = run(*boot, "--force")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("Force deleting all active members in the group: busy\n")
    state = run(
        "groups", "describe", "--bootstrap-server", b.bootstrap, "--group", "busy", "--state", "--json"
    )
    assert json.loads(state.stdout)["members"] == 0
    assert _committed(b.bootstrap, "busy") == {("in", 0): 0, ("in", 1): 0}


_MEMBER = """
import sys, time
import confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "crashed",
                 "session.timeout.ms": 45000, "enable.auto.commit": False})
c.subscribe(["in"])
deadline = time.monotonic() + 15
while not c.assignment() and time.monotonic() < deadline:
    c.poll(0.2)
print("joined" if c.assignment() else "no assignment", flush=True)
time.sleep(30)
"""


def test_a_crashed_dynamic_member_is_removed_by_member_id(cluster):
    """A consumer killed without leaving stays a member until its session times out; --force
    removes it by its member id."""
    import os
    import signal
    import subprocess
    import sys

    b, _, _ = cluster
    _footprint(cluster, "crash", {("in", 0): 4, ("in", 1): 4})
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEMBER, b.bootstrap, "crash"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "joined"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    boot = [
        "streams-reset",
        "--application-id",
        "crash",
        "--bootstrap-server",
        b.bootstrap,
        "--input-topics",
        "in",
    ]
    res = run(*boot, "--to-offset", "2")
    assert res.exit_code == 1 and "groupInstanceId=null, clientId=crashed" in res.stderr
    assert "assignment=(topicPartitions=in-1,in-0)" in res.stderr
    res = run(*boot, "--to-offset", "2", "--force", "--json")
    assert res.exit_code == 0, res.output
    (members,) = [json.loads(x) for x in res.stdout.splitlines() if '"members"' in x]
    assert members["removed"] and [m["client_id"] for m in members["members"]] == ["crashed"]
    assert _committed(b.bootstrap, "crash") == {("in", 0): 2, ("in", 1): 2}
    assert _first_offsets(b.bootstrap, "crash") == {0: 2, 1: 2}


def test_shift_by_starts_an_uncommitted_partition_at_the_consumers_auto_offset_reset(cluster, tmp_path):
    """StreamsResetter shifts from the embedded consumer's position: the committed offset, else
    auto.offset.reset (latest unless --config-file says otherwise)."""
    b, _, _ = cluster
    for appid in ("shift-latest", "shift-earliest"):
        _footprint(cluster, appid, {("in", 0): 5})
    cfg = tmp_path / "consumer.properties"
    cfg.write_text("auto.offset.reset=earliest\nclient.id=ignored\n")
    res = run("streams-reset", "--application-id", "shift-earliest", "--bootstrap-server", b.bootstrap,
              "--input-topics", "in", "--shift-by", "2", "--config-file", cfg)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert _committed(b.bootstrap, "shift-earliest") == {("in", 0): 7, ("in", 1): 2}
    res = run("streams-reset", "--application-id", "shift-latest", "--bootstrap-server", b.bootstrap,
              "--input-topics", "in", "--shift-by", "2")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"New offset ({N + 2}) is higher than latest offset. Value will be set to {N}" in res.stdout
    assert _committed(b.bootstrap, "shift-latest") == {("in", 0): 7, ("in", 1): N}
