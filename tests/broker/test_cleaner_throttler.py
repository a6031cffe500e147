"""The broker's cleaner has one throttler (Kafka's LogCleaner.throttler) for every round of
every partition: each round runs in the worker process with a copy, whose accounting comes
back, so many small partitions cleaned one after another are throttled together; a dynamic
change of log.cleaner.io.max.bytes.per.second changes its rate and keeps its accounting.

A real Broker (storage in a temp dir, no sockets) and its real worker process; the throttler's
clock and sleep are files both processes read (tests/broker/worker_jobs.py), so what is
asserted is the throttler's decisions, not a timing."""

from __future__ import annotations

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.maintenance import CleanerState
from kafkatool.broker.server import Broker
from kafkatool.formats import records as R
from tests.broker.worker_jobs import FileClock, FileSleep

RATE = "log.cleaner.io.max.bytes.per.second"
PARTITIONS = 12


@pytest.fixture
def broker(tmp_path):
    b = Broker(
        BrokerConfig.load(
            None, [f"log.dirs={tmp_path / 'data'}", "listeners=PLAINTEXT://127.0.0.1:0", f"{RATE}=1e12"]
        )
    )
    b.open_storage()
    b.create_topic(
        "c",
        PARTITIONS,
        {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"},
    )
    for p in range(PARTITIONS):
        lg = b.manager.logs[("c", p)]
        for i in range(12):
            rec = R.SimpleRecord(b"v" * 60, b"k%d" % (i % 3), (), 1_700_000_000_000)
            lg.append_as_leader(R.build_record_batch([rec]), 0)
        lg.update_high_watermark(lg.log_end_offset)
    yield b
    b.close_storage()


def _clean(state: CleanerState, clock: FileClock) -> list:
    """Cleaner passes until none is due (one partition each, as the cleaner thread runs them),
    the clock moved 50 ms after each; the results."""
    mgr = state.broker.manager
    done = []
    for _ in range(PARTITIONS + 1):
        logs = list(mgr.logs.items())
        cleaned = state.clean_filthiest(logs, {tp: mgr.cleaner_offset(tp) for tp, _ in logs})
        if cleaned is None:
            break
        state.finish(cleaned)
        assert cleaned[2].error is None
        done.append(cleaned)
        clock.advance(50_000_000)
    return done


def _state_on_file_clock(broker, tmp_path):
    """The broker's cleaner state with its throttler on a clock and sleep kept in files, which
    the worker process's copy reads and advances too."""
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")
    clock = FileClock(str(clock_file))
    sleep = FileSleep(str(tmp_path / "sleeps"), clock)
    state = CleanerState(broker)
    throttler = state.throttler
    throttler.clock, throttler.sleep, throttler.period_start = clock, sleep, 0
    return state, throttler, clock, sleep


def test_one_throttler_for_every_round_of_every_partition(broker, tmp_path):
    state, throttler, clock, sleep = _state_on_file_clock(broker, tmp_path)
    assert throttler.rate == 1e12

    done = _clean(state, clock)
    assert {tp for tp, *_ in done} == {("c", p) for p in range(PARTITIONS)}  # every partition once
    per_round = [result.stats.io_bytes for _, _, result, _ in done]
    assert all(per_round)
    # the same object, its accounting the sum of every round's (each ran in the worker process)
    assert state.throttler is throttler
    assert throttler.total == sum(per_round)
    # at 1e12 B/s nothing slept, but the intervals ran across rounds: one closed after 300 ms
    assert sleep.asked() == []
    assert 0 < throttler.observed < throttler.total
    assert throttler.period_start > 0


def test_small_partitions_cleaned_one_after_another_are_throttled_together(broker, tmp_path):
    state, throttler, clock, sleep = _state_on_file_clock(broker, tmp_path)
    # a dynamic change (IncrementalAlterConfigs on the broker): taken at the next round
    changed, notes = broker.config.take_dynamic({True: ("the test", {RATE: "20000"})})
    assert changed and not notes

    done = _clean(state, clock)
    assert len(done) == PARTITIONS and state.throttler is throttler and throttler.rate == 20000
    asked = sleep.asked()
    # every round alone is shorter than the 300 ms check interval (the clock stands still in
    # it); together, 7 rounds make an interval, whose bytes the sleep brings to the rate
    assert asked and throttler.slept == pytest.approx(sum(asked))
    checked = throttler.total - throttler.observed
    assert checked / 20000 == pytest.approx(throttler.period_start / 1e9, abs=0.001 * len(asked))
    assert sum(r.stats.throttled_s for _, _, r, _ in done) == pytest.approx(sum(asked))

    # a second change keeps the interval in progress and its bytes (Kafka's
    # updateDesiredRatePerSec), judged at the new rate at the next check
    observed, start = throttler.observed, throttler.period_start
    broker.config.take_dynamic({True: ("the test", {RATE: "10"})})
    for p in range(2):
        lg = broker.manager.logs[("c", p)]
        for i in range(12):
            rec = R.SimpleRecord(b"w" * 60, b"k%d" % (i % 3), (), 1_700_000_000_000)
            lg.append_as_leader(R.build_record_batch([rec]), 0)
        lg.update_high_watermark(lg.log_end_offset)
    clock.advance(400_000_000)
    at_check = clock()  # the clock stands still until the next round's first batch
    before = len(asked)
    more = _clean(state, clock)
    assert more and throttler.rate == 10
    first_sleep = sleep.asked()[before]
    # that batch closes the interval, which still holds the bytes from before the change:
    # (observed + the batch) at 10 B/s, less the whole ms since the interval began
    assert observed > 0
    assert first_sleep >= observed / 10 - (at_check - start) / 1e9 - 0.001
