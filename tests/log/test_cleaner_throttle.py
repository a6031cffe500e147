"""log.cleaner.io.max.bytes.per.second: Kafka's cleaner throttle (log/throttle.py), one per
cleaner (Kafka's LogCleaner.throttler) living across rounds and partitions."""

from __future__ import annotations

import sys

import pytest

from kafkatool.broker.config import BrokerConfig, ConfigError
from kafkatool.log.cleaner import CLEANED_SUFFIX, Cleaner, clean_round_files, cleanable_offsets, compact
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.offset_map import OffsetMap
from kafkatool.log.throttle import CHECK_INTERVAL_MS, REPORT_BYTES, Throttler
from tests.log.maint_util import NOW, batch, rec


class Clock:
    """A clock the test moves (ns), and the sleeps asked of it (s), which move it too."""

    def __init__(self):
        self.now = 0
        self.sleeps: list[float] = []

    def __call__(self) -> int:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += int(s * 1e9)


def test_within_an_interval_nothing_sleeps_and_bytes_add_up():
    c = Clock()
    t = Throttler(1000, clock=c, sleep=c.sleep)
    c.now = 200_000_000  # 200 ms: inside the 300 ms check interval
    t.maybe_throttle(10_000)
    assert c.sleeps == [] and t.observed == 10_000


def test_above_the_rate_it_sleeps_what_makes_the_interval_take_its_time():
    c = Clock()
    t = Throttler(1000, clock=c, sleep=c.sleep)  # 1000 B/s
    c.now = 400_000_000
    t.maybe_throttle(600)  # 600 B in 400 ms: 1500 B/s; at 1000 B/s they take 600 ms
    assert c.sleeps == [pytest.approx(0.2)]
    assert t.observed == 0  # a new interval
    c.now += 400_000_000
    t.maybe_throttle(300)  # 750 B/s: below the rate
    assert len(c.sleeps) == 1
    assert t.slept == pytest.approx(0.2)


def test_the_default_rate_counts_and_never_sleeps():
    """Kafka's Double.MAX_VALUE: the intervals run and reset as at any rate, nothing sleeps."""
    c = Clock()
    t = Throttler(sys.float_info.max, clock=c, sleep=c.sleep)
    for _ in range(10):
        c.now += 400_000_000
        t.maybe_throttle(10**12)
    assert c.sleeps == [] and t.total == 10**13 and t.observed == 0


def test_a_rate_change_keeps_the_interval_and_its_bytes():
    """Kafka's reconfigure calls updateDesiredRatePerSec on the cleaner's one throttler: the
    bytes of the interval in progress are judged at the new rate when it ends (a new throttler
    would start from nothing and let them pass)."""
    c = Clock()
    t = Throttler(1000, clock=c, sleep=c.sleep)
    c.now = 100_000_000
    t.maybe_throttle(200)  # inside the interval: 200 B counted at 1000 B/s, no decision yet
    assert t.update_rate(100) and not t.update_rate(100)
    c.now = 400_000_000
    t.maybe_throttle(10)  # 210 B in 400 ms; at 100 B/s they take 2100 ms: 1700 ms more
    assert c.sleeps == [pytest.approx(1.7)]


def test_the_sleep_rounds_half_up_as_javas_math_round():
    c = Clock()
    t = Throttler(1000, clock=c, sleep=c.sleep)
    c.now = 400_000_000
    t.maybe_throttle(4005)  # 4005 ms at 1000 B/s, 400 elapsed: 3605 ms
    c.now += 1_000_000_000
    t.maybe_throttle(1)
    c.now += 300_500_000
    t.maybe_throttle(301)  # 301 ms - 300 ms elapsed (whole ms): 1 ms
    assert c.sleeps == [pytest.approx(3.605), pytest.approx(0.001)]
    c2 = Clock()
    t2 = Throttler(2000, clock=c2, sleep=c2.sleep)
    c2.now = 301_000_000
    t2.maybe_throttle(1603)  # 801.5 ms - 301 ms = 500.5: Java rounds half up to 501
    assert c2.sleeps == [pytest.approx(0.501)]


def test_a_rate_that_is_not_above_zero_is_refused_at_start():
    for bad in ("0", "-1", "fast"):
        with pytest.raises(ConfigError, match="log.cleaner.io.max.bytes.per.second"):
            BrokerConfig.load(None, ["log.dirs=/nonexistent", f"log.cleaner.io.max.bytes.per.second={bad}"])


def _dirty_log(tmp_path) -> tuple[Log, LogConfig]:
    cfg = LogConfig(segment_bytes=4_000, cleanup_policy=("compact",))
    log = Log(tmp_path / "t-0", cfg, clock=lambda: NOW)
    for i in range(120):
        log.append_as_leader(batch([rec(b"k%d" % (i % 7), b"v" * 60)]), 0)
    log.update_high_watermark(log.log_end_offset)
    return log, cfg


def _round_args(log: Log, cfg: LogConfig) -> dict:
    rng = cleanable_offsets(log, cfg, None, NOW)
    return dict(
        log_start_offset=log.log_start_offset,
        first_dirty=rng.first_dirty,
        first_uncleanable=rng.first_uncleanable,
        last_records={},
        now_ms=NOW,
        map_bytes=1 << 20,
        load_factor=0.9,
    )


def test_a_throttled_round_reports_every_byte_it_reads_and_writes(tmp_path):
    """A real round in a log dir, as the broker's worker runs it: the dirty segments are read
    twice (offset map, then cleaning) and the cleaned ones written; the throttle hears of all
    of it.  Unthrottled (the default rate) nothing is counted."""
    log, cfg = _dirty_log(tmp_path)
    args = _round_args(log, cfg)
    sources = sum(s.size for s in log.segments if s.base_offset < args["first_uncleanable"])
    log.close()
    free, _, t = clean_round_files(
        str(tmp_path / "t-0"), cfg, **args, throttler=Throttler(sys.float_info.max)
    )
    assert free.stats.io_bytes == t.total > 0 and free.stats.throttled_s == 0.0
    first = free.stats.io_bytes
    for p in (tmp_path / "t-0").glob(f"*{CLEANED_SUFFIX}"):  # not installed: the log is as before
        p.unlink()
    rnd, groups, t = clean_round_files(str(tmp_path / "t-0"), cfg, **args, throttler=t)
    written = sum(
        (tmp_path / "t-0" / f"{g.base_offset:020d}.log{CLEANED_SUFFIX}").stat().st_size for g in groups
    )
    assert written > 0
    assert t.total == 2 * first  # the throttler lives on; a round's statistics are its share
    assert rnd.stats.io_bytes == 2 * sources + written


def test_a_round_above_the_rate_sleeps_and_says_how_long(tmp_path):
    """The same round with a clock that moves 100 ms at every look (so the check intervals
    pass) and a rate it runs far above: it sleeps, and its statistics say how long."""
    log, cfg = _dirty_log(tmp_path)
    args = _round_args(log, cfg)
    c = Clock()

    def tick() -> int:
        c.now += 100_000_000
        return c.now

    throttler = Throttler(10_000, clock=tick, sleep=c.sleep)
    cleaner = Cleaner(log, cfg, OffsetMap(1 << 20), now_ms=NOW, throttler=throttler)
    rnd = cleaner.clean(args["first_dirty"], args["first_uncleanable"], write=False)
    assert c.sleeps
    assert rnd.stats.throttled_s == pytest.approx(sum(c.sleeps))
    assert rnd.stats.io_bytes == throttler.total > 0


def _small_dirty_logs(tmp_path, count: int) -> list[tuple[Log, LogConfig]]:
    cfg = LogConfig(segment_bytes=1_000, cleanup_policy=("compact",))
    logs = []
    for p in range(count):
        log = Log(tmp_path / f"t-{p}", cfg, clock=lambda: NOW)
        for i in range(12):
            log.append_as_leader(batch([rec(b"k%d" % (i % 3), b"v" * 60)]), 0)
        log.update_high_watermark(log.log_end_offset)
        logs.append((log, cfg))
    return logs


def _compact_all(logs, throttler_for_partition, c: Clock) -> int:
    """compact() over each log in turn; each round takes no time on the test's clock, which
    moves 50 ms between partitions (only the sleeps move it further).  Returns the bytes."""
    total = 0
    for log, cfg in logs:
        res = compact(
            log,
            cfg,
            checkpoint=None,
            now_ms=NOW,
            offset_map=OffsetMap(1 << 20),
            write=False,
            throttler=throttler_for_partition(),
        )
        assert res.rounds and res.error is None
        total += res.stats.io_bytes
        c.now += 50_000_000
    return total


def test_many_short_rounds_together_are_throttled_to_the_rate(tmp_path):
    """Rounds shorter than the 300 ms check interval, one partition after another: with the
    cleaner's one throttler their bytes add up across rounds and partitions, and every check
    sleeps what brings the bytes so far back to the rate.  A throttler per round (what the
    cleaner did before) never reaches a check and never sleeps."""
    logs = _small_dirty_logs(tmp_path, 20)
    c = Clock()
    per_round = _compact_all(logs, lambda: Throttler(1000, clock=c, sleep=c.sleep), c)
    assert per_round > 0 and c.sleeps == []

    # the natural rate is per_round bytes a second (20 x 50 ms); half of it is asked
    rate = per_round / 2.0
    c = Clock()
    one = Throttler(rate, clock=c, sleep=c.sleep)
    total = _compact_all(logs, lambda: one, c)
    assert total == per_round == one.total
    assert len(c.sleeps) >= 2  # every check (7 rounds: 350 ms, then the sleep) was above the rate
    # the bytes up to the last check took their time at the rate: not less (throttled), not
    # more (no sleep beyond it); each sleep is whole ms, Math.round of the ms left
    checked = one.total - one.observed
    assert checked / rate == pytest.approx(one.period_start / 1e9, abs=0.001 * len(c.sleeps))
    assert one.slept == pytest.approx(sum(c.sleeps))
    assert one.slept > 0.6


def test_a_rounds_statistics_are_its_share_of_the_one_throttler(tmp_path):
    (log_a, cfg), (log_b, _) = _small_dirty_logs(tmp_path, 2)
    c = Clock()
    one = Throttler(100, check_interval_ms=CHECK_INTERVAL_MS, clock=c, sleep=c.sleep)
    stats = []
    for log in (log_a, log_b):
        res = compact(
            log, cfg, checkpoint=None, now_ms=NOW, offset_map=OffsetMap(1 << 20), write=False, throttler=one
        )
        stats.append(res.stats)
        c.now += 400_000_000
    assert stats[0].io_bytes + stats[1].io_bytes == one.total
    assert stats[0].throttled_s == 0.0  # the first round ends before any check
    assert stats[1].throttled_s == pytest.approx(one.slept)
    assert one.slept > 0


class _Recording(Throttler):
    """A real throttler that also keeps what it was told, report by report."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.reports: list[int] = []

    def maybe_throttle(self, n: int) -> None:
        self.reports.append(n)
        super().maybe_throttle(n)


def test_bytes_are_reported_in_runs_of_a_read_buffer(tmp_path):
    """Kafka's cleaner tells its throttler of each read buffer it fills (256 KiB by default)
    and of what it writes from it, not of every batch: a round reports in runs of
    REPORT_BYTES, each pass over a segment and each cleaned segment ending with its rest."""
    cfg = LogConfig(segment_bytes=1 << 21, cleanup_policy=("compact",))
    log = Log(tmp_path / "t-0", cfg, clock=lambda: NOW)
    for i in range(300):
        log.append_as_leader(batch([rec(b"k%d" % i, b"v" * 2000)]), 0)  # every key once: all kept
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    source = log.segments[0].size
    assert source > 2 * REPORT_BYTES
    t = _Recording(sys.float_info.max)
    rnd = Cleaner(log, cfg, OffsetMap(1 << 20), now_ms=NOW, throttler=t).clean(
        0, log.segments[-1].base_offset, write=False
    )
    assert t.total == rnd.stats.io_bytes == 3 * source  # the map's pass, the cleaning pass, the writes
    batch_size = source // 300
    full = [n for n in t.reports if n >= REPORT_BYTES]
    assert all(n < REPORT_BYTES + batch_size for n in full)
    assert len(t.reports) == 3 * (source // (REPORT_BYTES + batch_size) + 1)
