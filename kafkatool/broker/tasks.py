"""Stopping the broker's asyncio tasks, bounded.

Python 3.11's ``asyncio.wait_for`` swallows a cancellation that arrives as the awaited
future completes (fixed in 3.12), so a loop task cancelled once may go on for ever and a
shutdown that gathers it never ends.  Every stop goes through :func:`stop_tasks`: it cancels
again until each task is done, and gives up (with a warning) after ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("kafkatool.broker")


async def stop_tasks(tasks, what: str, timeout: float = 10.0) -> None:
    pending = {t for t in tasks if t is not None and not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            log.warning("shutdown: %d %s task(s) did not stop within %.0fs", len(pending), what, timeout)
            return
        for t in pending:
            t.cancel()
        _done, pending = await asyncio.wait(pending, timeout=min(left, 0.5))
