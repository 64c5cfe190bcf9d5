"""Numeric building blocks every kernel shares: how kernels are compiled (the determinism
contract's fast-math set), bit-exact transcendentals, vector and matrix loops."""

ALPHABET = 256  # byte values: every distribution the models, mixer and coder exchange
