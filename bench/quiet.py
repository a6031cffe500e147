"""Start a latency-sensitive figure on a quiet machine, and say how quiet it was.

A bench that follows another one's gigabytes of writes (``run_all.py`` runs ``bench_limits``
before ``bench_stalls``) starts while the kernel still writes the dirty pages back and its
flusher threads take CPU: an "idle" window measured then is not idle.  :func:`wait_quiet`
writes every dirty page back (``os.sync``), then waits, bounded, until the page cache holds
little to write back (``Dirty`` + ``Writeback`` of ``/proc/meminfo``) and the cores are
idle (``/proc/stat``, over a short window, every process counted: on a shared machine
another tenant's work shows here too).  It never waits longer than ``max_seconds``: when
the machine does not settle, the figure is measured anyway and the state says so; the
table prints the state beside the figure (:meth:`Quiet.note`).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: "quiet": at most this much in the page cache to write back, and this share of the cores busy
DIRTY_MB = 32.0
CPU_BUSY = 0.15
WINDOW_S = 1.0  # the CPU is sampled over this long; two quiet windows in a row count
MAX_SECONDS = 60.0


def _dirty_mb() -> float:
    """Dirty + Writeback of /proc/meminfo, MB (nan where there is no /proc)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return float("nan")
    kb = 0
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Dirty", "Writeback"):
            kb += int(rest.split()[0])
    return kb / 1024


def proc_cpu(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far (/proc/PID/stat's utime, stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot, from /proc/stat's first line."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    idle = fields[3] + fields[4]  # idle + iowait
    return total - idle, total


def cpu_busy(window: float = WINDOW_S) -> float:
    """The share of all cores busy over the next ``window`` seconds (0..1, nan without /proc)."""
    a = _cpu_times()
    time.sleep(window)
    b = _cpu_times()
    if a is None or b is None or b[1] == a[1]:
        return float("nan")
    return (b[0] - a[0]) / (b[1] - a[1])


@dataclass
class Quiet:
    #: seconds os.sync took, then seconds waited after it
    sync_s: float
    waited_s: float
    dirty_mb: float
    busy: float
    quiet: bool

    def note(self) -> str:
        state = "quiet" if self.quiet else "NOT quiet"
        return (
            f"started {state}: CPU {self.busy * 100:.0f}% busy, {self.dirty_mb:.0f} MB dirty, "
            f"after sync {self.sync_s:.1f} s + wait {self.waited_s:.1f} s"
        )


def wait_quiet(
    what: str,
    max_seconds: float = MAX_SECONDS,
    dirty_mb: float = DIRTY_MB,
    busy: float = CPU_BUSY,
    log=sys.stderr,
) -> Quiet:
    """``os.sync()``, then wait (at most ``max_seconds``) until two ``WINDOW_S`` windows in a row
    see at most ``dirty_mb`` to write back and at most ``busy`` of the cores busy; print what
    it waited for (to ``log``, None: silent) and return the state the figure starts in."""
    t0 = time.monotonic()
    os.sync()
    t1 = time.monotonic()
    deadline = t1 + max_seconds
    calm = 0
    while True:
        b = cpu_busy()
        d = _dirty_mb()
        ok = b <= busy and d <= dirty_mb
        calm = calm + 1 if ok else 0
        if calm >= 2 or time.monotonic() >= deadline:
            break
    q = Quiet(t1 - t0, time.monotonic() - t1, d, b, calm >= 2)
    if log is not None:
        why = (
            ""
            if q.quiet
            else f" (gave up after {max_seconds:.0f} s; wanted CPU <= {busy * 100:.0f}%, "
            f"dirty <= {dirty_mb:.0f} MB)"
        )
        print(f"before {what}: {q.note()}{why}", file=log, flush=True)
    return q


class OthersLoad:
    """How busy the cores were with other processes than ours while a figure ran.

    ``with OthersLoad(target.cpu_seconds) as load: ...``; then ``load.share`` (0..1 of all
    cores, nan without /proc) is the machine's busy time (``/proc/stat``) less this
    process's, its waited-for children's (``os.times``: the bench's reader processes, once
    joined) and what the given callables count (``bench_broker.Target.cpu_seconds``: the
    broker and its processes, alive at both ends).  On this shared machine another
    engineer's test suite shows here: a figure that ran beside it says so."""

    def __init__(self, *cpu_seconds):
        self.cpu_seconds = cpu_seconds
        self.share = float("nan")

    def _ours(self) -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system + sum(f() for f in self.cpu_seconds)

    def __enter__(self) -> OthersLoad:
        self._machine = _cpu_times()
        self._ours0 = self._ours()
        return self

    def __exit__(self, *exc) -> None:
        end = _cpu_times()
        if self._machine is None or end is None or end[1] == self._machine[1]:
            return
        tick = os.sysconf("SC_CLK_TCK")
        busy = (end[0] - self._machine[0]) / tick
        elapsed = (end[1] - self._machine[1]) / tick  # summed over the cores
        self.share = max(0.0, busy - (self._ours() - self._ours0)) / elapsed

    def note(self) -> str:
        return f"other processes kept {self.share * 100:.0f}% of the cores busy meanwhile"
