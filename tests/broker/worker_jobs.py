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
