"""broker/tasks.stop_tasks: a shutdown never hangs on a task that swallowed its cancellation
(Python 3.11's wait_for does when the awaited future completes at the same moment)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time


def test_a_task_that_swallows_cancellations_is_cancelled_again():
    from kafkatool.broker.tasks import stop_tasks

    swallowed = []

    async def stubborn_loop():
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if len(swallowed) == 2:
                    raise
                swallowed.append(1)  # as wait_for does when its future completes meanwhile

    async def main():
        t = asyncio.get_running_loop().create_task(stubborn_loop())
        await asyncio.sleep(0)
        t0 = time.monotonic()
        await stop_tasks([t, None], "test", timeout=10)
        return t.cancelled(), time.monotonic() - t0

    cancelled, took = asyncio.run(main())
    assert cancelled and len(swallowed) == 2 and took < 5


def test_a_task_that_never_stops_is_left_after_the_timeout(caplog):
    from kafkatool.broker.tasks import stop_tasks

    release = []

    async def deaf():
        while not release:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass

    async def main():
        t = asyncio.get_running_loop().create_task(deaf())
        await asyncio.sleep(0)
        t0 = time.monotonic()
        await stop_tasks([t], "deaf", timeout=1.0)
        took = time.monotonic() - t0
        release.append(1)
        with contextlib.suppress(asyncio.CancelledError):
            await t
        return took

    with caplog.at_level(logging.WARNING, logger="kafkatool.broker"):
        took = asyncio.run(main())
    assert 0.9 < took < 5
    assert "1 deaf task(s) did not stop within 1s" in caplog.text
