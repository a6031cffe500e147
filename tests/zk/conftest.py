"""A real ZooKeeper server (Debian's package) for the zk tests, one per session.

Fixtures:
- ``zk_server``: "127.0.0.1:PORT" of a standalone server on a free loopback port.
- ``zk_chroot``: a fresh, unique chroot ("/t<hex>") per test, so tests never see each other.
- ``run_zookeeper(dir)``: a context manager starting another private server (for tests that
  need the ensemble root to themselves).
- ``kafka_cluster``: the default healthy Kafka layout seeded into ``zk_chroot``
  (see kafka_layout.py); its broker sessions end with the test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.zk.kafka_layout import SeededCluster, default_spec, seed_cluster

ZK_JAR = "/usr/share/java/zookeeper.jar"
ZK_CONF_DIR = "/etc/zookeeper/conf"
#: Debian's zookeeper.jar manifest names netty-handler and -transport but not what they need
#: (codec, resolver, unix-common): a Netty (TLS) server port fails with ClassNotFoundException
NETTY_JARS = ":".join(
    f"/usr/share/java/{j}.jar"
    for j in ("netty-codec", "netty-resolver", "netty-transport-native-unix-common")
)


def _four_letter(port: int, word: bytes, host: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=1.0) as s:
        s.sendall(word)
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


@contextlib.contextmanager
def run_zookeeper(
    base: Path,
    *,
    extra_cfg: tuple[str, ...] = (),
    jvm_flags: tuple[str, ...] = (),
    address: str = "127.0.0.1",
) -> Iterator[str]:
    """Start a standalone ZooKeeper with its data in ``base``; yields "127.0.0.1:PORT" (the plain
    client port).  ``extra_cfg``: more zoo.cfg lines (a secureClientPort, auth providers);
    ``jvm_flags``: e.g. the server's JAAS file."""
    java = shutil.which("java")
    if java is None or not os.path.exists(ZK_JAR):
        pytest.fail("the zk tests need java and Debian's zookeeper package (run scripts/setup.sh)")
    (base / "data").mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = base / "zoo.cfg"
    cfg.write_text(
        "\n".join(
            [
                "tickTime=500",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={base / 'data'}",
                f"clientPort={port}",
                f"clientPortAddress={address}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr",
                "maxClientCnxns=0",
                "minSessionTimeout=1000",
                "maxSessionTimeout=20000",
                *extra_cfg,
                "",
            ]
        )
    )
    # The jar's manifest Class-Path names its dependency jars in /usr/share/java;
    # /etc/zookeeper/conf supplies log4j.properties (CLASSPATH from /etc/zookeeper/conf/environment).
    log = open(base / "zookeeper.out", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.root.logger=WARN,CONSOLE",
            *jvm_flags,
            "-cp",
            f"{ZK_CONF_DIR}:{ZK_JAR}"
            + (f":{NETTY_JARS}" if any("Netty" in line for line in extra_cfg) else ""),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(cfg),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=base,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                out = (base / "zookeeper.out").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ZooKeeper exited with {proc.returncode}: {out}")
            try:
                if _four_letter(port, b"ruok", address) == b"imok" and b"Mode:" in _four_letter(
                    port, b"srvr", address
                ):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("ZooKeeper did not answer within 30 s")
            time.sleep(0.1)
        yield f"{address}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory) -> Iterator[str]:
    """One ZooKeeper for the whole session; tests isolate themselves with ``zk_chroot``."""
    with run_zookeeper(tmp_path_factory.mktemp("zookeeper")) as connect:
        yield connect


@pytest.fixture
def zk_chroot(zk_server) -> str:
    """A connect string with a fresh chroot: "127.0.0.1:PORT/t<hex>" (the chroot node is not created)."""
    return f"{zk_server}/t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def kafka_cluster(zk_chroot) -> SeededCluster:
    hosts, chroot = zk_chroot.split("/", 1)
    cluster = seed_cluster(hosts, "/" + chroot, default_spec())
    try:
        yield cluster
    finally:
        cluster.close()
