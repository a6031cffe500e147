"""The broker's worker process: runs CPU-bound background jobs (a cleaning round) off the
broker's interpreter lock, on the same files (DESIGN.md "Background work off the event loop").

One job at a time over two pipes: the broker writes a pickled ``(function, kwargs)`` to the
child's stdin and reads a pickled ``(ok, value)`` back from its stdout.  The child is an
ordinary ``python -m kafkatool.broker.worker_process`` (not multiprocessing's spawn), so that
every way it can lose its broker is one quiet exit: the kernel kills it when the broker dies
(``PR_SET_PDEATHSIG``), and a closed or half-written channel ends its loop without a
traceback in the log it shares with the broker.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """The kernel kills this process when the broker dies (``kill -9`` included), so no orphan
    goes on writing ``.cleaned`` files into a log dir a restarted broker now owns."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the broker's shutdown still kills us
        pass
    if os.getppid() != parent_pid:  # the broker died before the line above took effect
        os._exit(0)


def _reply(out, ok: bool, value) -> None:
    try:
        data = pickle.dumps((ok, value))
    except Exception as exc:  # noqa: BLE001 (an unpicklable result or exception still answers)
        data = pickle.dumps((False, RuntimeError(f"{type(value).__name__}: {value} ({exc})")))
    out.write(data)
    out.flush()


def main(parent_pid: int) -> None:
    die_with_parent(parent_pid)
    # the broker stops us; a Ctrl-C sent to the terminal's process group is the broker's to handle
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print never corrupts the channel
    while True:
        try:
            fn, kwargs = pickle.load(inp)
        except (EOFError, OSError, pickle.UnpicklingError, ValueError):
            return  # the broker closed the channel, or died mid-request
        try:
            result = (True, fn(**kwargs))
        except Exception as exc:  # noqa: BLE001 (the broker logs it with the job's name)
            result = (False, exc)
        try:
            _reply(out, *result)
        except OSError:
            return  # the broker is gone


if __name__ == "__main__":
    main(int(sys.argv[1]))
