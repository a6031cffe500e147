"""Jobs for the worker-process tests, importable by the worker (its module name is the same in
both processes, which a test module's is not)."""

from __future__ import annotations

import threading
import time

#: set in the broker process while a job's answer is being unpickled there
ANSWER_ARRIVING = threading.Event()


def _slow_value(seconds: float) -> float:
    ANSWER_ARRIVING.set()
    time.sleep(seconds)
    return seconds


class _SlowToUnpickle:
    """A job's answer whose unpickling, in the broker, takes ``seconds``: the job is done and
    its worker idle, the broker's thread has not taken the answer yet."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __reduce__(self):
        return (_slow_value, (self.seconds,))


def answer_slowly(seconds: float) -> _SlowToUnpickle:
    return _SlowToUnpickle(seconds)


class FileClock:
    """A clock (ns) kept in a file, so the test and the worker process read the same one; the
    test moves it, and :class:`FileSleep` moves it by the sleeps it is asked for."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self) -> int:
        with open(self.path) as f:
            return int(f.read())

    def advance(self, ns: int) -> None:
        now = self()
        with open(self.path, "w") as f:
            f.write(str(now + ns))


class FileSleep:
    """A sleep that writes what it was asked (s) to a file, one a line, and moves the clock."""

    def __init__(self, path: str, clock: FileClock):
        self.path = path
        self.clock = clock

    def __call__(self, seconds: float) -> None:
        with open(self.path, "a") as f:
            f.write(f"{seconds}\n")
        self.clock.advance(round(seconds * 1e9))

    def asked(self) -> list[float]:
        try:
            with open(self.path) as f:
                return [float(x) for x in f.read().split()]
        except FileNotFoundError:
            return []
