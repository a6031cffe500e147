"""A broker of several processes (``kafkatool.processes=2``): real ``serve`` processes and real
clients. Clients see two nodes, each partition is served by the process that owns it, the
rest is forwarded to the primary; checkpoints, the marker, restarts, crashes, transactions
and topic deletion behave as they do with one process."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from pathlib import Path

import pytest

from kafkatool.broker.processes import owner_index
from kafkatool.formats import checkpoint as ck
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.conftest import BrokerProcess, free_port
from tests.broker.test_txn_clients import create_topic, name, read_all
from tests.broker.wire import WireClient

OVERRIDES = [
    "kafkatool.processes=2",
    "num.partitions=1",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=3",
    "transaction.state.log.num.partitions=3",
]


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie (our broker is not its parent, so nobody may reap it soon) counts as gone
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def wait_until(what, timeout: float = 15.0, step: float = 0.05):
    for _ in range(int(timeout / step)):
        v = what()
        if v:
            return v
        time.sleep(step)
    return what()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, **extra) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **extra})
    errors = []
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(
                topic,
                value=f"{part}:{i}".encode(),
                partition=part,
                on_delivery=lambda e, m: e and errors.append(e),
            )
    assert p.flush(20) == 0 and not errors


def metadata(bootstrap: str, topic: str):
    with WireClient(bootstrap) as c:
        return c.request(
            3, 9, G.MetadataRequest(topics=[G.metadata_request.MetadataRequestTopic(name=topic)])
        )


@pytest.fixture(scope="module")
def pbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("pbroker") / "data", extra=OVERRIDES).start(timeout=40)
    yield b
    b.stop()


def test_two_nodes_each_partition_served_by_its_owner(pbroker):
    topic = name("spread")
    create_topic(pbroker.bootstrap, topic, 6)
    md = metadata(pbroker.bootstrap, topic)
    nodes = {b.node_id: b.port for b in md.brokers}
    assert set(nodes) == {1, 2} and nodes[1] == pbroker.port and nodes[2] != pbroker.port
    assert md.controller_id == 1
    [t] = md.topics
    leaders = {p.partition_index: p.leader_id for p in t.partitions}
    assert leaders == {p: 1 + owner_index(topic, p, 2) for p in range(6)}
    assert set(leaders.values()) == {1, 2}
    assert all(p.replica_nodes == [p.leader_id] == p.isr_nodes for p in t.partitions)
    # a produce sent to the process that does not own the partition is refused as by another broker
    wrong = next(p for p, n in leaders.items() if n == 2)
    body = G.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=wrong, records=None)])
        ],
    )
    with WireClient(pbroker.bootstrap) as c:
        resp = c.request(0, 7, body)
    assert resp.responses[0].partition_responses[0].error_code == 6  # NOT_LEADER_OR_FOLLOWER
    produce(pbroker.bootstrap, topic, 6, 50)
    got = read_all(pbroker.bootstrap, topic, 6, "read_uncommitted", 300)
    assert sorted(got) == sorted(f"{p}:{i}" for p in range(6) for i in range(50))
    # the member's partition dirs are in the same log dir, its checkpoints in the same files
    data = pbroker.data_dir
    assert all((data / f"{topic}-{p}").is_dir() for p in range(6))


def test_forwarded_admin_and_group_requests(pbroker):
    """Requests the member does not serve (CreateTopics, configs, groups, FindCoordinator)
    are answered by the primary, with the client's identity."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    member_port = next(b.port for b in metadata(pbroker.bootstrap, "").brokers if b.node_id == 2)
    member = f"127.0.0.1:{member_port}"
    topic = name("fwd")
    admin = AdminClient({"bootstrap.servers": member})
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "123456"})])[topic].result(15)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    cfg = admin.describe_configs([res])[res].result(15)
    assert cfg["retention.ms"].value == "123456"
    produce(member, topic, 2, 10)
    c = Consumer(
        {
            "bootstrap.servers": member,
            "group.id": name("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    c.commit(asynchronous=False)
    committed = c.committed(c.assignment(), timeout=10)
    c.close()
    assert len(got) == 20
    assert sorted(tp.offset for tp in committed) == [10, 10]


def test_transactions_span_both_processes(pbroker):
    from confluent_kafka import Producer

    topic = name("txn")
    create_topic(pbroker.bootstrap, topic, 4)
    assert {1 + owner_index(topic, p, 2) for p in range(4)} == {1, 2}
    p = Producer({"bootstrap.servers": pbroker.bootstrap, "transactional.id": name("tid")})
    p.init_transactions(15)
    for commit, tag in ((True, "a"), (False, "b"), (True, "c")):
        p.begin_transaction()
        for part in range(4):
            p.produce(topic, value=f"{tag}{part}".encode(), partition=part)
        assert p.flush(15) == 0  # written before the abort (an abort drops what is unsent)
        if commit:
            p.commit_transaction(15)
        else:
            p.abort_transaction(15)
    committed = read_all(pbroker.bootstrap, topic, 4, "read_committed", 8)
    assert sorted(committed) == sorted(f"{t}{p}" for t in "ac" for p in range(4))
    assert len(read_all(pbroker.bootstrap, topic, 4, "read_uncommitted", 12)) == 12


def test_deleted_topic_goes_from_both_processes_and_comes_back_empty(pbroker):
    from confluent_kafka.admin import AdminClient

    topic = name("del")
    create_topic(pbroker.bootstrap, topic, 4)
    produce(pbroker.bootstrap, topic, 4, 5)
    admin = AdminClient({"bootstrap.servers": pbroker.bootstrap})
    admin.delete_topics([topic])[topic].result(15)
    data = pbroker.data_dir
    assert wait_until(lambda: not any((data / f"{topic}-{p}").exists() for p in range(4)))
    create_topic(pbroker.bootstrap, topic, 4)
    assert wait_until(lambda: all((data / f"{topic}-{p}").is_dir() for p in range(4)))
    produce(pbroker.bootstrap, topic, 4, 1)
    assert sorted(read_all(pbroker.bootstrap, topic, 4, "read_uncommitted", 4)) == [
        f"{p}:0" for p in range(4)
    ]


def test_clean_restart_keeps_data_offsets_and_checkpoints(make_broker, tmp_path):
    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("restart")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 25)
    pid = b.proc.pid
    [member] = children(pid)
    assert b.stop() == 0
    assert gone(member)
    data = b.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    for f in (ck.RECOVERY_POINT_CHECKPOINT, ck.REPLICATION_OFFSET_CHECKPOINT):
        entries = ck.decode_offset_checkpoint((data / f).read_bytes())
        assert {p: entries.get((topic, p)) for p in range(4)} == dict.fromkeys(range(4), 25), f
    b.start(timeout=40)
    got = read_all(b.bootstrap, topic, 4, "read_uncommitted", 100)
    assert len(got) == 100
    produce(b.bootstrap, topic, 4, 1)
    assert len(read_all(b.bootstrap, topic, 4, "read_uncommitted", 104)) == 104
    assert b.stop() == 0


def test_killed_primary_takes_its_processes_with_it_and_nothing_acked_is_lost(make_broker):
    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("crash")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 30)
    [member] = children(b.proc.pid)
    b.kill()
    assert wait_until(lambda: gone(member), timeout=20), "the member outlived its primary"
    assert not (b.data_dir / ".kafka_cleanshutdown").exists()
    b.start(timeout=40)
    assert len(read_all(b.bootstrap, topic, 4, "read_uncommitted", 120)) == 120
    assert b.stop() == 0


def test_a_dead_member_stops_the_broker_with_exit_1_without_restarts(make_broker):
    b = make_broker(extra=[*OVERRIDES, "kafkatool.processes.restarts.max=0"]).start(timeout=40)
    [member] = children(b.proc.pid)
    os.kill(member, signal.SIGKILL)
    assert b.proc.wait(30) == 1
    b._log.close()
    log = b.log_text()
    assert "process 1 of this broker (node 2) exited (signal SIGKILL), 1 deaths within" in log
    assert not (b.data_dir / ".kafka_cleanshutdown").exists()


def member_port(bootstrap: str, node: int) -> int | None:
    return next((b.port for b in metadata(bootstrap, "").brokers if b.node_id == node), None)


def free_base_port(count: int, step: int) -> int:
    """A port P with P + k x step free for k < count (bound and released, as free_port does)."""
    import socket

    for _ in range(50):
        base = free_port()
        if base + (count - 1) * step > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for k in range(1, count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", base + k * step))
            return base
        except OSError:
            continue
    raise AssertionError("no free ports")


def test_member_ports_and_advertised_ports_follow_the_step(make_broker):
    """Process k listens on port + k x step and advertises advertised port + k x step (a NAT's
    ports, which nothing here listens on); every line a process logs names it (process=k)."""
    step = 7
    port, adv = free_base_port(3, step), free_base_port(3, step)
    extra = [
        *OVERRIDES,
        "kafkatool.processes=3",
        f"kafkatool.processes.port.step={step}",
        f"advertised.listeners=PLAINTEXT://localhost:{adv}",
    ]
    b = make_broker(port=port, extra=extra).start(timeout=40)
    brokers = {x.node_id: (x.host, x.port) for x in metadata(b.bootstrap, "").brokers}
    assert brokers == {1 + k: ("localhost", adv + k * step) for k in range(3)}
    for k in (1, 2):
        with WireClient(f"127.0.0.1:{port + k * step}") as c:
            c.api_versions()  # process k answers on its own fixed port
    assert b.stop() == 0
    lines = b.log_text().splitlines()
    for k in (1, 2):
        started = [ln for ln in lines if f"process {k} of the broker started" in ln]
        assert started and all(f"logger=kafkatool.broker process={k} " in ln for ln in started)
        assert f"listeners=127.0.0.1:{port + k * step} " in started[0]
    # the first process's lines name it too
    assert [ln for ln in lines if "broker started listeners" in ln and " process=0 " in ln]


def test_json_log_lines_carry_the_process_number():
    import json
    import logging

    from kafkatool.broker.log_lines import JsonFormatter, TextFormatter

    rec = logging.LogRecord("kafkatool.broker", logging.INFO, __file__, 1, "x=%d", (1,), None)
    assert json.loads(JsonFormatter(2).format(rec))["process"] == 2
    assert "process" not in json.loads(JsonFormatter().format(rec))
    assert " logger=kafkatool.broker process=2 x=1" in TextFormatter(2).format(rec)


REFUSALS = [
    ("PLAINTEXT://127.0.0.1:{p},OTHER://127.0.0.1:{q}", 1, "process 1's PLAINTEXT port {q}"),
    ("PLAINTEXT://0.0.0.0:{p},OTHER://127.0.0.1:{r}", 2, "process 1's PLAINTEXT port {r}"),
    ("PLAINTEXT://127.0.0.1:65530", 3, "process 2's PLAINTEXT port would be 65536"),
    ("PLAINTEXT://127.0.0.1:65530", 0, "kafkatool.processes.port.step=0: must be at least 1"),
    ("PLAINTEXT://127.0.0.1:{p}", 1, "kafkatool.processes.restarts.max must be at least 0"),
]
_REFUSED_PORT = 30000


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[tuple, tuple[int, str, Path]]:
    """Each REFUSALS case's ``serve`` (exit code, stderr, its log dir), the processes run side
    by side: each is a Python start-up, about a second."""
    import subprocess
    import sys

    from tests.broker.conftest import REPO

    p = _REFUSED_PORT
    started = {}
    for case in REFUSALS:
        listeners, step, why = case
        extra = ["-o", "kafkatool.processes.restarts.max=-1"] if "restarts" in why else []
        d = tmp_path_factory.mktemp("refused") / "data"
        cmd = [
            sys.executable, "-m", "kafkatool", "serve", "--no-banner",
            "-o", f"log.dirs={d}",
            "-o", f"listeners={listeners.format(p=p, q=p + 1, r=p + 2)}",
            "-o", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            "-o", "kafkatool.processes=3" if step == 3 else "kafkatool.processes=2",
            "-o", f"kafkatool.processes.port.step={step}",
            *extra,
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started[case] = (proc, d)
    out = {}
    try:
        for case, (proc, d) in started.items():
            _, err = proc.communicate(timeout=30)
            out[case] = (proc.returncode, err, d)
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.mark.parametrize("listeners, step, why", REFUSALS)
def test_bad_port_and_restart_settings_are_refused_at_start_up(refusals, listeners, step, why):
    code, stderr, d = refusals[(listeners, step, why)]
    p = _REFUSED_PORT
    assert code == 2, stderr
    assert why.format(q=p + 1, r=p + 2) in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert not d.exists()  # refused before the dirs are touched


def test_a_member_port_in_use_stops_the_start_with_exit_2(tmp_path):
    import socket
    import subprocess
    import sys

    from tests.broker.conftest import REPO

    def port_pair() -> tuple[int, socket.socket]:
        """A port that was free just now (the primary's) whose next port is held (process 1's):
        an arbitrary neighbour of a held port may belong to another program, and then the
        primary, not process 1, could not listen."""
        for _ in range(50):
            port = free_port()
            taken = socket.socket()
            try:
                taken.bind(("127.0.0.1", port + 1))
            except OSError:
                taken.close()
                continue
            taken.listen()
            return port, taken
        raise AssertionError("no free pair of ports")

    port, taken = port_pair()
    with taken:
        r = subprocess.run(
            [
                sys.executable, "-m", "kafkatool", "serve", "--no-banner",
                "-o", f"log.dirs={tmp_path / 'data'}",
                "-o", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "-o", "kafkatool.processes=2",
            ],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "process=1 process 1 of the broker cannot listen" in r.stderr
    assert "address already in use" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "kafkatool: error: cannot listen: process 1 of this broker (node 2) exited (status 2)"
    )
    assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()  # the member never stopped cleanly


def _produce_while(bootstrap: str, topic: str, partitions: int, count: int, during) -> tuple[list, list]:
    """Produce ``count`` records (acks=all, idempotent) over ~4 s, calling ``during`` once a
    quarter are sent; (values acknowledged, errors)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 90000,
        }
    )
    acked, errors = [], []

    def done(err, msg):
        if err is None:
            acked.append(msg.value().decode())
        else:
            errors.append(err)

    for i in range(count):
        part = i % partitions
        p.produce(topic, value=f"{part}:x{i}".encode(), partition=part, on_delivery=done)
        if i == count // 4:
            during()
        p.poll(0)
        time.sleep(4.0 / count)
    assert p.flush(100) == 0
    return acked, errors


def test_a_killed_member_is_restarted_and_nothing_acked_is_lost(make_broker):
    """kill -9 of a member while a client produces: the broker stays up, the member recovers
    its partitions and comes back on its port, the client completes without an error and
    every acknowledged record is there; a clean stop then writes the marker and the
    checkpoints of the restarted member's partitions, and the next start loads cleanly."""
    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("phoenix")
    create_topic(b.bootstrap, topic, 4)
    assert {1 + owner_index(topic, p, 2) for p in range(4)} == {1, 2}
    produce(b.bootstrap, topic, 4, 25)  # something to recover
    port = member_port(b.bootstrap, 2)
    [member] = children(b.proc.pid)
    [t] = metadata(b.bootstrap, topic).topics
    epochs = {p.partition_index: p.leader_epoch for p in t.partitions}
    acked, errors = _produce_while(b.bootstrap, topic, 4, 2000, lambda: os.kill(member, signal.SIGKILL))
    assert not errors and len(acked) == 2000
    assert b.alive()
    [again] = wait_until(lambda: children(b.proc.pid), timeout=30)
    assert again != member and member_port(b.bootstrap, 2) == port
    log = b.log_text()
    assert "process 1 of this broker (node 2) exited (signal SIGKILL); restarting it" in log
    assert "process 1 of this broker (node 2) is back" in log
    assert "process=1 process 1 of the broker started" in log and "restart=true" in log
    # two new leader epochs for the partitions that came back (as Kafka's controller gives
    # them: one when their leader died, one when it was elected again)
    [t] = metadata(b.bootstrap, topic).topics
    assert {p.partition_index: p.leader_epoch for p in t.partitions} == {
        p: epochs[p] + 2 * (owner_index(topic, p, 2) == 1) for p in range(4)
    }
    got = read_all(b.bootstrap, topic, 4, "read_uncommitted", 2100, timeout=30)
    assert set(acked) <= set(got) and len(got) == len(set(got)) == 2100  # idempotent: no duplicate
    assert b.stop() == 0
    data = b.data_dir
    assert (data / ".kafka_cleanshutdown").exists()
    ends = {p: sum(1 for v in got if v.startswith(f"{p}:")) for p in range(4)}
    for f in (ck.RECOVERY_POINT_CHECKPOINT, ck.REPLICATION_OFFSET_CHECKPOINT):
        entries = ck.decode_offset_checkpoint((data / f).read_bytes())
        assert {p: entries.get((topic, p)) for p in range(4)} == ends, f
    b.start(timeout=40)
    this_run = b.log_path.read_text()[b._log_start :]
    assert "process 1 of the broker started" in this_run and "recovered_segments=0 restart=false" in this_run
    assert len(read_all(b.bootstrap, topic, 4, "read_uncommitted", 2100)) == 2100
    assert b.stop() == 0


def test_too_many_member_deaths_stop_the_broker(make_broker):
    """A dead member's partitions: leader -1 at epoch e+1 while it is down, its node at e+2
    once it is back (Kafka's controller: OfflineReplica, then an election at its return), the
    logs recording e+2 from their log end offset; a second death within the window stops
    the broker."""
    b = make_broker(extra=[*OVERRIDES, "kafkatool.processes.restarts.max=1"]).start(timeout=40)
    topic = name("offline")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 5)
    theirs = {p for p in range(4) if owner_index(topic, p, 2) == 1}
    assert theirs

    def state() -> dict[int, tuple[int, int, int]]:
        md = metadata(b.bootstrap, topic)
        return {
            p.partition_index: (p.leader_id, p.leader_epoch, p.error_code) for p in md.topics[0].partitions
        }

    before = state()
    assert {p: e[1] for p, e in before.items()} == dict.fromkeys(range(4), 0)
    [first] = children(b.proc.pid)
    os.kill(first, signal.SIGKILL)

    def offline() -> bool:
        # as a crashed Kafka broker's replication-factor-1 partitions: no leader, node gone
        md = metadata(b.bootstrap, topic)
        down = {p.partition_index for p in md.topics[0].partitions if p.leader_id == -1 and p.error_code == 5}
        return down == theirs and {x.node_id for x in md.brokers} == {1}

    assert wait_until(offline, timeout=10, step=0.02)
    assert state() == {p: (-1, 1, 5) if p in theirs else before[p] for p in range(4)}
    [second] = wait_until(lambda: [c for c in children(b.proc.pid) if c != first], timeout=30)
    assert wait_until(lambda: "is back" in b.log_text(), timeout=30)
    assert state() == {p: (2, 2, 0) if p in theirs else before[p] for p in range(4)}
    for p in theirs:
        # the epoch of its return starts at the log end, the outage's epoch has no entry
        cache = ck.decode_leader_epoch_checkpoint(
            (b.data_dir / f"{topic}-{p}" / ck.LEADER_EPOCH_CHECKPOINT).read_bytes()
        )
        assert cache == [(0, 0), (2, 5)], (p, cache)
    os.kill(second, signal.SIGKILL)
    assert b.proc.wait(30) == 1
    b._log.close()
    log = b.log_text()
    assert "process 1 of this broker (node 2) exited (signal SIGKILL), 2 deaths within 300000 ms" in log
    assert "shutdown complete clean=false" in log
    assert not (b.data_dir / ".kafka_cleanshutdown").exists()


def test_a_topic_deleted_while_a_member_is_down_goes_from_its_dirs(make_broker):
    """The restarted member deletes its logs of a topic deleted (and made again) while it was
    dead: the new topic starts empty on every partition."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("gone")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 5)
    theirs = [p for p in range(4) if owner_index(topic, p, 2) == 1]
    assert theirs
    [member] = children(b.proc.pid)
    # the member never sees the deletion: stopped, then killed
    os.kill(member, signal.SIGSTOP)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    with contextlib.suppress(KafkaException):  # REQUEST_TIMED_OUT: the member did not answer
        admin.delete_topics([topic], operation_timeout=1)[topic].result(15)
    assert wait_until(lambda: "topic deleted topic=" + topic in b.log_text(), timeout=10)
    os.kill(member, signal.SIGKILL)
    # answered once the restarted member has its logs
    admin.create_topics([NewTopic(topic, 4, 1)], operation_timeout=30)[topic].result(40)
    assert wait_until(lambda: "is back" in b.log_text())
    produce(b.bootstrap, topic, 4, 1)
    assert sorted(read_all(b.bootstrap, topic, 4, "read_uncommitted", 4)) == [f"{p}:0" for p in range(4)]
    assert b.stop() == 0


def test_processes_need_a_writable_standalone_broker(make_broker, tmp_path):
    import subprocess
    import sys

    from tests.broker.conftest import REPO

    d = tmp_path / "ro"
    d.mkdir()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkatool",
            "serve",
            "--no-banner",
            "--read-only",
            "-o",
            f"log.dirs={d}",
            "-o",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "-o",
            "kafkatool.processes=2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "kafkatool.processes=2 is for a standalone broker that writes" in r.stderr
    assert "Traceback" not in r.stderr


def test_sasl_users_and_acls_reach_every_process(tmp_path):
    """SCRAM credentials and ACLs live in the primary's metadata: a member authenticates and
    authorizes with them, also with ACLs created while it runs."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkatool.protocol.generated.create_acls_request import AclCreation, CreateAclsRequest
    from tests.broker.conftest import free_port
    from tests.broker.security.test_acls import _conf, _opts, add_users

    data = tmp_path / "data"
    plain, sasl = free_port(), free_port()
    extra = [*_opts(plain, sasl), "kafkatool.processes=2", "super.users=User:admin;User:ANONYMOUS"]
    BrokerProcess(data, port=plain, extra=extra).start(timeout=40).stop()
    add_users(data)
    b = BrokerProcess(data, port=plain, extra=extra).start(timeout=40)
    try:
        admin = AdminClient(_conf(sasl, "admin"))
        topic = name("acl")
        admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(15)
        assert {1 + owner_index(topic, p, 2) for p in range(4)} == {1, 2}
        # the primary's answer waits until every process has the ACL (as on a broker of one
        # process): with the member stopped it does not come, once the member runs it does
        creation = AclCreation(
            resource_type=2, resource_name=topic, resource_pattern_type=3, principal="User:alice",
            host="*", operation=4, permission_type=3,
        )  # fmt: skip
        [member] = children(b.proc.pid)
        with WireClient(f"127.0.0.1:{plain}") as c:  # the primary; ANONYMOUS is a super user here
            os.kill(member, signal.SIGSTOP)
            try:
                c.send(30, 3, CreateAclsRequest(creations=[creation]))
                assert select.select([c.sock], [], [], 1.5)[0] == []
            finally:
                os.kill(member, signal.SIGCONT)
            _, resp = c.recv(30, 3)
        assert [r.error_code for r in resp.results] == [0]

        def send(user: str) -> list:
            p = Producer(_conf(sasl, user, **{"linger.ms": 0, "message.timeout.ms": 8000}))
            results = []
            for part in range(4):
                p.produce(topic, value=b"x", partition=part, on_delivery=lambda e, m: results.append(e))
            p.flush(15)
            return results

        assert send("alice") == [None] * 4  # every partition, both processes
        denied = send("bob")
        assert len(denied) == 4 and all(
            e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in denied
        )
    finally:
        assert b.stop() == 0


def test_a_dir_written_by_kafka_keeps_each_partitions_leader_epoch(make_broker):
    """A dir without kafkatool's metadata file (Kafka's): the topics come from the partition
    dirs, and Metadata names each partition's leader epoch from its own log, also for the
    partitions another process owns (else a client's fetch would be fenced forever)."""
    b = make_broker(extra=["num.partitions=1"]).start()
    topic = name("kafka")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 5)
    assert b.stop() == 0
    data = b.data_dir
    (data / "kafkatool-cluster.json").unlink()
    for p in range(4):
        (data / f"{topic}-{p}" / ck.LEADER_EPOCH_CHECKPOINT).write_bytes(
            ck.encode_leader_epoch_checkpoint([(0, 0), (7, 3)])
        )
    b.extra = OVERRIDES
    b.start(timeout=40)
    [t] = metadata(b.bootstrap, topic).topics
    assert {p.partition_index: p.leader_epoch for p in t.partitions} == dict.fromkeys(range(4), 7)
    assert {p.leader_id for p in t.partitions} == {1, 2}
    produce(b.bootstrap, topic, 4, 1)
    assert len(read_all(b.bootstrap, topic, 4, "read_uncommitted", 24)) == 24
    assert b.stop() == 0


def test_a_member_killed_as_the_broker_stops_leaves_no_marker_unless_it_recovered(make_broker):
    """kill -9 of a member and SIGTERM of the broker at once: either the primary restarted it
    before the stop (it recovered, then stopped cleanly: marker, exit 0) or not (no marker,
    exit 1); never a marker over partitions nobody recovered."""
    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("race")
    create_topic(b.bootstrap, topic, 4)
    produce(b.bootstrap, topic, 4, 10)
    [member] = children(b.proc.pid)
    os.kill(member, signal.SIGKILL)
    b.proc.send_signal(signal.SIGTERM)
    code = b.proc.wait(60)
    b._log.close()
    log = b.log_text()
    marker = (b.data_dir / ".kafka_cleanshutdown").exists()
    if marker:
        assert code == 0 and "restart=true" in log and "shutdown complete clean=true" in log
    else:
        assert code == 1 and "shutdown complete clean=false" in log
    b.start(timeout=40)
    assert sorted(read_all(b.bootstrap, topic, 4, "read_uncommitted", 40)) == sorted(
        f"{p}:{i}" for p in range(4) for i in range(10)
    )
    assert b.stop() == 0


def test_a_transaction_commits_across_a_member_restart(make_broker):
    """The commit's markers for a dead member's partitions wait for its restart (the
    coordinator retries, as for a Kafka partition whose leader is offline)."""
    from confluent_kafka import Producer

    b = make_broker(extra=OVERRIDES).start(timeout=40)
    topic = name("txnrestart")
    create_topic(b.bootstrap, topic, 4)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": name("tid")})
    p.init_transactions(15)
    p.begin_transaction()
    for part in range(4):
        p.produce(topic, value=f"a{part}".encode(), partition=part)
    assert p.flush(15) == 0
    [member] = children(b.proc.pid)
    os.kill(member, signal.SIGKILL)
    p.commit_transaction(60)
    p.begin_transaction()
    for part in range(4):
        p.produce(topic, value=f"b{part}".encode(), partition=part)
    p.commit_transaction(60)
    committed = read_all(b.bootstrap, topic, 4, "read_committed", 8, timeout=30)
    assert sorted(committed) == sorted(f"{t}{p}" for t in "ab" for p in range(4))
    assert "is back" in b.log_text()
    assert b.stop() == 0


def test_logger_levels_reach_every_process(pbroker):
    """BROKER_LOGGER through the member's port (forwarded): the primary answers and alters, and
    the member takes the level too: its own debug line of a refused produce (no records:
    INVALID_RECORD, while min.insync.replicas=2 on a partition of one replica refuses nothing,
    as Kafka 3.7's effective min ISR is min(min ISR, RF)) appears only while
    kafkatool.broker is at DEBUG. The cluster-wide throttle default is described on both nodes."""
    from tests.broker.test_broker_configs import describe, inc

    topic = name("loglevel")
    create_topic(pbroker.bootstrap, topic, 6)
    md = metadata(pbroker.bootstrap, topic)
    member_port = next(b.port for b in md.brokers if b.node_id == 2)
    [t] = md.topics
    owned = next(p.partition_index for p in t.partitions if p.leader_id == 2)
    with WireClient(f"127.0.0.1:{member_port}") as c:
        assert inc(c, 2, topic, ("min.insync.replicas", 0, "2")) == (0, None)

        def refused_produce() -> None:
            body = G.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(
                        name=topic, partition_data=[PartitionProduceData(index=owned, records=None)]
                    )
                ],
            )
            resp = c.request(0, 7, body)
            assert resp.responses[0].partition_responses[0].error_code == 87  # INVALID_RECORD

        line = f"process=1 produce error topic={topic} partition={owned} code=87"
        mark = len(pbroker.log_text())
        refused_produce()
        assert inc(c, 8, "2", ("kafkatool.broker", 0, "DEBUG")) == (0, None)
        assert describe(c, "2", rtype=8)[1]["kafkatool.broker"].value == "DEBUG"

        def logged() -> bool:
            refused_produce()
            return line in pbroker.log_text()[mark:]

        assert wait_until(logged, timeout=10, step=0.1)
        assert pbroker.log_text()[mark:].count(line) >= 1
        assert inc(c, 8, "2", ("kafkatool.broker", 1, None)) == (0, None)
        assert describe(c, "1", rtype=8)[1]["kafkatool.broker"].value == "INFO"

        def quiet() -> bool:
            before = pbroker.log_text().count(line)
            refused_produce()
            time.sleep(0.2)
            return pbroker.log_text().count(line) == before

        assert wait_until(quiet, timeout=10, step=0.1)
        # the cluster-wide default, altered through the member, seen from both nodes
        rate = "follower.replication.throttled.rate"
        assert inc(c, 4, "", (rate, 0, "123")) == (0, None)
        try:
            for node in ("1", "2"):
                e = describe(c, node, keys=[rate], rtype=4)[1][rate]
                assert (e.value, e.config_source) == ("123", 3)
        finally:
            assert inc(c, 4, "", (rate, 1, None)) == (0, None)


def test_dynamic_log_defaults_reach_the_members_logs(pbroker):
    """A cluster-wide log.segment.bytes altered through the member's port (forwarded to the
    primary) reaches the member's live logs at once: its partition rolls at the new size; the
    DELETE puts Kafka's default back in both processes."""
    from tests.broker.test_broker_configs import describe, inc

    topic = name("dynseg")
    create_topic(pbroker.bootstrap, topic, 4)
    md = metadata(pbroker.bootstrap, topic)
    [t] = md.topics
    owned = next(p.partition_index for p in t.partitions if p.leader_id == 2)
    port = member_port(pbroker.bootstrap, 2)
    pdir = pbroker.data_dir / f"{topic}-{owned}"
    with WireClient(f"127.0.0.1:{port}") as c:
        assert inc(c, 4, "", ("log.segment.bytes", 0, "200")) == (0, None)
        try:
            for node in ("1", "2"):
                e = describe(c, node, keys=["log.segment.bytes"], rtype=4)[1]["log.segment.bytes"]
                assert (e.value, e.config_source) == ("200", 3)

            def rolled() -> bool:
                produce(pbroker.bootstrap, topic, 4, 3, **{"linger.ms": 0, "batch.num.messages": 1})
                return len(list(pdir.glob("*.log"))) >= 3

            assert wait_until(rolled, timeout=15, step=0.2)
        finally:
            assert inc(c, 4, "", ("log.segment.bytes", 1, None)) == (0, None)
        n = len(list(pdir.glob("*.log")))
        produce(pbroker.bootstrap, topic, 4, 3, **{"linger.ms": 0, "batch.num.messages": 1})
        assert len(list(pdir.glob("*.log"))) == n


def test_a_member_takes_the_primarys_dynamic_configs_by_the_value_rule(tmp_path, caplog):
    """A member takes the primary's dynamic broker configs through the rule every source takes
    (BrokerConfig.take_dynamic), at start-up and with every push: a value it cannot apply is
    logged once and left out, a set it cannot run with is not applied at all (its logs keep
    the last set it took), never half.  In process, on the real Member and Broker: the primary
    pushes only what it took by the same rule, so only a member running other code (restarted
    after an upgrade in place) meets such a value."""
    import asyncio
    import logging
    import socket

    from kafkatool.broker.metadata import MetadataStore
    from kafkatool.broker.processes import Member, member_config
    from kafkatool.broker.server import Broker
    from kafkatool.log.manager import LogManager

    data = tmp_path / "data"
    data.mkdir()
    primary = MetadataStore([tmp_path], 1, writable=False)
    primary.create_topic("dyn", 8, {})
    explicit = {"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0", "kafkatool.processes": "2"}
    broker = Broker(member_config({"explicit": explicit}, 1))
    ours, theirs = socket.socketpair()
    group = Member(broker, 2, 1, 1, theirs)
    broker.join_group(group, clean_shutdown={str(data): True})
    caplog.set_level(logging.WARNING, logger="kafkatool")

    def push(dynamic: dict, default: dict) -> None:
        group.apply({"metadata": primary.to_json(), "dynamic": dynamic, "dynamic_default": default})

    def log_configs() -> set:
        logs = [lg for (t, _), lg in broker.manager.logs.items() if t == "dyn"]
        assert logs  # the member owns some of the 8 partitions
        return {(lg.config.retention_ms, lg.config.segment_bytes) for lg in logs}

    def said(text: str) -> int:
        return sum(text in r.getMessage() for r in caplog.records)

    def layers() -> tuple[dict, dict]:
        return broker.config.dynamic, broker.config.dynamic_default

    ignored = "dynamic broker config log.segment.bytes in the primary's configs of this broker ignored"

    held = LogManager([data], writable=True, load=False)  # the primary's lock of the dir

    async def run() -> None:
        await group.connect()
        try:
            # the start arguments: the invalid value is left out before the logs open
            group.take_dynamic_configs({"dynamic": {"log.segment.bytes": "5"}, "dynamic_default": {}})
            broker.open_storage()
            assert broker.config.dynamic == {}
            push({"log.segment.bytes": "5"}, {"log.retention.ms": "5000"})
            push({"log.segment.bytes": "5"}, {"log.retention.ms": "5000"})  # the next save: same layers
            assert layers() == ({}, {"log.retention.ms": "5000"})
            assert log_configs() == {(5000, 1073741824)}
            assert said(ignored) == 1
            # valid alone, together breaking KafkaConfig's requirement: nothing of the set is taken
            push({"log.segment.bytes": "2048"}, {"log.retention.ms": "0"})
            push({"log.segment.bytes": "2048"}, {"log.retention.ms": "0"})
            assert layers() == ({}, {"log.retention.ms": "5000"})
            assert log_configs() == {(5000, 1073741824)}
            assert said("not applied: requirement failed: log.retention.ms") == 1
            push({"log.segment.bytes": "2048"}, {"log.retention.ms": "7000"})
            assert log_configs() == {(7000, 2048)}
        finally:
            broker.close_storage()
            group.channel.close()

    try:
        asyncio.run(run())
    finally:
        ours.close()
        held.close()


def test_a_value_the_dirs_dynamic_config_file_holds_and_kafka_refuses_is_said_once(make_broker, tmp_path):
    """The log dir's dynamic-config file with a value Kafka refuses: the primary reads the file
    and says so once; a member takes the primary's layers (the value already left out) and never
    reads the file, so the operator sees one warning, not one per process.  The valid rest
    applies in every process: the member's partitions roll at the file's log.segment.bytes."""
    import json

    from kafkatool.log import topic_settings as ts

    data = tmp_path / "data"
    data.mkdir()
    doc = {
        "version": 1,
        "broker": 1,
        "configs": {"log.segment.bytes": "5"},
        "default_configs": {"log.roll.ms": "3600000", "log.segment.bytes": "1024"},
    }
    (data / ts.DYNAMIC_CONFIGS_FILE).write_text(json.dumps(doc))
    b = make_broker(data, extra=OVERRIDES).start(timeout=40)
    ignored = "dynamic broker config log.segment.bytes in"
    try:
        assert wait_until(lambda: len(metadata(b.bootstrap, "").brokers) == 2)
        topic = name("said")
        create_topic(b.bootstrap, topic, 4)
        member_parts = [p for p in range(4) if owner_index(topic, p, 2) == 1]
        assert member_parts
        produce(b.bootstrap, topic, 4, 30, **{"linger.ms": 0, "batch.num.messages": 1})
        for p in member_parts:  # 30 batches of ~80 bytes at log.segment.bytes=1024
            assert len(list((data / f"{topic}-{p}").glob("*.log"))) > 1
    finally:
        assert b.stop() == 0
    text = b.log_text()
    assert text.count(ignored) == 1, text[-3000:]
    assert "process=1" in text  # the member's lines are in the same log


def test_a_call_from_another_process_takes_only_an_afterwrite_as_one(tmp_path, monkeypatch):
    """answer_call awaits an AfterWrite's answer (a produce answer held until its writes are
    done) and sends an answer that is no AfterWrite as it is, whatever its class's name (it
    compared the class's name before: an answer of another class named so was taken for one)."""
    import asyncio

    from kafkatool.broker.config import BrokerConfig
    from kafkatool.broker.network import AfterWrite
    from kafkatool.broker.processes import answer_call
    from kafkatool.broker.server import Broker
    from kafkatool.log.append_writer import AppendWriter
    from kafkatool.protocol.framing import encode_request

    class Named(bytes):  # an encoded answer whose class happens to carry the name
        pass

    Named.__name__ = Named.__qualname__ = "AfterWrite"
    broker = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    writer = AppendWriter(native=False)
    answers = [Named(b"\0\0\0\x01named"), AfterWrite(writer, 0, lambda: b"\0\0\0\x01built")]
    monkeypatch.setattr(broker.router.routes[18], "handler", lambda ctx, req: answers.pop(0))
    frame = encode_request(
        18, 3, 1, "t", G.ApiVersionsRequest(client_software_name="t", client_software_version="1")
    )
    got = [asyncio.run(answer_call(broker, frame[4:], {})) for _ in range(2)]
    assert got == [("bytes", b"\0\0\0\x01named"), ("bytes", b"\0\0\0\x01built")]


def test_every_process_writes_its_appends_with_the_append_writer(make_broker):
    """kafkatool.append.writer=true with 2 processes (auto would leave it off on a machine of
    fewer than 4 cores): each process runs its own writer, produce answers acks=1 and acks=all
    reach both nodes' partitions and read back whole, and the stop drains both writers before
    the marker."""
    from kafkatool.log.append_writer import native_available

    if not native_available():
        pytest.skip("the native append writer is not built")
    b = make_broker(extra=[*OVERRIDES, "kafkatool.append.writer=true"]).start(timeout=40)
    assert b.log_text().count("append writer kind=native") == 2, b.log_text()[-3000:]
    topic = name("writer")
    create_topic(b.bootstrap, topic, 6)
    leaders = {p.partition_index: p.leader_id for p in metadata(b.bootstrap, topic).topics[0].partitions}
    assert set(leaders.values()) == {1, 2}
    produce(b.bootstrap, topic, 6, 40, acks="1")
    produce(b.bootstrap, topic, 6, 40)
    got = read_all(b.bootstrap, topic, 6, "read_uncommitted", 480)
    assert sorted(got) == sorted(f"{p}:{i}" for p in range(6) for i in range(40) for _ in range(2))
    assert b.stop() == 0
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    assert b.log_text().count("append writer kind=native") == 2
