"""Issue 12: recover and rebuild-index take several paths (PATH...), as the README says.

The class: several partition dirs and log dirs in one run, each log dir locked and
checkpointed on its own, each partition once even when named twice."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kafkatool.cli import app
from tests.segments import make_partition

runner = CliRunner()


def _damage(pdir):
    log = sorted(pdir.glob("*.log"))[-1]
    with log.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x30" + b"\xee" * 40)  # a torn tail


def _summary(res):
    return [json.loads(x) for x in res.stdout.splitlines() if x.strip()][-1]


def test_recover_several_paths(tmp_path):
    a = make_partition(tmp_path / "d1", "a-0", segments=2, batches_per_segment=5)
    b = make_partition(tmp_path / "d2", "b-0", segments=2, batches_per_segment=5)
    make_partition(tmp_path / "d2", "c-0", segments=1, batches_per_segment=5)
    _damage(a)
    _damage(b)
    res = runner.invoke(app, ["recover", "--dry-run", "--json", str(a), str(tmp_path / "d2"), str(b)])
    s = _summary(res)
    assert (s["partitions"], s["with_findings"]) == (3, 2), res.stdout
    assert s["paths"] == [str(a), str(tmp_path / "d2"), str(b)]
    res = runner.invoke(app, ["recover", "--json", str(a), str(b)])
    assert _summary(res)["with_findings"] == 2
    res = runner.invoke(app, ["recover", "--dry-run", "--json", str(a), str(b)])
    assert _summary(res)["with_findings"] == 0 and res.exit_code == 0


def test_rebuild_index_several_paths(tmp_path):
    a = make_partition(tmp_path / "d1", "a-0", segments=2, batches_per_segment=5)
    b = make_partition(tmp_path / "d2", "b-0", segments=2, batches_per_segment=5)
    for p in (a, b):
        sorted(p.glob("*.index"))[0].write_bytes(b"\x00" * 8)  # a wrong entry
    res = runner.invoke(app, ["rebuild-index", "--dry-run", "--json", str(a), str(b), str(a)])
    s = _summary(res)
    assert s["partitions"] == 2 and s["different"] >= 2, res.stdout
    res = runner.invoke(app, ["rebuild-index", "--json", str(tmp_path / "d1"), str(tmp_path / "d2")])
    assert _summary(res)["replaced"] >= 2
    res = runner.invoke(app, ["rebuild-index", "--dry-run", "--json", str(a), str(b)])
    assert _summary(res)["different"] == 0
