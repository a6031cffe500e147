"""serve --read-only on a dir that was not shut down cleanly serves exactly the data a
writable start-up would keep: the recovery scan decides, not a header walk (issue 12)."""

from __future__ import annotations

import struct
import time

from confluent_kafka import Consumer, TopicPartition
from segments import make_partition

from tests.broker.conftest import BrokerProcess


def _consume_all(bootstrap: str, topic: str, timeout: float = 30) -> list[int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ro-valid-end",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    offsets: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            offsets.append(m.offset())
    finally:
        c.close()
    return offsets


def test_read_only_serves_up_to_where_recovery_would_cut(tmp_path):
    data = tmp_path / "data"
    pdir = make_partition(data, "ro-0", segments=3, batches_per_segment=10, codec_cycle=(0,))
    segs = sorted(pdir.glob("*.log"))
    # a CRC-breaking flip in the 4th batch of the second segment (offsets 50..99 there)
    buf = bytearray(segs[1].read_bytes())
    pos = 0
    for _ in range(3):
        pos += 12 + struct.unpack_from(">i", buf, pos + 8)[0]
    buf[pos + 100] ^= 0xFF
    segs[1].write_bytes(buf)
    # no .kafka_cleanshutdown: start-up recovery would run from offset 0, cut at offset 65
    # and delete the third segment; the read-only broker must serve exactly offsets 0..64
    b = BrokerProcess(data, read_only=True).start()
    try:
        offsets = _consume_all(b.bootstrap, "ro")
    finally:
        b.stop()
    assert offsets == list(range(65))
    assert segs[2].exists() and segs[1].read_bytes() == bytes(buf)  # nothing changed on disk
