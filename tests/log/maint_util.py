"""Helpers for the retention and cleaner tests: log dirs written by the engine, records read back."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from kafkatool.formats import records as R
from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.manager import LogManager

NOW = 1_700_000_000_000
DAY = 86_400_000


class Boom(Exception):
    pass


def rec(key: bytes | None, value: bytes | None, ts: int = NOW) -> R.SimpleRecord:
    return R.SimpleRecord(value, key, (), ts)


def batch(records: list[R.SimpleRecord], **kw) -> bytes:
    return R.build_record_batch(records, **kw)


def make_log_dir(
    root: Path, fill, *, config: LogConfig, topic: str = "t", partition: int = 0, hw: int | None = None
) -> Path:
    """A cleanly shut down log dir with one partition; ``fill(log)`` appends.  Returns the partition dir."""
    with LogManager([root], config, clock=lambda: NOW) as lm:
        log = lm.create_log(topic, partition)
        fill(log)
        log.update_high_watermark(log.log_end_offset if hw is None else hw)
    return root / f"{topic}-{partition}"


def records_of(
    part_dir: Path, config: LogConfig | None = None
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record, read-only."""
    log = Log(part_dir, config or LogConfig(), writable=False)
    try:
        out = []
        for b in log.batches():
            if b.is_control:
                continue
            for r in b.records():
                out.append((r.offset, r.key, r.value))
        return out
    finally:
        log.close()


def batches_of(part_dir: Path) -> list[R.Batch]:
    log = Log(part_dir, LogConfig(), writable=False)
    out = []
    try:
        for seg in log.segments:
            data = seg.log_path.read_bytes()
            out.extend(R.iter_batches(data))
    finally:
        log.close()
    return out


def latest_per_key(records) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for off, key, value in records:
        if key is not None:
            out[key] = (off, value)
    return out


def count_fault_points(run) -> list[tuple[str, str]]:
    ops: list[tuple[str, str]] = []
    with fileops.fault_hook(lambda op, path: ops.append((op, path.name))):
        run()
    return ops


def run_raising_at(run, n: int) -> bool:
    """Run with an exception at fault point ``n``; True when it fired."""
    seen = [0]

    def hook(op, path):
        seen[0] += 1
        if seen[0] == n + 1:
            raise Boom(f"{op} {path}")

    try:
        with fileops.fault_hook(hook):
            run()
    except Boom:
        return True
    except SystemExit:
        return True
    return False


def run_killed_at(run, n: int) -> None:
    """Fork; the child runs ``run`` and SIGKILLs itself at fault point ``n`` (nothing after runs)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            seen = [0]

            def hook(op, path):
                seen[0] += 1
                if seen[0] == n + 1:
                    os.kill(os.getpid(), signal.SIGKILL)

            with fileops.fault_hook(hook):
                run()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def reopen_like_broker(log_dir: Path, config: LogConfig):
    """Start-up the way a broker does (marker, checkpoints, recovery), then a clean shutdown."""
    with LogManager([log_dir], config, clock=lambda: NOW) as lm:
        return {tp: log.log_end_offset for tp, log in lm.logs.items()}


_COMMAND = None


def invoke(args: list[str]) -> tuple[int, str]:
    """Run a kafkatool command in-process (the click command is built once: crash tests run it
    hundreds of times); exceptions other than the command's own exits propagate."""
    import contextlib
    import io

    import typer.main

    from kafkatool.cli import app

    global _COMMAND
    if _COMMAND is None:
        _COMMAND = typer.main.get_command(app)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = _COMMAND.main([str(a) for a in args], standalone_mode=False)
    return int(code or 0), out.getvalue()
