"""Every generated message, at every version, survives encode -> decode -> encode."""

from __future__ import annotations

import random

import pytest
from protocol.protocol_values import filled

import kafkatool.formats.generated as fgen
import kafkatool.protocol.generated as pgen
from kafkatool.formats.schema import Message, in_range


def _all_messages() -> list[type[Message]]:
    classes = []
    for mod in (pgen, fgen):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if isinstance(obj, type) and issubclass(obj, Message):
                classes.append(obj)
    return classes


CASES = [
    pytest.param(cls, v, id=f"{cls.NAME}-v{v}")
    for cls in _all_messages()
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def _all_present_fields_non_default(obj: Message, version: int) -> list[str]:
    """Names of present fields still holding their default (must be none)."""
    stale = []
    for f in obj._FIELDS:
        if not in_range(version, f.versions):
            continue
        value = getattr(obj, f.attr)
        if value == f.default_value():
            stale.append(f.attr)
        if f.kind == "struct" and value is not None:
            stale += _all_present_fields_non_default(value, version)
        if f.kind == "array" and f.elem == "struct" and value:
            for e in value:
                stale += _all_present_fields_non_default(e, version)
    return stale


def test_every_schema_generated():
    names = {cls.NAME for cls in _all_messages()}
    assert len(pgen.APIS) >= 80
    for key, (_name, req, resp) in pgen.APIS.items():
        assert req.API_KEY == key and resp.API_KEY == key
    assert {"ProduceRequest", "FetchResponse", "RequestHeader", "ResponseHeader"} <= names
    assert {"OffsetCommitKey", "GroupMetadataValue", "TransactionLogValue", "TopicRecord"} <= names
    assert {"ConsumerProtocolSubscription", "LeaderChangeMessage"} <= names


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_roundtrip(cls: type[Message], version: int):
    rng = random.Random(f"{cls.NAME}/{version}")
    for _ in range(2):
        msg = filled(cls, version, rng)
        assert _all_present_fields_non_default(msg, version) == []
        data = msg.encode(version)
        back = cls.decode(data, version)
        assert back == msg
        assert back.encode(version) == data
        # from a memoryview in the middle of a larger buffer too
        padded = memoryview(b"\xaa" * 3 + data + b"\xbb")
        back2, end = cls.decode_from(padded, 3, len(padded), version)
        assert end == 3 + len(data)
        assert back2 == msg


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_defaults_roundtrip(cls: type[Message], version: int):
    msg = cls()
    data = msg.encode(version)
    assert cls.decode(data, version) == msg
