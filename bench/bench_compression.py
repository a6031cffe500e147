"""Compress/decompress throughput per codec on 1 MiB of semi-compressible data.

Run standalone: ``python bench/bench_compression.py`` (not part of pytest).
"""

from __future__ import annotations

import random
import time

from kafkatool.formats import compression as C

SIZE = 1 << 20


def semi_compressible(size: int = SIZE, seed: int = 42) -> bytes:
    """Record-like data: random ids and payload bytes mixed with repeated field text."""
    rnd = random.Random(seed)
    words = [b"key-", b"user", b"event", b"click", b"view", b"2024-11-22T03:00:00Z", b'{"id":', b"}"]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words)
        out += rnd.randbytes(rnd.randint(0, 12))
    return bytes(out[:size])


def _rate(fn, arg, budget: float = 0.5) -> float:
    fn(arg)  # warm-up
    runs, started = 0, time.perf_counter()
    while True:
        fn(arg)
        runs += 1
        elapsed = time.perf_counter() - started
        if elapsed >= budget:
            return runs * SIZE / elapsed / 1e6


def main() -> None:
    data = semi_compressible()
    print(f"{'codec':<8}{'ratio':>8}{'compress MB/s':>16}{'decompress MB/s':>18}")
    for codec, name in C.CODEC_NAMES.items():
        packed = C.compress(codec, data)
        assert C.decompress(codec, packed) == data
        c_rate = _rate(lambda d, c=codec: C.compress(c, d), data)
        d_rate = _rate(lambda p, c=codec: C.decompress(c, p), packed)
        print(f"{name:<8}{len(data) / len(packed):>8.2f}{c_rate:>16.1f}{d_rate:>18.1f}")


if __name__ == "__main__":
    main()
