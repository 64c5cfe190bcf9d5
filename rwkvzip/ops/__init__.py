"""Numeric building blocks every kernel shares: how kernels are compiled (the determinism
contract's fast-math set, the vector width), bit-exact transcendentals, vector and matrix
loops."""

from rwkvzip.ops.target import prefer_wide_vectors

ALPHABET = 256  # byte values: every distribution the models, mixer and coder exchange

prefer_wide_vectors()
