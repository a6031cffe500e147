"""Kafka's rate measures (broker/rates.py: Rate, SimpleRate, TokenBucket), the one mechanism of
the client quotas and the replication throttles, and ReplicationQuotaManager's rules
(broker/replication_quota.py): the bound from the broker's own dynamic config only, records
counted whatever the bound, the throttled-replicas parse; and FetchResponse.sizeOf
(handlers/fetch.answer_size), the size both the consumer quota and the leader's replication
quota record."""

from __future__ import annotations

import os
import uuid

import pytest

from kafkatool.broker import rates
from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.handlers.fetch import answer_size
from kafkatool.broker.network import FileSlice
from kafkatool.broker.replication_quota import LONG_MAX, ReplicationQuota
from kafkatool.protocol.framing import encode_response
from kafkatool.protocol.generated import FetchResponse
from kafkatool.protocol.generated.fetch_response import FetchableTopicResponse, PartitionData


def test_rate_window_and_throttle_formula():
    """Rate over 11 one-second samples: the window is at least 10 s from the first record, and
    the throttle is (observed - bound) / bound x window, Java's Math.round."""
    r = rates.Rate(bound=1000.0)
    r.record(5000, 0)
    assert r.window_size(0) == 10_000
    assert r.measure(0) == 500.0 and r.throttle_ms(0) == 0
    r.record(10_000, 500)  # 15,000 bytes over 10.5 s
    assert r.window_size(500) == 10_500
    assert r.throttle_ms(500) == rates.java_round((15_000 / 10.5 - 1000) / 1000 * 10_500)
    assert r.throttle_ms(500, cap_ms=1000) == 1000  # the request quota's bound: one window
    # samples older than 11 windows are forgotten
    assert r.measure(20_000) == 0.0


def test_simple_rate_counts_a_first_burst_over_one_window():
    """SimpleRate (ReplicationQuotaManager's): the time since the oldest sample, at least one
    window, so 5 s of the bound recorded at once is 5x the bound, where Rate spreads it over the
    10 windows it assumes and lets it pass."""
    burst = 5000
    r, s = rates.Rate(bound=1000.0), rates.SimpleRate(bound=1000.0)
    r.record(burst, 0)
    s.record(burst, 0)
    assert r.measure(0) == 500.0 and not r.exceeded(0)
    assert s.window_size(0) == 1000 and s.measure(0) == 5000.0 and s.exceeded(0)
    assert s.window_size(400) == 1000  # still within the first window
    assert s.measure(4000) == 1250.0 and s.exceeded(4000)
    assert s.measure(5000) == 1000.0 and not s.exceeded(5000)  # at the bound: acceptable
    # a sample per window, the oldest reused after 11: the sum is over what the samples hold
    for t in range(1000, 11_001, 1000):
        s.record(1000, t)
    assert s.window_size(11_000) == 10_000  # the sample of time 0 was reused at 11 s
    assert s.measure(11_000) == pytest.approx(11 * 1000 / 10.0)  # the burst is gone with it
    assert s.measure(40_000) == 0.0  # every sample older than 11 windows: reset


def test_token_bucket_burst_and_debt():
    b = rates.TokenBucket(bound=2.0)  # 2 partitions/s, 11 x 1 s of burst: 22
    assert b.measure(100_000) == 22.0  # full at first use (refilled since time 0)
    b.record(30, 100_000)
    assert b.tokens == -8.0 and b.throttle_ms(100_000) == 4000
    assert b.throttle_ms(102_000) == 2000  # refilled at the rate


class Clock:
    def __init__(self):
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _quota(cfg: BrokerConfig, replicas=None, clock=None) -> ReplicationQuota:
    return ReplicationQuota(
        cfg,
        "leader.replication.throttled.rate",
        cfg.int("replication.quota.window.num"),
        cfg.int("replication.quota.window.size.seconds"),
        (replicas or {}).get,
        2,
        clock or Clock(),
    )


def test_bound_is_the_brokers_own_dynamic_value_changed_in_place():
    """BrokerConfigHandler: the per-broker dynamic value is the bound (Long.MAX_VALUE unset);
    the cluster-wide default and server.properties are not applied (Kafka 3.7, KAFKA-10190).
    A change applies at the next check and keeps what was recorded (updateQuota)."""
    rate = "leader.replication.throttled.rate"
    clock = Clock()
    cfg = BrokerConfig({rate: "10"}, {}, {rate: "10"})
    q = _quota(cfg, clock=clock)
    assert q.upper_bound() == LONG_MAX
    q.record(50_000)  # recorded whatever the bound
    assert not q.exceeded()
    cfg.dynamic[rate] = "10000"  # as a /config/brokers/2 change takes it
    assert q.upper_bound() == 10_000 and q.exceeded()  # the bytes before the bound count
    clock.ms += 4_000
    assert q.exceeded()  # 50,000 B over 4 s
    clock.ms += 1_000
    assert not q.exceeded()  # over 5 s: 10,000 B/s, at the bound
    cfg.dynamic[rate] = "9000"
    assert q.exceeded()
    del cfg.dynamic[rate]
    assert q.upper_bound() == LONG_MAX and not q.exceeded()


def test_rate_zero_lets_nothing_after_the_first_bytes():
    """A bound of 0 (atLeast(0)): nothing recorded is within it; one fetch's bytes are over it
    until the samples expire (11 windows)."""
    rate = "leader.replication.throttled.rate"
    clock = Clock()
    q = _quota(BrokerConfig({}, {rate: "0"}, {}), clock=clock)
    assert not q.exceeded()
    q.record(1)
    assert q.exceeded()
    clock.ms += 10_999
    assert q.exceeded()
    clock.ms += 1
    assert not q.exceeded()


def test_throttled_replicas_parse():
    """parseThrottledPartitions: ``*`` (alone) is every partition; else the partitions of the
    ``partition:broker`` entries naming this broker (2)."""
    replicas = {"all": "*", "some": "0:1,1:2, 3:2 ,4:3", "none": "", "spaced": " * "}
    q = _quota(BrokerConfig({}, {}, {}), replicas)
    assert q.is_throttled("all", 7) and q.is_throttled("spaced", 0)
    assert [p for p in range(6) if q.is_throttled("some", p)] == [1, 3]
    assert not q.is_throttled("none", 0) and not q.is_throttled("unknown", 0)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
@pytest.mark.parametrize("n", [0, 1, 126, 127, 20_000])
def test_answer_size_is_fetch_response_size_of(tmp_path, version, n):
    """answer_size with the records as file slices is 4 + the encoded size of the same answer
    with the records in place (FetchResponse.sizeOf), whatever the length's varint takes."""
    path = tmp_path / "seg"
    path.write_bytes(b"x" * (n + 10))
    fd = os.open(path, os.O_RDONLY)
    try:

        def pd(i, records=b""):
            return PartitionData(partition_index=i, high_watermark=5, last_stable_offset=5, records=records)

        a, b = pd(0), pd(1)
        kw = {"topic_id": uuid.UUID(int=1)} if version >= 13 else {"topic": "t"}
        topics = [FetchableTopicResponse(partitions=[a, b], **kw)]
        slices = {id(a): [FileSlice(fd, 0, n // 2), FileSlice(fd, 5, n - n // 2)]}
        got = answer_size(version, topics, slices)
        a.records = b"x" * n
        whole = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics)
        frame = encode_response(1, version, 0, whole)
        header = 4 + (1 if version >= 12 else 0)
        assert got == len(frame) - header
    finally:
        os.close(fd)
