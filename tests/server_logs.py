"""Every ``kafkatool serve`` process the tests start (tests/broker/conftest.BrokerProcess registers
itself here), for the hooks in tests/conftest.py: a failing test's report carries what each broker
logged while the test ran (a CI flake is otherwise diagnosed without the broker's side: its log
lives in a temporary directory that a clean CI clone loses), and a broker a test started but
never stopped is killed once the test is over, not left running for the rest of the session."""

from __future__ import annotations

from pathlib import Path

#: what a failing test's report shows of one broker's log: its last lines, bounded
MAX_LINES = 400
MAX_CHARS = 40_000

_brokers: list = []  # BrokerProcess objects, in the order they were spawned


def register(broker) -> None:
    if broker not in _brokers:
        _brokers.append(broker)


def spawned() -> list:
    return list(_brokers)


def log_sizes() -> dict[Path, int]:
    """Each known broker log's size now: the start of what a test about to run makes them log."""
    sizes = {}
    for b in _brokers:
        try:
            sizes[b.log_path] = b.log_path.stat().st_size
        except OSError:
            pass
    return sizes


def logged_since(sizes: dict[Path, int]) -> list[tuple[str, str]]:
    """(title, text) for each broker log that grew since ``sizes`` (a log not in it: from its
    start), the last MAX_LINES lines of what it grew by."""
    out = []
    seen = set()
    for b in _brokers:
        path = b.log_path
        if path in seen:
            continue
        seen.add(path)
        start = sizes.get(path, 0)
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
        state = "running" if b.alive() else f"exited {b.proc.returncode}" if b.proc else "not started"
        head = f"(last {MAX_LINES} lines) " if cut else ""
        out.append((f"broker {b.bootstrap} log during this test, {head}{path} [{state}]", text))
    return out


_started_in_tests: list = []  # brokers a test body spawned, in the module running now


def note_started_since(before: list) -> None:
    """The brokers spawned since ``before`` (a test's body ran between): killed at its module's end."""
    _started_in_tests.extend(b for b in _brokers if b not in before and b not in _started_in_tests)


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
    for b in _brokers:
        if b.alive():
            b.kill()
