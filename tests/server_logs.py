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


def kill_leftovers(before: list) -> list[str]:
    """Kill the brokers spawned since ``before`` that still run; their addresses. A process an
    older broker object took over (a test restarts a module fixture's broker as a new object and
    hands it the process: ``b.proc = b2.proc``) is that fixture's to stop."""
    left = []
    adopted = {id(b.proc) for b in before if b.proc is not None}
    for b in _brokers:
        if b not in before and b.alive() and id(b.proc) not in adopted:
            left.append(b.bootstrap)
            b.kill()
    return left


def kill_all() -> None:
    for b in _brokers:
        if b.alive():
            b.kill()
