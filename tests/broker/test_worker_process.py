"""The broker's worker process (broker/worker_process.py): jobs run and answer, failures come
back as exceptions, a dead worker is replaced, a stop interrupts a job, and a worker that loses
its broker at any moment exits without a word on the stderr it shares with the broker's log."""

from __future__ import annotations

import functools
import json
import os
import pickle
import subprocess
import sys
import threading
import time

import pytest

from kafkatool.broker.background import WorkerFailed, Workers, WorkersStopped
from tests.broker.conftest import REPO
from tests.broker.worker_jobs import ANSWER_ARRIVING, answer_slowly


def _long_job(w: Workers):
    """A 30 s job running in the worker, from a thread; ``box["exc"]`` gets what it raises."""
    box = {}

    def job():
        try:
            w.run_in_process(functools.partial(time.sleep, 30))
        except Exception as exc:  # noqa: BLE001
            box["exc"] = exc

    t = threading.Thread(target=job)
    t.start()
    time.sleep(0.5)
    return t, box


def test_jobs_answer_and_fail_like_calls():
    w = Workers()
    try:
        assert w.run_in_process(json.loads, s="[3, 1, 2]") == [3, 1, 2]
        with pytest.raises(json.JSONDecodeError):
            w.run_in_process(json.loads, s="not json")
        # the same process serves the next job
        pid = w.run_in_process(os.getpid)
        assert w.run_in_process(os.getpid) == pid != os.getpid()
    finally:
        w.shutdown()


def test_a_killed_worker_fails_its_job_and_is_replaced():
    w = Workers()
    try:
        pid = w.run_in_process(os.getpid)
        t, box = _long_job(w)
        os.kill(pid, 9)
        t.join(10)
        assert isinstance(box.get("exc"), WorkerFailed), box
        assert w.run_in_process(os.getpid) not in (pid, os.getpid())
    finally:
        w.shutdown()


def test_shutdown_interrupts_a_job_and_kills_the_worker():
    w = Workers()
    pid = w.run_in_process(os.getpid)
    t, box = _long_job(w)
    t0 = time.monotonic()
    w.shutdown()
    t.join(10)
    assert time.monotonic() - t0 < 5
    assert isinstance(box.get("exc"), WorkersStopped), box
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(WorkersStopped):
        w.run_in_process(os.getpid)


def test_a_stop_while_a_finished_jobs_answer_comes_in_ends_the_job_promptly():
    """The flake of test_background_work's stop (over 20 s under load): a cleaning round that
    answered just as the stop began made the cleaner thread take the pool lock twice (a
    deadlock), and the stop waited for that thread forever.  Now the answer is dropped, the
    job raises WorkersStopped (its caller removes what the round wrote) and the stop returns."""
    ANSWER_ARRIVING.clear()
    w = Workers()
    job = w.cleaner.submit(w.run_in_process, answer_slowly, seconds=1.0)
    assert ANSWER_ARRIVING.wait(30)
    stopper = threading.Thread(target=w.shutdown, daemon=True)
    t0 = time.monotonic()
    stopper.start()
    stopper.join(10)
    assert not stopper.is_alive(), "Workers.shutdown did not return"
    assert time.monotonic() - t0 < 5
    with pytest.raises(WorkersStopped):
        job.result(timeout=0)


@pytest.mark.parametrize("feed", [b"", pickle.dumps((json.loads, {"s": "[1]"}))[:7]])
def test_a_worker_that_loses_its_broker_exits_quietly(feed):
    """The broker dies before or while it sends a job (the crash loop's kill -9): the channel
    ends early, and the worker exits 0 with nothing on stderr."""
    child = subprocess.run(
        [sys.executable, "-m", "kafkatool.broker.worker_process", str(os.getpid())],
        input=feed,
        capture_output=True,
        cwd=REPO,
        timeout=30,
    )
    assert (child.returncode, child.stderr) == (0, b"")


def test_a_worker_whose_broker_is_already_gone_exits_quietly():
    # parent pid 1 is not ours: the worker sees its broker died before it could arm PDEATHSIG
    child = subprocess.run(
        [sys.executable, "-m", "kafkatool.broker.worker_process", "1"],
        stdin=subprocess.PIPE,
        capture_output=True,
        cwd=REPO,
        timeout=30,
    )
    assert (child.returncode, child.stderr) == (0, b"")
