"""Wire fuzz (issue 18): mutated, truncated and oversized frames for every API and version a
real ``kafkatool serve`` advertises, built from the protocol codecs, seeded.

The broker must never crash nor log a traceback, must answer or close each connection (a
marker ApiVersions request after each fuzzed frame is answered, or the connection is closed;
never a hang: only a request the broker may hold, a Fetch long poll or a group's join, may
stay unanswered), stay within a stated memory bound, and serve a real client afterwards.  The
default run sends 3,000 frames; ``pytest -m slow tests/faults`` sends 1,000,000
(``FUZZ_CASES`` overrides either).  A failure names its seed: ``FUZZ_SEED=n``."""

from __future__ import annotations

import os
import random
import socket
import struct
import time

import pytest

from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.framing import encode_request
from kafkatool.protocol.generated import ApiVersionsRequest
from tests.broker.conftest import BrokerProcess, rss_mb
from tests.broker.wire import WireClient

#: the broker's resident memory after the fuzz, whatever was sent (it starts near 60 MB)
RSS_BOUND_MB = 300
MARKER_CORRELATION = 0x7EADBEEF
_MARKER = encode_request(
    18,
    3,
    MARKER_CORRELATION,
    "fuzz",
    ApiVersionsRequest(client_software_name="f", client_software_version="1"),
)


def _seeds(advertised) -> list[tuple[int, int, bytes]]:
    """(api key, version, a well-formed frame) for every advertised API and version."""
    out = []
    for key, lo, hi in advertised:
        info = API_BY_KEY.get(key)
        for v in range(lo, hi + 1):
            frame = None
            if info is not None:
                try:
                    frame = encode_request(key, v, 1, "fuzz", info.request())
                except Exception:  # a default body that does not encode: the header alone
                    frame = None
            if frame is None:
                body = struct.pack(">hhi", key, v, 1) + b"\x00\x04fuzz"
                frame = struct.pack(">i", len(body)) + body
            out.append((key, v, frame))
    return out


def _mutate(frame: bytes, rng: random.Random) -> tuple[bytes, bool]:
    """(bytes to send, whether the size prefix still matches what follows)."""
    body = bytearray(frame[4:])
    kind = rng.randrange(8)
    if kind == 0:  # bit flips anywhere after the header's api key
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncated body, size consistent
        del body[rng.randrange(4, max(5, len(body))) :]
    elif kind == 2:  # random tail
        body += rng.randbytes(rng.randrange(1, 64))
    elif kind == 3:  # overwrite a random stretch
        i = rng.randrange(len(body))
        body[i : i + 8] = rng.randbytes(8)
    elif kind == 4:  # any api key / version
        struct.pack_into(
            ">hh",
            body,
            0,
            rng.choice([rng.randrange(-5, 100), rng.randrange(-32768, 32767)]),
            rng.randrange(-3, 30),
        )
    elif kind == 5:  # an int16/int32 length or count field turned huge or negative
        if len(body) > 12:
            i = rng.randrange(8, len(body) - 3)
            struct.pack_into(">i", body, i, rng.choice([-1, -2, 0x7FFFFFFF, 1 << 24, 65535]))
    elif kind == 6:  # a size prefix that lies (longer than sent): the broker waits, we hang up
        return struct.pack(">i", len(body) + rng.randrange(1, 1 << 20)) + bytes(body), False
    else:  # oversized or negative size prefix
        size = rng.choice([-1, -(1 << 31), 0, 1 << 30, 0x7FFFFFFF, 104_857_601])
        return struct.pack(">i", size) + bytes(body[: rng.randrange(len(body) + 1)]), False
    return struct.pack(">i", len(body)) + bytes(body), True


def _answered_or_closed(sock: socket.socket, deadline: float) -> str:
    """Read frames until the marker's response ('answered') or EOF/reset ('closed')."""
    buf = b""
    while time.monotonic() < deadline:
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        if not chunk:
            return "closed"
        buf += chunk
        while len(buf) >= 8:
            size = struct.unpack_from(">i", buf)[0]
            if len(buf) < 4 + size:
                break
            corr = struct.unpack_from(">i", buf, 4)[0]
            buf = buf[4 + size :]
            if corr == MARKER_CORRELATION:
                return "answered"
    return "pending"


#: APIs whose answer the broker may hold back: a Fetch long poll (a fuzzed max_wait_ms), a
#: JoinGroup or SyncGroup waiting for the group; their marker is waited for briefly (a held
#: answer is legitimate, and waiting longer tells nothing), any other's for long (it answers at
#: once: no answer in that time is a hang)
HOLDING_APIS = frozenset({1, 11, 14})
HELD_WAIT_S = 0.25
ANSWER_WAIT_S = 5.0


def run_fuzz(broker: BrokerProcess, n: int, seed: int) -> dict[str, int]:
    with WireClient(broker.bootstrap) as c:
        resp = c.api_versions()
    advertised = [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys]
    seeds = _seeds(advertised)
    rng = random.Random(seed)
    counts = {"answered": 0, "closed": 0, "pending": 0, "hung_up": 0}
    sock = None
    for i in range(n):
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        _key, _v, frame = rng.choice(seeds)
        data, consistent = _mutate(frame, rng)
        try:
            sock.sendall(data)
            if consistent:
                sock.sendall(_MARKER)
        except (BrokenPipeError, ConnectionResetError):
            counts["closed"] += 1
            sock.close()
            sock = None
            continue
        if not consistent:
            counts["hung_up"] += 1
            sock.close()
            sock = None
            continue
        # a fuzzed long poll or a join may hold its answer back; anything else answers at once
        (key,) = struct.unpack_from(">h", data, 4)
        held = key in HOLDING_APIS
        outcome = _answered_or_closed(sock, time.monotonic() + (HELD_WAIT_S if held else ANSWER_WAIT_S))
        assert outcome != "pending" or held, (
            f"FUZZ_SEED={seed}: case {i} (API key {key}) neither answered nor closed in {ANSWER_WAIT_S}s"
        )
        counts[outcome] += 1
        if outcome != "answered":
            sock.close()
            sock = None
        if i % 250 == 0:
            assert broker.alive(), f"FUZZ_SEED={seed}: the broker died at case {i}"
            with WireClient(broker.bootstrap, timeout=5) as c:
                assert c.api_versions().error_code == 0, f"FUZZ_SEED={seed}: no answer after case {i}"
    if sock is not None:
        sock.close()
    return counts


def _real_client_round_trip(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    topic = f"after-fuzz-{os.getpid()}"
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-fuzz", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(20)]


def _check(broker: BrokerProcess, counts: dict, seed: int) -> None:
    assert broker.alive(), f"FUZZ_SEED={seed}: the broker died"
    rss = rss_mb(broker.proc.pid)
    assert rss < RSS_BOUND_MB, f"FUZZ_SEED={seed}: RSS {rss:.0f} MB after the fuzz"
    _real_client_round_trip(broker.bootstrap)
    log = broker.log_text()
    assert "Traceback" not in log, f"FUZZ_SEED={seed}: traceback in the broker log:\n{log[-4000:]}"
    assert " ERROR " not in log and "handler failed" not in log, log[-4000:]
    assert counts["answered"] > 0 and counts["closed"] > 0


@pytest.fixture
def fuzz_broker(tmp_path):
    b = BrokerProcess(
        tmp_path / "data",
        extra=["num.partitions=1", "group.initial.rebalance.delay.ms=0", "socket.request.max.bytes=1048576"],
    ).start()
    with WireClient(b.bootstrap) as c:  # something for fetches, offsets and groups to find
        from tests.broker.test_protocol import batch, create_topic, produce

        create_topic(c, "fuzz")
        produce(c, "fuzz", batch(5))
    yield b
    b.kill()


def test_wire_fuzz(fuzz_broker):
    seed = int(os.environ.get("FUZZ_SEED", "18"))
    counts = run_fuzz(fuzz_broker, int(os.environ.get("FUZZ_CASES", "3000")), seed)
    _check(fuzz_broker, counts, seed)


@pytest.mark.slow
def test_wire_fuzz_slow(fuzz_broker):
    seed = int(os.environ.get("FUZZ_SEED", "1800"))
    counts = run_fuzz(fuzz_broker, int(os.environ.get("FUZZ_CASES", "1000000")), seed)
    _check(fuzz_broker, counts, seed)
