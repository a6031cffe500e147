"""Every ``kafkatool serve`` process the tests start (tests/broker/conftest.BrokerProcess registers
itself at each spawn), for the hooks in tests/conftest.py: a failing test's report carries what
each broker logged while the test ran (a CI flake is otherwise diagnosed without the broker's side:
its log lives in a temporary directory that a clean CI clone loses), and a broker a test body
started and nothing stopped is killed at its module's end, not left running for the session.

What runs per test is bounded by the brokers alive then, not by every broker the session started."""

from __future__ import annotations

from pathlib import Path

#: what a failing test's report shows of one broker's log: its last lines, bounded
MAX_LINES = 400
MAX_CHARS = 40_000

_brokers: list = []  # every BrokerProcess spawned, in the order of its first spawn
_live: list = []  # those that may still run (dropped once found stopped)
_spawns = 0  # spawns so far, restarts included
_started_in_tests: list = []  # brokers a test body spawned first, in the module running now


def register(broker) -> None:
    """Called by BrokerProcess.spawn, for its first start and every restart."""
    global _spawns
    _spawns += 1
    broker._spawn_number = _spawns
    if not getattr(broker, "_registered", False):
        broker._registered = True
        _brokers.append(broker)
    if broker not in _live:
        _live.append(broker)


def known() -> int:
    """How many brokers were spawned so far (first spawns): a test body's are those after it."""
    return len(_brokers)


def mark() -> tuple[int, dict[Path, int]]:
    """Where the broker logs stand before a test: the spawn count, and each running broker's log
    size (the start of what the test makes it log)."""
    _live[:] = [b for b in _live if b.alive()]
    sizes = {}
    for b in _live:
        try:
            sizes[b.log_path] = b.log_path.stat().st_size
        except OSError:
            pass
    return _spawns, sizes


def logged_since(mark_: tuple[int, dict[Path, int]]) -> list[tuple[str, str]]:
    """(title, text) for each broker log that grew since ``mark_``: a broker that ran then from
    its size then, one (re)started since from that start; the last MAX_LINES lines of it."""
    spawns, sizes = mark_
    out = []
    seen = set()
    for b in _brokers:
        path = b.log_path
        if path in seen:
            continue
        if path in sizes:
            start = sizes[path]
        elif b._spawn_number > spawns:
            start = b._log_start
        else:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            continue
        if not data:
            continue
        text = data.decode(errors="replace")
        lines = text.splitlines()
        cut = len(lines) > MAX_LINES or len(text) > MAX_CHARS
        text = "\n".join(lines[-MAX_LINES:])[-MAX_CHARS:]
        state = "running" if b.alive() else f"exited {b.proc.returncode}"
        head = f"(last {MAX_LINES} lines) " if cut else ""
        out.append((f"broker {b.bootstrap} log during this test, {head}{path} [{state}]", text))
    return out


def note_started_since(count: int) -> None:
    """The brokers first spawned after ``known() == count`` (a test's body ran between)."""
    _started_in_tests.extend(_brokers[count:])


def kill_leftovers() -> list[str]:
    """Kill the brokers test bodies of the module that ended started and nothing stopped (a failed
    assertion before the stop, no finally); their addresses. At the module's end, not the test's:
    a test may hand one to a module fixture (test_acls restarts its broker as a new object and
    gives the fixture's object the process), which has stopped it by then."""
    left = [b for b in _started_in_tests if b.alive()]
    for b in left:
        b.kill()
    _started_in_tests.clear()
    return [b.bootstrap for b in left]


def kill_all() -> None:
    for b in _live:
        if b.alive():
            b.kill()
