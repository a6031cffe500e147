"""Build message objects with a non-default value in every field, from the schema tables."""

from __future__ import annotations

import random
import uuid

from kafkatool.formats.schema import FieldInfo, Message, in_range

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(kind: str, default, rng: random.Random, nullable: bool):
    if nullable and default is not None and rng.random() < 0.3:
        return None
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        while True:
            v = rng.choice([lo, hi, rng.randint(lo, hi), 1, -1 if lo < 0 else 2])
            if v != default:
                return v
    if kind == "bool":
        return not default
    if kind == "float64":
        return rng.choice([1.5, -2.25e10, 3.0e-5])
    if kind == "string":
        s = rng.choice(["topic-é", "x" * rng.randint(1, 40), "ünïcødé ✓", "a"])
        return s if s != default else s + "!"
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 30)))
    if kind == "records":
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    raise AssertionError(kind)


def filled(cls: type[Message], version: int, rng: random.Random, depth: int = 0) -> Message:
    obj = cls()
    for f in cls._FIELDS:
        if not in_range(version, f.versions):
            continue
        setattr(obj, f.attr, field_value(f, version, rng, depth))
    return obj


def field_value(f: FieldInfo, version: int, rng: random.Random, depth: int):
    nullable = in_range(version, f.nullable)
    default = f.default_value()
    if f.kind == "struct":
        if nullable and default is None and rng.random() < 0.2:
            return None
        return filled(f.cls, version, rng, depth + 1)
    if f.kind == "array":
        if nullable and default is not None and rng.random() < 0.2:
            return None
        n = rng.randint(1, 3 if depth < 3 else 1)
        if f.elem == "struct":
            return [filled(f.cls, version, rng, depth + 1) for _ in range(n)]
        return [_scalar(f.elem, None, rng, False) for _ in range(n)]
    return _scalar(f.kind, default, rng, nullable)
