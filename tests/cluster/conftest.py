"""Three ``kafkatool serve`` processes joined through a real ZooKeeper (Debian's package)."""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest

from tests.broker.conftest import BrokerProcess
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
        for b in self.brokers.values():
            with contextlib.suppress(Exception):
                if b.alive():
                    b.stop(timeout=60)

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


@pytest.fixture(scope="module")
def zk_module(tmp_path_factory):
    with run_zookeeper(tmp_path_factory.mktemp("zk")) as hostport:
        yield hostport


@pytest.fixture
def cluster(tmp_path, zk_module):
    c = Cluster(tmp_path, zk_module, 3, ["num.partitions=1", "offsets.topic.num.partitions=3"])
    try:
        yield c.start()
    finally:
        c.stop()
        for b in c.brokers.values():
            if b.proc is not None and b.proc.returncode not in (0, None, -9):
                print(b.log_text()[-4000:])
