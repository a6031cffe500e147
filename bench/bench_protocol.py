"""Wire-codec throughput: decode a ProduceRequest v9 and encode a FetchResponse v12, 100 partitions of ~1 KiB.

Run standalone: ``python bench/bench_protocol.py`` (not part of pytest).  Each
figure is messages/s; the baseline row (one ``bytes()`` copy of the same frame)
makes runs on different machines comparable as ratios.
"""

from __future__ import annotations

import random
import time

from kafkatool.protocol.framing import encode_request, encode_response, parse_request
from kafkatool.protocol.generated import FetchResponse, ProduceRequest
from kafkatool.protocol.generated.fetch_response import FetchableTopicResponse, PartitionData
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData

PARTITIONS = 100
RECORDS_SIZE = 1024


def payloads(seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(RECORDS_SIZE) for _ in range(PARTITIONS)]


def produce_frame(records: list[bytes]) -> bytes:
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name="bench-topic",
                partition_data=[PartitionProduceData(index=i, records=r) for i, r in enumerate(records)],
            )
        ],
    )
    return encode_request(0, 9, 1, "bench-client", req)[4:]


def fetch_response(records: list[bytes]) -> FetchResponse:
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=1000 + i,
                        last_stable_offset=1000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=memoryview(r),
                    )
                    for i, r in enumerate(records)
                ],
            )
        ],
    )


def rate(fn, budget: float = 1.0) -> float:
    fn()
    runs, started = 0, time.perf_counter()
    while True:
        for _ in range(20):
            fn()
        runs += 20
        elapsed = time.perf_counter() - started
        if elapsed >= budget:
            return runs / elapsed


def main() -> None:
    records = payloads()
    frame = produce_frame(records)
    header, req = parse_request(frame)
    assert len(req.topic_data[0].partition_data) == PARTITIONS
    resp = fetch_response(records)
    out = encode_response(1, 12, 1, resp)
    print(f"ProduceRequest v9 frame: {len(frame)} bytes; FetchResponse v12 frame: {len(out)} bytes")
    baseline = rate(lambda: bytes(bytearray(frame)))
    decode = rate(lambda: parse_request(frame))
    encode = rate(lambda: encode_response(1, 12, 1, resp))
    print(f"{'operation':<42}{'msgs/s':>12}{'MB/s':>10}{'partitions/s':>15}")
    for name, r, size in (
        ("baseline: copy the frame", baseline, len(frame)),
        ("decode ProduceRequest v9 (100 partitions)", decode, len(frame)),
        ("encode FetchResponse v12 (100 partitions)", encode, len(out)),
    ):
        print(f"{name:<42}{r:>12.0f}{r * size / 1e6:>10.1f}{r * PARTITIONS:>15.0f}")


if __name__ == "__main__":
    main()
