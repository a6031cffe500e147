"""Three ``kafkatool serve`` processes joined through a real ZooKeeper (Debian's package)."""

from __future__ import annotations

import contextlib
import re
import time
import uuid

import pytest

from tests.broker.conftest import BrokerProcess, tcp_sockets
from tests.zk.conftest import run_zookeeper


class Cluster:
    def __init__(self, base, zk: str, n: int, extra: list[str]):
        self.base = base
        self.zk = zk
        self.chroot = f"/c{uuid.uuid4().hex[:8]}"
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            self.brokers[i] = BrokerProcess(
                base / f"b{i}" / "data",
                extra=[
                    f"broker.id={i}",
                    f"zookeeper.connect={zk}{self.chroot}",
                    "zookeeper.session.timeout.ms=6000",
                    "replica.lag.time.max.ms=10000",
                    "controlled.shutdown.retry.backoff.ms=200",
                    "replica.fetch.max.bytes=65536",
                    # the replication throttles measure over 2 one-second samples, not 11: a
                    # leader whose followers fetch all along has ~11 s of samples, and Kafka's
                    # SimpleRate then lets ~11 s of the rate through at once (the throttle tests
                    # bound what any history lets through: test_reassign)
                    "replication.quota.window.num=2",
                    *extra,
                ],
            )
            (base / f"b{i}").mkdir(parents=True, exist_ok=True)

    @property
    def connect(self) -> str:
        return f"{self.zk}{self.chroot}"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def start(self) -> Cluster:
        for b in self.brokers.values():
            b.spawn()
        for b in self.brokers.values():
            b.await_ready(timeout=40)
        wait_formed([b.bootstrap for b in self.brokers.values()])
        return self

    def stop(self) -> None:
        """Every live broker stopped cleanly (SIGTERM: controlled shutdown): those that are not
        the controller together (their controlled shutdowns are the controller's to run, one
        after the other), then the controller."""
        import threading

        def stop(b: BrokerProcess) -> None:
            with contextlib.suppress(Exception):
                if b.alive():
                    b.stop(timeout=60)

        controller = None
        with contextlib.suppress(Exception):
            controller = zk_json(self, "/controller")["brokerid"] if self.bootstrap else None
        first = [b for i, b in self.brokers.items() if i != controller]
        threads = [threading.Thread(target=stop, args=(b,), daemon=True) for b in first]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        for b in self.brokers.values():
            stop(b)

    def discard(self) -> None:
        """Every broker SIGKILLed: a fixture's teardown, whose brokers and data nobody uses again
        (a clean stop, the controlled shutdowns one after the other, cost 0.5-1 s per cluster and
        was checked by nothing there; a broker that crashed during the test keeps its exit code)."""
        for b in self.brokers.values():
            b.kill()

    def kazoo(self):
        from kazoo.client import KazooClient

        k = KazooClient(hosts=self.connect, timeout=10)
        k.start(timeout=10)
        return k


def zk_json(cluster, path: str):
    """The JSON payload of a znode of the cluster's chroot."""
    import json

    k = cluster.kazoo()
    try:
        return json.loads(k.get(path)[0])
    finally:
        k.stop()
        k.close()


def kafkatool(*args, timeout=60):
    """The kafkatool CLI in a subprocess (as an operator runs it)."""
    import subprocess
    import sys

    from tests.broker.conftest import REPO

    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def wait_formed(bootstraps: list[str], timeout: float = 30.0) -> None:
    """Every broker's Metadata names the controller and all the brokers: the controller's first
    UpdateMetadata reached each of them (until then a broker answers as Kafka's does, with no
    brokers and controller -1, which a client only retries slowly)."""
    from kafkatool.protocol.generated import MetadataRequest
    from tests.broker.wire import WireClient

    def formed(bs: str) -> bool:
        with WireClient(bs) as c:
            r = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        return r.controller_id >= 0 and len(r.brokers) == len(bootstraps)

    for bs in bootstraps:
        wait_for(lambda bs=bs: formed(bs), timeout, f"{bs} to know the whole cluster", step=0.1)


def wait_for(pred, timeout: float, what: str, step: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def _links(follower: BrokerProcess, leader: BrokerProcess) -> dict[str, tuple[int, dict[str, int]]]:
    """``follower``'s connections to ``leader`` by local address: (Recv-Q, tcp_info counters)."""
    where = ("state", "established", "dst", f"{leader.host}:{leader.port}")
    out = {}
    for head, info in tcp_sockets(follower.proc.pid, *where):  # head: "Recv-Q Send-Q local peer users"
        fields = head.split()
        counters = {k: int(v) for k, v in re.findall(r"\b(\w+):(\d+)\b", info)}
        out[fields[2]] = (int(fields[0]), counters)
    return out


def fetch_link(follower: BrokerProcess, leader: BrokerProcess, timeout: float = 30.0) -> str:
    """The local address of ``follower``'s fetch connection to ``leader`` (:func:`fetch_links`)."""
    return fetch_links([follower], leader, timeout)[follower]


def fetch_links(
    followers: list[BrokerProcess], leader: BrokerProcess, timeout: float = 30.0
) -> dict[BrokerProcess, str]:
    """The local address of each follower's fetch connection to ``leader``: the one on which
    its requests keep coming while the partitions it copies from there take no writes (a
    fetch parked for replica.fetch.wait.max.ms, then the next), three of them within
    ``timeout``; its other connections to ``leader`` (to the controller) carry a request now
    and then. The followers are watched together (each needs about three fetch waits)."""
    before = {
        f: {addr: c.get("data_segs_out", 0) for addr, (_, c) in _links(f, leader).items()} for f in followers
    }
    found: dict[BrokerProcess, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in followers:
            if f in found:
                continue
            for addr, (_, c) in _links(f, leader).items():
                if c.get("data_segs_out", 0) - before[f].setdefault(addr, c.get("data_segs_out", 0)) >= 3:
                    found[f] = addr
                    break
        if len(found) == len(followers):
            return found
        time.sleep(0.1)
    missing = ", ".join(f.bootstrap for f in followers if f not in found)
    raise AssertionError(f"no fetch connection from {missing} to {leader.bootstrap} in {timeout}s")


def wait_answered(links: dict[BrokerProcess, str], leader: BrokerProcess, timeout: float = 30.0) -> None:
    """Until the fetch each stopped (SIGSTOP) follower had parked at ``leader``, on its
    connection ``links[follower]`` (:func:`fetch_link`), has its answer, so a write to
    ``leader`` from now on reaches none of them (once running again a follower would read
    and append an answer carrying one).

    The kernel shows it: an answer sent to a stopped process stays in its receive queue
    (Recv-Q > 0); data last received, not sent (tcp_info's ``lastrcv`` below ``lastsnd``,
    milliseconds since), is an answer already read. Equal times are a request sent in the
    tick its predecessor's answer came (an idle partition's fetches are never answered in
    the tick they are sent), so still waiting; a connection gone has nothing parked."""
    start = time.monotonic()
    waiting: list[str] = []
    while time.monotonic() < start + timeout:
        waiting = []
        for follower, addr in links.items():
            with open(f"/proc/{follower.proc.pid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
            if state not in ("T", "t"):
                waiting.append(f"{follower.bootstrap} not stopped yet (state {state})")
                continue
            link = _links(follower, leader).get(addr)
            if link is not None:
                recv_q, c = link
                if recv_q == 0 and c.get("lastrcv", 0) >= c.get("lastsnd", 0):  # absent: 0 ms ago
                    waiting.append(f"{follower.bootstrap} {addr}: {c}")
        if not waiting:
            print(f"fetches parked at {leader.bootstrap} answered in {time.monotonic() - start:.2f}s")
            return
        time.sleep(0.05)
    raise AssertionError(f"fetches parked at {leader.bootstrap} unanswered after {timeout}s: {waiting}")


@pytest.fixture(scope="session")
def zk_module(tmp_path_factory):
    """One ZooKeeper server for every cluster test (each Cluster has a chroot of its own;
    starting and stopping a server per module cost about 0.8 s each)."""
    with run_zookeeper(tmp_path_factory.mktemp("zk")) as hostport:
        yield hostport


#: a SIGKILLed broker leaves the cluster when its ZooKeeper session expires: a test of what
#: follows (failover, a restart), not of the timer, waits 3 s for it instead of 6 (brokers
#: stopped with SIGSTOP for seconds keep the 6 s their sessions need to stay alive)
SHORT_ZK_SESSION = pytest.mark.cluster_config("zookeeper.session.timeout.ms=3000")


#: the `cluster` and `shared_cluster` fixtures' settings; no initial rebalance delay (Kafka's own
#: integration tests run with 0): a group's first join is not held 3 s waiting for members that
#: are not coming
CLUSTER_SETTINGS = (
    "num.partitions=1",
    "offsets.topic.num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
)


@pytest.fixture
def cluster(request, tmp_path, zk_module):
    marker = request.node.get_closest_marker("cluster_config")
    c = Cluster(tmp_path, zk_module, 3, [*CLUSTER_SETTINGS, *(marker.args if marker else ())])
    try:
        yield c.start()
    finally:
        c.discard()
        for b in c.brokers.values():
            if b.proc is not None and b.proc.returncode not in (0, None, -9):
                print(b.log_text()[-4000:])


@pytest.fixture(scope="package")
def shared_cluster(tmp_path_factory, zk_module):
    """One cluster of `cluster`'s settings, started once, for the tests that leave it as they
    found it: each makes topics, users, quotas and transactional ids of names of its own and kills,
    stops or reconfigures no broker, so it runs alone or after any of the others."""
    c = Cluster(tmp_path_factory.mktemp("shared-cluster"), zk_module, 3, list(CLUSTER_SETTINGS))
    try:
        yield c.start()
    finally:
        c.discard()
