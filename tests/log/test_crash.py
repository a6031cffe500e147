"""Crash tests: interrupt recovery at every file operation, then reopen.

Two kinds of interruption, both real: an exception raised at each fault point
of kafkatool.log.fileops (the operation never happens), and a forked child
process SIGKILLed at each fault point (nothing after it runs, no cleanup).
After the interruption the dir is reopened the way a broker would (unclean
start-up) and, separately, the recover tool is re-run; either way every valid
record before the damage is there exactly once, and nothing after it.
"""

from __future__ import annotations

import os
import shutil
import signal

import pytest

from kafkatool.log import fileops
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.recovery import QUARANTINE_DIR, apply_plan, plan_partition
from tests.log.logtest_util import batch

CFG = LogConfig(segment_bytes=3_000, index_interval_bytes=500)


class Boom(Exception):
    pass


def damaged_partition(root):
    """Four-plus segments, a CRC error in the second, leftovers of a cleaner run, a torn tail."""
    d = root / "t-0"
    log = Log(d, CFG)
    for i in range(30):
        log.append_as_leader(batch(1, size=300, pid=5, epoch=0, seq=i), leader_epoch=1 + i // 10)
    bases = [s.base_offset for s in log.segments]
    log.close()
    victim = d / f"{bases[1]:020d}.log"
    data = bytearray(victim.read_bytes())
    data[900] ^= 0x40
    victim.write_bytes(data)
    (d / f"{bases[2]:020d}.log.cleaned").write_bytes(b"partial cleaner output")
    (d / f"{bases[3]:020d}.index.deleted").write_bytes(b"x")
    return d


def expected_offsets(d) -> list[int]:
    plan = plan_partition(d, CFG, recovery_point=0)
    return list(range(plan.log_end_after))


def offsets_after_reopen(d) -> list[int]:
    log = Log(d, CFG, recovery_point=0)  # an unclean start-up, from the beginning
    try:
        offs = []
        for b in log.batches():
            offs.extend(r.offset for r in b.records())
        return offs
    finally:
        log.close()


def count_fault_points(tmp_path) -> int:
    d = damaged_partition(tmp_path / "count")
    ops = []
    with fileops.fault_hook(lambda op, path: ops.append((op, path.name))):
        apply_plan(plan_partition(d, CFG, recovery_point=0), CFG, salvage=True, stamp="T")
    assert len(ops) > 10
    return len(ops)


def test_exception_at_every_file_operation(tmp_path):
    total = count_fault_points(tmp_path)
    template = damaged_partition(tmp_path / "template")
    want = expected_offsets(template)
    assert 0 < len(want) < 30
    for n in range(total):
        run = tmp_path / f"run{n}"
        shutil.copytree(template.parent, run)
        d = run / "t-0"
        calls = 0

        def hook(op, path, n=n):
            nonlocal calls
            calls += 1
            if calls == n + 1:
                raise Boom(f"{op} {path}")

        with pytest.raises(Boom), fileops.fault_hook(hook):
            apply_plan(plan_partition(d, CFG, recovery_point=0), CFG, salvage=True, stamp="T")
        # a broker starting on this dir
        copy = tmp_path / f"reopen{n}"
        shutil.copytree(run, copy)
        assert offsets_after_reopen(copy / "t-0") == want, f"interrupted at fault point {n}"
        # the tool run again finishes the job, and keeps the cut bytes
        plan = plan_partition(d, CFG, recovery_point=0)
        apply_plan(plan, CFG, salvage=True, stamp="T2")
        assert offsets_after_reopen(d) == want, f"rerun after fault point {n}"
        kept = list((d / QUARANTINE_DIR).rglob("*.log"))
        assert kept, f"nothing quarantined after fault point {n}"


def _run_killed_at(part_dir, n: int) -> int:
    """Fork; the child runs the recovery and SIGKILLs itself at fault point ``n``."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            calls = 0

            def hook(op, path):
                nonlocal calls
                calls += 1
                if calls == n:
                    os.kill(os.getpid(), signal.SIGKILL)

            with fileops.fault_hook(hook):
                apply_plan(plan_partition(part_dir, CFG, recovery_point=0), CFG, salvage=True, stamp="T")
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


def test_kill_at_every_file_operation(tmp_path):
    total = count_fault_points(tmp_path)
    template = damaged_partition(tmp_path / "template")
    want = expected_offsets(template)
    for n in range(1, total + 1):
        run = tmp_path / f"kill{n}"
        shutil.copytree(template.parent, run)
        status = _run_killed_at(run / "t-0", n)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
        assert offsets_after_reopen(run / "t-0") == want, f"killed at fault point {n}"


def merge_first_segments(d, count: int, hook=None) -> None:
    """What the cleaner does: copy the first ``count`` segments into one ``.cleaned`` segment
    and swap it in (Log.replace_segments), optionally with a fault hook installed."""
    from kafkatool.log.segment import CLEANED_SUFFIX, Segment

    log = Log(d, CFG, had_clean_shutdown=True)
    old = log.segments[:count]
    new = Segment(d, old[0].base_offset, CFG, suffix=CLEANED_SUFFIX, create=True)
    for seg in old:
        for b in seg.batches():
            new.append(b.last_offset, b.max_timestamp, b.last_offset, bytes(b.raw()))
    new.on_become_inactive()
    try:
        if hook is None:
            log.replace_segments([new], old)
        else:
            with fileops.fault_hook(hook):
                log.replace_segments([new], old)
    finally:
        log._close_segments(trim=False)
        new.close(trim=False)


def test_swap_interrupted_at_every_file_operation(tmp_path):
    template = tmp_path / "template" / "t-0"
    log = Log(template, CFG)
    for i in range(30):
        log.append_as_leader(batch(1, size=300, ts=1000 + i), leader_epoch=1)
    log.close()
    ops = []
    probe = tmp_path / "probe"
    shutil.copytree(template.parent, probe)
    merge_first_segments(probe / "t-0", 3, hook=lambda op, path: ops.append(op))
    assert len(ops) >= 6
    for n in range(len(ops)):
        run = tmp_path / f"swap{n}"
        shutil.copytree(template.parent, run)
        calls = 0

        def hook(op, path, n=n):
            nonlocal calls
            calls += 1
            if calls == n + 1:
                raise Boom(f"{op} {path}")

        with pytest.raises(Boom):
            merge_first_segments(run / "t-0", 3, hook=hook)
        assert offsets_after_reopen(run / "t-0") == list(range(30)), f"interrupted at fault point {n}"
        names = os.listdir(run / "t-0")
        assert not any(x.endswith((".swap", ".cleaned", ".deleted")) for x in names)
