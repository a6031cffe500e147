"""Property tests: random appends and rolls keep the log's invariants."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.rebuild import rebuild_partition
from tests.log.logtest_util import batch

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 6), st.integers(0, 900), st.integers(-5, 50)),
    st.tuples(st.just("roll"), st.just(0), st.just(0), st.just(0)),
)


def check_invariants(log: Log, expected_count: int) -> None:
    prev_last = -1
    n = 0
    for seg in log.segments:
        batches = list(seg.batches())
        if batches:
            assert batches[0].base_offset == seg.base_offset or seg.base_offset <= batches[0].base_offset
        by_pos = {b.position: b for b in batches}
        for b in batches:
            assert b.base_offset == prev_last + 1  # offsets increase without gaps
            prev_last = b.last_offset
            n += b.last_offset - b.base_offset + 1
        last_off = -1
        last_pos = -1
        for i in range(seg.offset_index.entries):
            off, pos = seg.offset_index.entry(i)
            assert off > last_off and pos > last_pos
            assert by_pos[pos].last_offset == off  # the index agrees with the log
            last_off, last_pos = off, pos
        last_ts = -1
        for i in range(seg.time_index.entries):
            ts, off = seg.time_index.entry(i)
            assert ts > last_ts
            assert ts == max(b.max_timestamp for b in batches if b.last_offset <= off)
            last_ts = ts
    assert n == expected_count == log.log_end_offset


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=40),
    seg_bytes=st.integers(6_000, 20_000),
    interval=st.integers(0, 2_000),
)
def test_random_appends_and_rolls(ops, seg_bytes, interval):
    cfg = LogConfig(segment_bytes=seg_bytes, index_interval_bytes=interval, segment_index_bytes=40_000)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "p-0"
        log = Log(d, cfg)
        count = 0
        ts = 1_000
        for kind, n, size, dts in ops:
            if kind == "roll":
                log.roll()
                continue
            ts += dts
            info = log.append_as_leader(batch(n, size=size, ts=ts), leader_epoch=0)
            assert info.first_offset == count
            count += n
        check_invariants(log, count)
        # every offset can be fetched, starting at the batch that holds it
        for target in range(0, count, max(1, count // 7)):
            data = log.read(target, 1).read_bytes()
            first = R.read_batch(data)
            assert first.base_offset <= target <= first.last_offset
        log.close()
        # the closed segments are exactly what Kafka's recovery would rebuild
        assert all(not r.changed and not r.damaged for r in rebuild_partition(d, cfg))
        log = Log(d, cfg, recovery_point=0)
        check_invariants(log, count)
        log.close()
