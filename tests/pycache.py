"""Compiled modules for the processes the tests and benches start.

This machine sets PYTHONDONTWRITEBYTECODE, so every broker and CLI process compiled about
350 modules from source before it did anything: a broker was ready after 1.3-1.4 s, 0.5 s
with a bytecode cache (an installed kafkatool has its modules compiled at install time).
A cache outside the tree (PYTHONPYCACHEPREFIX) keeps __pycache__ directories out of it,
which is what that variable is there for.
"""

from __future__ import annotations

import os
import tempfile


def use_bytecode_cache() -> None:
    """Let child processes (which inherit ``os.environ``) write and read a bytecode cache
    under the temp dir, when PYTHONDONTWRITEBYTECODE would make each compile from source."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(
            tempfile.gettempdir(), f"kafkatool-pycache-{os.getuid()}"
        )
        del os.environ["PYTHONDONTWRITEBYTECODE"]
