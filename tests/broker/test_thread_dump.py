"""kill -QUIT: every thread's stack goes to the broker's log, and the broker goes on serving
(what an operator does with a JVM broker that seems stuck: a thread dump)."""

from __future__ import annotations

import os
import signal
import time

from tests.broker.wire import WireClient


def test_sigquit_dumps_every_thread_and_the_broker_goes_on(make_broker, tmp_path):
    b = make_broker(tmp_path / "data", extra=["num.partitions=1"]).start()
    os.kill(b.proc.pid, signal.SIGQUIT)
    deadline = time.monotonic() + 10

    def dumped(text: str) -> bool:
        # the dump is written as it is walked: read on until the current thread's stack
        # reaches the serve command at its bottom
        return "serve" in text.partition("Current thread")[2]

    while not dumped(b.log_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    text = b.log_text()
    assert dumped(text), text[-3000:]
    assert b.alive()
    with WireClient(b.bootstrap) as c:
        c.api_versions()
    assert b.stop() == 0
