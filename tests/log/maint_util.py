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


def overlong_varint_batch(
    base_offset: int,
    key: bytes,
    value: bytes,
    field: str,
    *,
    timestamp: int = NOW,
    width: int | None = None,
    top: int = 0,
) -> bytes:
    """A one-record v2 batch with a valid CRC whose ``field`` (length, timestamp_delta,
    offset_delta, key_length, value_length) is written with more bytes than Kafka's reader
    takes: 6 for an int varint (readVarint stops at 5), 11 for the timestamp varlong (or
    ``width`` bytes, the last one OR-ed with ``top``: bits a 5-byte int varint carries past
    the 32nd, which Kafka drops).  The value loses as many bytes as the padding adds, so
    the batch is as long as a well-formed one with ``value``: it can replace one in a
    segment byte for byte."""
    import struct

    import crc32c

    from kafkatool.formats.varint import write_uvarint, zigzag32

    def enc(name: str, v: int) -> bytes:
        z = zigzag32(v)
        if name != field:
            return write_uvarint(z)
        groups = [(z >> (7 * i)) & 0x7F for i in range(n)]
        return bytes(g | 0x80 for g in groups[:-1]) + bytes((groups[-1] | top,))

    n = width or (11 if field == "timestamp_delta" else 6)
    pad = n - 1
    value = value[: len(value) - pad]
    body = (
        b"\x00"
        + enc("timestamp_delta", 0)
        + enc("offset_delta", 0)
        + enc("key_length", len(key))
        + key
        + enc("value_length", len(value))
        + value
        + b"\x00"
    )
    head = bytearray(R.build_record_batch([rec(key, b"")], base_offset=base_offset)[:61])
    struct.pack_into(">q", head, 27, timestamp)  # base timestamp
    struct.pack_into(">q", head, 35, timestamp)  # max timestamp
    out = head + enc("length", len(body)) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def bad_header_count_batch(base_offset: int, key: bytes, value: bytes, *, timestamp: int = NOW) -> bytes:
    """A one-record v2 batch with a valid CRC whose record claims 50 headers with no byte left
    for them (DefaultRecord.readFrom: "Found invalid number of record headers"), as long as
    the well-formed batch of the same record: it can replace one in a segment byte for byte."""
    import struct

    import crc32c

    out = bytearray(R.build_record_batch([rec(key, value, timestamp)], base_offset=base_offset))
    assert out[-1] == 0  # the header count of the batch's only (last) record
    out[-1] = 100  # zig-zag 50
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)
