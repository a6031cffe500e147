"""Kafka's connection limits on a real ``kafkatool serve``: max.connections.per.ip refuses at once
(one log line), max.connections makes a new connection wait for a free slot."""

from __future__ import annotations

import time

from tests.broker.conftest import BrokerProcess, tcp_sockets
from tests.broker.wire import WireClient


def wait_held(b: BrokerProcess, n: int, timeout: float = 20.0) -> None:
    """Until ``b`` holds ``n`` client connections: it closes a connection's socket right after
    giving its slot back (Broker._release), so one the client closed counts until then."""
    deadline = time.monotonic() + timeout
    held = None
    while time.monotonic() < deadline:
        held = tcp_sockets(b.proc.pid, "state", "connected", "sport", "=", f":{b.port}")
        if len(held) == n:
            return
        time.sleep(0.02)
    raise AssertionError(
        f"{b.bootstrap} holds {len(held or ())} connections, not {n}, after {timeout}s: {held}"
    )


def wait_logged(b: BrokerProcess, line: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in b.log_text():
        assert time.monotonic() < deadline, f"{line!r} not logged in {timeout}s"
        time.sleep(0.02)


def _answered(c: WireClient, timeout: float) -> bool:
    c.sock.settimeout(timeout)
    try:
        c.api_versions()
        return True
    except TimeoutError:
        return False


def held_up_to_the_limit(b: BrokerProcess, limit: int) -> list[WireClient]:
    """``limit`` connections from 127.0.0.1, each answered, and the next one refused with the
    one log line naming the limit; the held ones are returned."""
    wait_held(b, 0)  # the readiness probe's connection is gone
    held = [WireClient(b.bootstrap).__enter__() for _ in range(limit)]
    for c in held:
        c.api_versions()
    extra = WireClient(b.bootstrap).__enter__()
    assert extra.closed_by_peer()
    wait_logged(b, "Rejected connection from /127.0.0.1")
    assert f"configured maximum of {limit} connections" in b.log_text()
    return held


def test_max_connections_per_ip(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["max.connections.per.ip=3"]).start()
    try:
        held = held_up_to_the_limit(b, 3)
        held.pop().close()
        wait_held(b, 2)
        with WireClient(b.bootstrap) as c:
            c.api_versions()
        # one line for the one refusal (written before the refused socket was closed)
        assert b.log_text().count("Rejected connection from /127.0.0.1") == 1
        for c in held:
            c.close()
    finally:
        b.stop()


def test_max_connections_per_ip_overrides(tmp_path):
    """max.connections.per.ip.overrides (KafkaConfig.getMap: host:count pairs) lifts the limit
    for the host it names."""
    b = BrokerProcess(
        tmp_path / "data",
        extra=["max.connections.per.ip=1", "max.connections.per.ip.overrides=10.9.9.9:1 , 127.0.0.1:3"],
    ).start()
    try:
        for c in held_up_to_the_limit(b, 3):
            c.close()
    finally:
        b.stop()


def test_max_connections_waits_for_a_slot(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["max.connections=2"]).start()
    try:
        wait_held(b, 0)  # the readiness probe's connection is gone
        held = [WireClient(b.bootstrap).__enter__() for _ in range(2)]
        for c in held:
            c.api_versions()
        waiting = WireClient(b.bootstrap).__enter__()
        # accepted by the OS, not served: a second of letting time pass, in which a broker
        # ignoring max.connections answers (a wait for something that must not happen)
        assert not _answered(waiting, 1.0)
        held.pop().close()
        waiting.sock.settimeout(10)
        assert waiting.recv(18, 3)[1].error_code == 0  # served once a slot is free
        waiting.close()
        for c in held:
            c.close()
    finally:
        b.stop()
