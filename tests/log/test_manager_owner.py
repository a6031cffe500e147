"""LogManager as the one owner of a log dir: tool mode, topic delete, dir moves, and a static
check that no other module takes a dir's lock or writes its checkpoints or marker."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from kafkatool.formats import checkpoint as ck
from kafkatool.log import lock
from kafkatool.log.config import LogConfig
from kafkatool.log.manager import LogManager
from tests.log.logtest_util import all_records, batch
from tests.log.test_manager import other_process_lock  # noqa: F401 (fixture)

PACKAGE = Path(__file__).resolve().parents[2] / "kafkatool"
CFG = LogConfig(segment_bytes=2_000)


def _broker_dir(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    mgr = LogManager([d], CFG)
    for tp in (("a", 0), ("b", 0)):
        lg = mgr.create_log(*tp)
        for _ in range(10):
            lg.append_as_leader(batch(1, size=300), 0)
        lg.update_high_watermark(10)
    mgr.set_cleaner_offset(("b", 0), 4)
    mgr.checkpoint_cleaner_offsets()
    mgr.shutdown()
    return d


def _cp(d: Path, name: str) -> dict:
    return ck.decode_offset_checkpoint((d / name).read_bytes())


def test_tool_mode_changes_only_the_partitions_it_touched(tmp_path):
    d = _broker_dir(tmp_path)
    before = {n: (d / n).stat().st_ino for n in os.listdir(d) if "checkpoint" in n}
    with LogManager([d], CFG, load=False) as mgr:
        assert mgr.logs == {}  # nothing is opened until a run asks
        assert (d / ck.CLEAN_SHUTDOWN_FILE).exists()  # not removed before the first change
        lg = mgr.open_log(d / "a-0", ("a", 0))
        mgr.begin_changes(d)
        assert not (d / ck.CLEAN_SHUTDOWN_FILE).exists()
        lg.increment_log_start_offset(7)
        mgr.close_log(("a", 0))
    assert _cp(d, ck.LOG_START_OFFSET_CHECKPOINT) == {("a", 0): 7}
    # the other partitions' entries are kept; unchanged files are not rewritten
    assert _cp(d, ck.RECOVERY_POINT_CHECKPOINT) == {("a", 0): 10, ("b", 0): 10}
    assert _cp(d, ck.CLEANER_OFFSET_CHECKPOINT) == {("b", 0): 4}
    after = {n: (d / n).stat().st_ino for n in os.listdir(d) if "checkpoint" in n}
    assert after[ck.LOG_START_OFFSET_CHECKPOINT] != before[ck.LOG_START_OFFSET_CHECKPOINT]
    for name in (
        ck.REPLICATION_OFFSET_CHECKPOINT,
        ck.CLEANER_OFFSET_CHECKPOINT,
        ck.RECOVERY_POINT_CHECKPOINT,
    ):
        assert after[name] == before[name], name
    assert (d / ck.CLEAN_SHUTDOWN_FILE).exists()  # the run succeeded: the marker is back
    mgr = LogManager([d], CFG)
    assert mgr.state_of(d).had_clean_shutdown and mgr.get_log("a", 0).log_start_offset == 7
    mgr.shutdown()


def test_tool_mode_failure_leaves_an_unclean_dir_and_releases_the_lock(tmp_path):
    d = _broker_dir(tmp_path)
    with pytest.raises(RuntimeError), LogManager([d], CFG, load=False) as mgr:
        mgr.open_log(d / "a-0", ("a", 0))
        mgr.begin_changes(d)
        raise RuntimeError("the run failed half-way")
    assert not (d / ck.CLEAN_SHUTDOWN_FILE).exists()  # the next start-up recovers
    assert not lock.is_locked(d)
    mgr = LogManager([d], CFG)
    assert not mgr.state_of(d).had_clean_shutdown
    assert [o for o, _ in all_records(mgr.get_log("a", 0))] == list(range(10))
    mgr.shutdown()


def test_tool_mode_refused_while_another_process_holds_the_dir(tmp_path, other_process_lock):  # noqa: F811
    d = _broker_dir(tmp_path)
    other_process_lock(d)
    with pytest.raises(lock.LogDirLockedError):
        LogManager([d], CFG, load=False)
    ro = LogManager([d], CFG, writable=False, load=False)
    assert ro.state_of(d).locked_by_other
    ro.shutdown()


def test_read_only_mode_writes_nothing(tmp_path):
    d = _broker_dir(tmp_path)
    snapshot = {n: (d / n).read_bytes() for n in os.listdir(d) if (d / n).is_file()}
    with LogManager([d], CFG, writable=False) as mgr:
        assert set(mgr.logs) == {("a", 0), ("b", 0)}
        with pytest.raises(OSError):
            mgr.begin_changes(d)
    assert {n: (d / n).read_bytes() for n in os.listdir(d) if (d / n).is_file()} == snapshot


def test_lower_to_log_ends_clamps_recovery_points_and_high_watermarks(tmp_path):
    d = _broker_dir(tmp_path)
    with LogManager([d], CFG, load=False) as mgr:
        assert mgr.lower_to_log_ends(d, {("a", 0): 6, ("b", 0): 50})
    assert _cp(d, ck.RECOVERY_POINT_CHECKPOINT) == {("a", 0): 6, ("b", 0): 10}
    assert _cp(d, ck.REPLICATION_OFFSET_CHECKPOINT) == {("a", 0): 6, ("b", 0): 10}


def test_delete_log_renames_and_forgets_its_entries(tmp_path):
    d = _broker_dir(tmp_path)
    mgr = LogManager([d], CFG)
    doomed = mgr.delete_log("b", 0)
    assert doomed is not None and doomed.name.startswith("b-0.") and doomed.name.endswith("-delete")
    assert not (d / "b-0").exists() and mgr.get_log("b", 0) is None
    for name in (
        ck.RECOVERY_POINT_CHECKPOINT,
        ck.REPLICATION_OFFSET_CHECKPOINT,
        ck.CLEANER_OFFSET_CHECKPOINT,
    ):
        assert ("b", 0) not in _cp(d, name), name
    mgr.remove_deleted([doomed])
    assert not doomed.exists()
    mgr.shutdown()
    mgr = LogManager([d], CFG)
    assert set(mgr.logs) == {("a", 0)}
    mgr.shutdown()


def _copy_rest(old: Path, fut: Path) -> None:
    """The log-dir move's copy step: every file of the partition dir into the future dir."""
    for n in os.listdir(old):
        if (old / n).is_file():
            (fut / n).write_bytes((old / n).read_bytes())


def test_replace_with_future_moves_the_log_and_its_checkpoint_entries(tmp_path):
    d1 = _broker_dir(tmp_path)
    d2 = tmp_path / "logs2"
    mgr = LogManager([d1, d2], CFG)
    future = mgr.new_future_dir(("b", 0), d2)

    new = mgr.replace_with_future(("b", 0), future, d2, _copy_rest)
    assert mgr.log_dir_of("b", 0) == d2 and new.dir == d2 / "b-0" and not (d1 / "b-0").exists()
    assert [name for name in os.listdir(d1) if name.startswith("b-0")] == []
    assert _cp(d2, ck.CLEANER_OFFSET_CHECKPOINT) == {("b", 0): 4}
    assert ("b", 0) not in _cp(d1, ck.CLEANER_OFFSET_CHECKPOINT)
    mgr.shutdown()
    assert _cp(d2, ck.RECOVERY_POINT_CHECKPOINT) == {("b", 0): 10}
    assert _cp(d1, ck.RECOVERY_POINT_CHECKPOINT) == {("a", 0): 10}
    mgr = LogManager([d1, d2], CFG)
    assert [o for o, _ in all_records(mgr.get_log("b", 0))] == list(range(10))
    mgr.shutdown()


def _calls(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if isinstance(base, ast.Name):
                out.add(f"{base.id}.{node.func.attr}")
            else:
                out.add(node.func.attr)
        elif isinstance(node, ast.Attribute) and node.attr in (
            "CLEAN_SHUTDOWN_FILE",
            "encode_offset_checkpoint",
        ):
            out.add(node.attr)
    return out


OWNER_ONLY = {
    "lock.acquire",
    "lock.release",
    "lock.locked",
    "encode_offset_checkpoint",
    "CLEAN_SHUTDOWN_FILE",
}


def test_only_the_log_manager_locks_a_dir_or_writes_its_checkpoints():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("log/manager.py", "log/lock.py") or rel.startswith(("formats/", "protocol/generated/")):
            continue
        used = _calls(ast.parse(path.read_text(), str(path))) & OWNER_ONLY
        if used:
            offenders.append(f"{rel}: {sorted(used)}")
    assert offenders == []


def test_replace_with_future_keeps_the_logs_config_when_the_topic_has_no_logconfig(tmp_path):
    """A topic whose stored overrides the engine refused since its log was made (cluster mode:
    no manager.topic_configs entry, Kafka's logs keep theirs): the moved log keeps its own
    config, not the broker's defaults."""
    d1 = _broker_dir(tmp_path)
    d2 = tmp_path / "logs2"
    mgr = LogManager([d1, d2], CFG)
    own = LogConfig(segment_bytes=2_000, cleanup_policy=("compact",))
    mgr.get_log("b", 0).config = own
    assert "b" not in mgr.topic_configs
    future = mgr.new_future_dir(("b", 0), d2)

    new = mgr.replace_with_future(("b", 0), future, d2, _copy_rest)
    assert new.config is own and mgr.get_log("b", 0).config is own
    mgr.shutdown()
