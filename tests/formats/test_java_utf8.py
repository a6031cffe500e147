"""Java's new String(bytes, UTF_8), the text Kafka makes of bytes that may not be UTF-8."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatool.formats import java_utf8

# What OpenJDK 17.0.15 and Temurin 25 print for new String(bytes, UTF_8) of each (UTF-16 code
# units, hex): the same on both.  Python's "replace" differs on every row marked *.
JAVA = {
    "61ff62": "0061fffd0062",
    "eda080": "fffd",  # * an encoded surrogate is one malformed sequence (Python: three)
    "eda0": "fffd",  # * a valid start cut short by the end: one (Python: two)
    "ed": "fffd",
    "e282": "fffd",
    "e28241": "fffd0041",
    "f09080": "fffd",
    "f0908041": "fffd0041",
    "f4908080": "fffdfffdfffdfffd",  # above U+10FFFF: F4 alone, then three continuations
    "f5808080": "fffdfffdfffdfffd",
    "f8": "fffd",
    "c0af": "fffdfffd",  # overlong
    "e08080": "fffdfffdfffd",
    "e0a0": "fffd",
    "c341": "fffd0041",
    "bf80": "fffdfffd",
    "f7bfbfbf": "fffdfffdfffdfffd",
    "f4808080": "dbc0dc00",  # U+100000, valid
    "f48f": "fffd",
    "eda0bdedb8804142": "fffdfffd00410042",  # * CESU-8 (a surrogate pair, 3 bytes each)
    "e282ac": "20ac",
    "f09f9880": "d83dde00",
    "efbfbd": "fffd",
}


def units(s: str) -> str:
    return s.encode("utf-16-be", "surrogatepass").hex()


@pytest.mark.parametrize("data", sorted(JAVA))
def test_decodes_as_the_jdk_does(data):
    assert units(java_utf8.decode(bytes.fromhex(data))) == JAVA[data]
    assert units(bytes.fromhex(data).decode("utf-8", java_utf8.ERRORS)) == JAVA[data]


def test_python_replace_is_not_the_jdk_rule():
    """Why the module exists: the same decoder on what is valid, other replacement counts."""
    differ = {d for d in JAVA if units(bytes.fromhex(d).decode("utf-8", "replace")) != JAVA[d]}
    assert differ == {"eda080", "eda0", "eda0bdedb8804142"}


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_valid_utf8_is_decoded_as_it_is(text):
    assert java_utf8.decode(text.encode("utf-8")) == text


def test_java_encode_writes_a_lone_surrogate_as_a_question_mark():
    assert java_utf8.encode("a\ud800b\U0001f600") == b"a?b\xf0\x9f\x98\x80"


_ORACLE = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
public class Dec {
    public static void main(String[] a) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = r.readLine()) != null) {
            String s = new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            for (int i = 0; i < s.length(); i++) out.append(String.format("%04x", (int) s.charAt(i)));
            out.append('\\n');
        }
        System.out.print(out);
    }
}
"""


@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK on this machine")
def test_random_bytes_against_the_jdk(tmp_path):
    """5,000 random byte strings (bytes that start, continue or break sequences), through the
    JDK here and through java_utf8: the same UTF-16 code units."""
    rng = random.Random(13)
    pick = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF]
    pick += [0xF0, 0xF1, 0xF4, 0xF5, 0xF8, 0xFF]
    cases = [
        bytes(
            rng.choice(pick) if rng.random() < 0.85 else rng.randrange(256) for _ in range(rng.randint(1, 8))
        )
        for _ in range(5_000)
    ]
    (tmp_path / "Dec.java").write_text(_ORACLE)
    subprocess.run(["javac", "Dec.java"], cwd=tmp_path, check=True, timeout=120)
    out = subprocess.run(
        ["java", "-cp", str(tmp_path), "Dec"],
        input="".join(c.hex() + "\n" for c in cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    assert len(out) == len(cases)
    wrong = [(c.hex(), j) for c, j in zip(cases, out, strict=True) if units(java_utf8.decode(c)) != j]
    assert not wrong, wrong[:5]
