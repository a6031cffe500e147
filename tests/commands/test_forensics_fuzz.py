"""Random and mutated bytes in every kind of file: dump-log and verify never crash.

Whatever the damage, both commands finish with a documented exit code (0, 1 or 2)
and no traceback, and every finding names a byte position inside the file.
"""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kafkatool.cli import app
from kafkatool.formats import checkpoint as C
from kafkatool.formats import index as I
from kafkatool.formats import records as R
from kafkatool.formats import snapshot as S

runner = CliRunner()

GOOD = {
    "00000000000000000000.log": b"".join(
        R.build_record_batch(
            [R.SimpleRecord(b"v%d" % i, b"k", [("h", b"1")], 100 + i)], base_offset=i, codec=i % 5
        )
        for i in range(6)
    )
    + R.build_legacy_message_set([b"a", b"b"], magic=1, codec=1, base_offset=6),
    "00000000000000000000.index": I.encode_offset_index([(1, 77), (3, 240)], 0) + bytes(16),
    "00000000000000000000.timeindex": I.encode_time_index([(101, 1), (103, 3)], 0),
    "00000000000000000000.txnindex": I.encode_txn_index([(5, 0, 3, 4)]),
    "00000000000000000008.snapshot": S.encode_snapshot([S.ProducerSnapshotEntry(5, 0, 3, 3, 0, 103, 0, -1)]),
    "leader-epoch-checkpoint": C.encode_leader_epoch_checkpoint([(0, 0), (2, 5)]),
    "partition.metadata": b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
}


def _mutate(data, blob: bytes) -> bytes:
    out = bytearray(blob)
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "cut", "append", "insert"]))
        if op in ("flip", "set") and out:
            i = data.draw(st.integers(0, len(out) - 1))
            out[i] = out[i] ^ 0xFF if op == "flip" else data.draw(st.integers(0, 255))
        elif op == "cut":
            out = out[: data.draw(st.integers(0, len(out)))]
        elif op == "append":
            out += data.draw(st.binary(max_size=64))
        elif op == "insert" and out:
            i = data.draw(st.integers(0, len(out)))
            out[i:i] = data.draw(st.binary(min_size=1, max_size=16))
    return bytes(out)


def _check(res, sizes):
    assert res.exit_code in (0, 1, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    for line in res.stdout.splitlines():
        obj = json.loads(line)
        if obj.get("type") == "finding" and obj.get("position") is not None and obj["file"] in sizes:
            assert 0 <= obj["position"] <= sizes[obj["file"]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_partition_files(tmp_path_factory, data):
    pdir = tmp_path_factory.mktemp("fz") / "t-0"
    pdir.mkdir()
    sizes = {}
    for name, blob in GOOD.items():
        mutated = _mutate(data, blob) if data.draw(st.booleans()) else blob
        (pdir / name).write_bytes(mutated)
        sizes[str(pdir / name)] = len(mutated)
    _check(runner.invoke(app, ["verify", "--json", str(pdir)]), sizes)
    files = [str(pdir / n) for n in GOOD]
    decoder = data.draw(
        st.sampled_from(["--offsets-decoder", "--cluster-metadata-decoder", "--transaction-log-decoder"])
    )
    for extra in (["--deep-iteration"], [decoder], ["--verify-index-only"], ["--index-sanity-check"]):
        _check(runner.invoke(app, ["dump-log", "--json", *extra, *files]), sizes)
    for extra in (["--print-data-log"], [decoder]):
        res = runner.invoke(app, ["dump-log", *extra, *files])
        assert res.exit_code in (0, 1, 2) and "Traceback" not in res.output
        assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(GOOD)), blob=st.binary(max_size=300))
def test_random_bytes_in_every_file_kind(tmp_path_factory, name, blob):
    pdir = tmp_path_factory.mktemp("rnd") / "t-0"
    pdir.mkdir()
    (pdir / name).write_bytes(blob)
    sizes = {str(pdir / name): len(blob)}
    _check(runner.invoke(app, ["verify", "--json", str(pdir / name)]), sizes)
    _check(runner.invoke(app, ["dump-log", "--json", "--deep-iteration", str(pdir / name)]), sizes)
