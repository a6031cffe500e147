"""Kafka's connection limits on a real ``kafkatool serve``: max.connections.per.ip refuses at once
(one log line), max.connections makes a new connection wait for a free slot."""

from __future__ import annotations

import time

from tests.broker.conftest import BrokerProcess
from tests.broker.wire import WireClient


def _answered(c: WireClient, timeout: float) -> bool:
    c.sock.settimeout(timeout)
    try:
        c.api_versions()
        return True
    except TimeoutError:
        return False


def test_max_connections_per_ip(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["max.connections.per.ip=3"]).start()
    try:
        time.sleep(0.3)  # the readiness probe's connection is gone
        held = [WireClient(b.bootstrap).__enter__() for _ in range(3)]
        for c in held:
            c.api_versions()
        extra = WireClient(b.bootstrap).__enter__()
        assert extra.closed_by_peer()
        time.sleep(0.2)
        assert b.log_text().count("Rejected connection from /127.0.0.1") == 1
        assert "configured maximum of 3 connections" in b.log_text()
        held.pop().close()
        time.sleep(0.3)
        with WireClient(b.bootstrap) as c:
            c.api_versions()
        for c in held:
            c.close()
    finally:
        b.stop()


def test_max_connections_waits_for_a_slot(tmp_path):
    b = BrokerProcess(tmp_path / "data", extra=["max.connections=2"]).start()
    try:
        time.sleep(0.3)
        held = [WireClient(b.bootstrap).__enter__() for _ in range(2)]
        for c in held:
            c.api_versions()
        waiting = WireClient(b.bootstrap).__enter__()
        assert not _answered(waiting, 1.0)  # accepted by the OS, not served
        held.pop().close()
        waiting.sock.settimeout(10)
        assert waiting.recv(18, 3)[1].error_code == 0  # served once a slot is free
        waiting.close()
        for c in held:
            c.close()
    finally:
        b.stop()
