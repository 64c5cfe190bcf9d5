"""Numeric building blocks every kernel shares: how kernels are compiled (the determinism
contract's fast-math set), bit-exact transcendentals, vector and matrix loops."""
