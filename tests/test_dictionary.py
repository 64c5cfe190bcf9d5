"""Choosing a prior's dictionary: what the samples share, within the size, reproducibly."""

import numpy as np

from rwkvzip import dictionary


def samples_with_shared_boilerplate(n=12, seed=0):
    rng = np.random.default_rng(seed)
    header = b'{"service":"checkout","region":"eu-west-1","schema":"v3","fields":["ts","user"]}\n'
    return [header + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes() for _ in range(n)]


def test_keeps_what_the_samples_share_and_leaves_noise_out():
    samples = samples_with_shared_boilerplate()
    d = dictionary.build(samples, 2048)
    assert 0 < len(d) <= 2048
    assert samples[0][:80] in d  # the shared header, not random bytes alone
    assert dictionary.build(samples, 2048) == d  # deterministic
    # random data shares nothing: no segment is worth a byte
    noise = [np.random.default_rng(i).integers(0, 256, 5000, dtype=np.uint8).tobytes()
             for i in range(4)]
    assert dictionary.build(noise, 4096) == b""


def test_small_samples_are_kept_whole_and_size_zero_is_none():
    samples = [b"import numpy as np\n" * 3, b"def main():\n    pass\n"]
    assert dictionary.build(samples, 1 << 15) == b"".join(samples)
    assert dictionary.build(samples, 0) == b""
    assert dictionary.build([b"abc"], 100) == b""  # shorter than a k-gram


def test_the_best_segment_comes_last():
    common = b"from __future__ import annotations\nimport numpy as np\n" * 18  # ~1 KB
    rare = b"# a module of its own: " + bytes(range(65, 91)) * 30
    samples = [common + f"x = {i}\n".encode() for i in range(6)] + [rare, rare[::-1]]
    d = dictionary.build(samples, 2 * dictionary.SEGMENT)
    assert d.endswith(common[-200:]) or common[:200] in d[-dictionary.SEGMENT:]


def test_large_samples_are_scored_on_an_even_spread(monkeypatch):
    monkeypatch.setattr(dictionary, "MAX_SCAN", 4 * dictionary.SEGMENT)
    samples = samples_with_shared_boilerplate(n=12)  # ~37 segments: every 10th is scored
    d = dictionary.build(samples, 2048)
    assert 0 < len(d) <= 2048 and samples[0][:80] in d
