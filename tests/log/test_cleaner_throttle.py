"""log.cleaner.io.max.bytes.per.second: Kafka's cleaner throttle (log/throttle.py)."""

from __future__ import annotations

import pytest

from kafkatool.broker.config import BrokerConfig, ConfigError
from kafkatool.log.cleaner import CLEANED_SUFFIX, Cleaner, clean_round_files, cleanable_offsets
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.offset_map import OffsetMap
from kafkatool.log.throttle import Throttler, throttle_for
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


def test_the_default_rate_builds_no_throttle():
    assert throttle_for(float("1.7976931348623157E308")) is None
    assert throttle_for(None) is None
    assert throttle_for(5e6).rate == 5e6


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
    free, _ = clean_round_files(str(tmp_path / "t-0"), cfg, **args)
    assert free.stats.io_bytes == 0 and free.stats.throttled_s == 0.0
    for p in (tmp_path / "t-0").glob(f"*{CLEANED_SUFFIX}"):  # not installed: the log is as before
        p.unlink()
    rnd, groups = clean_round_files(str(tmp_path / "t-0"), cfg, **args, max_io_bytes_per_second=1e12)
    written = sum(
        (tmp_path / "t-0" / f"{g.base_offset:020d}.log{CLEANED_SUFFIX}").stat().st_size for g in groups
    )
    assert written > 0
    assert rnd.stats.io_bytes == 2 * sources + written


def test_a_round_above_the_rate_sleeps_and_says_how_long(tmp_path):
    """The same round with a clock that moves 10 ms at every look (so the check intervals pass)
    and a rate it runs far above: it sleeps, and its statistics say how long."""
    log, cfg = _dirty_log(tmp_path)
    args = _round_args(log, cfg)
    c = Clock()

    def tick() -> int:
        c.now += 10_000_000
        return c.now

    throttler = Throttler(10_000, clock=tick, sleep=c.sleep)
    cleaner = Cleaner(log, cfg, OffsetMap(1 << 20), now_ms=NOW, throttler=throttler)
    rnd = cleaner.clean(args["first_dirty"], args["first_uncleanable"], write=False)
    assert c.sleeps
    assert rnd.stats.throttled_s == pytest.approx(sum(c.sleeps))
    assert rnd.stats.io_bytes == throttler.total > 0
