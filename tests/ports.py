"""Loopback ports for the processes the tests start (brokers, ZooKeeper, Spark)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: ports this test process handed out (never twice: a broker may not have bound one yet)
_HANDED_OUT: set[int] = set()
#: how many ports below the ephemeral range to choose from
_SPAN = 12000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port that is free now, for a process the test starts to listen on.

    It is taken from below the kernel's ephemeral range (net.ipv4.ip_local_port_range): the
    kernel gives ephemeral ports to every outgoing connection (a test's client, a broker's
    connection to ZooKeeper or to another broker), and one could become such a connection's
    local port between this check and the broker's bind, which then fails with EADDRINUSE
    (seen in CI: a cluster fixture's second listener).  Below the range only listeners take
    ports.  A port is never handed out twice by one test process."""
    hi = _ephemeral_low() - 1
    lo = max(1024, hi - _SPAN)
    for _ in range(2000):
        port = random.randint(lo, hi)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {lo}-{hi}")
