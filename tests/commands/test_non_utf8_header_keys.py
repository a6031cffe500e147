"""A record header key that is not UTF-8, through dump-log, verify and recover.

Kafka never refuses one (DefaultRecord.readHeaders keeps the bytes; RecordHeader.key is Java's
String of them, U+FFFD for each malformed sequence): such a CRC-valid batch is healthy data to
every Kafka reader, and recovery keeps it.  Before, our decoder refused it: dump-log and verify
reported a corrupt record and exited 1.
"""

from __future__ import annotations

import json
import subprocess
import sys

from kafkatool.formats import compression
from kafkatool.formats import records as R
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log

KEYS = [b"id\xff", b"\xed\xa0\x80", b"ok"]  # a stray byte, an encoded surrogate (one U+FFFD in Java)
JAVA = ["id\ufffd", "\ufffd", "ok"]


def make(tmp_path):
    part = tmp_path / "logs" / "t-0"
    log = Log(part, LogConfig(segment_bytes=1_000))
    for i in range(12):
        headers = [(k, b"h%d" % i) for k in KEYS] if i % 3 == 1 else [("plain", b"h")]
        codec = compression.GZIP if i % 2 else compression.NONE
        log.append_as_leader(
            R.build_record_batch([R.SimpleRecord(b"v%d" % i, b"k%d" % i, headers, 1_000 + i)], codec=codec),
            leader_epoch=0,
        )
    log.close()
    return part


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "kafkatool", *map(str, args)], capture_output=True, timeout=120
    )


def files(part):
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.is_file()}


def test_dump_log_prints_the_keys_as_kafka_does(tmp_path):
    part = make(tmp_path)
    seg = sorted(part.glob("*.log"))[0]
    res = cli("dump-log", seg, "--deep-iteration")
    assert res.returncode == 0, res.stderr
    text = res.stdout.decode("utf-8")  # strict: the bytes on stdout are UTF-8
    assert f"headerKeys: [{','.join(JAVA)}]" in text
    assert "headerKeys: [plain]" in text and res.stderr == b""


def test_dump_log_json_is_valid_and_keeps_the_bytes(tmp_path):
    part = make(tmp_path)
    seg = sorted(part.glob("*.log"))[0]
    res = cli("dump-log", seg, "--print-data-log", "--json")
    assert res.returncode == 0, res.stderr
    recs = [json.loads(line) for line in res.stdout.decode("utf-8").splitlines()]
    recs = [r for r in recs if r["type"] == "record"]
    odd = [r for r in recs if r["offset"] % 3 == 1]
    assert odd and len(odd) < len(recs)
    for r in odd:
        assert r["headerKeys"] == JAVA
        assert r["headerKeysHex"] == [k.hex() for k in KEYS]
        assert [k for k, _ in r["headers"]] == JAVA
    assert all("headerKeysHex" not in r for r in recs if r["offset"] % 3 != 1)


def test_verify_only_notes_them_and_recover_cuts_nothing(tmp_path):
    part = make(tmp_path)
    res = cli("verify", part.parent, "--json")
    assert res.returncode == 0, res.stdout[-2000:]
    lines = [json.loads(x) for x in res.stdout.decode().splitlines()]
    findings = [x for x in lines if x["type"] == "finding"]
    # an info note per batch holding such keys (offsets 1, 4, 7, 10), nothing worse
    assert sorted(x["offset"] for x in findings) == [1, 4, 7, 10], findings
    assert {(x["kind"], x["severity"]) for x in findings} == {("header_key_not_utf8", "info")}
    before = files(part)
    res = cli("recover", part, "--all", "--json")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert files(part) == before  # every segment scanned, nothing cut or rewritten
