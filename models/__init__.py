"""Frozen preset cards (JSON), shipped inside the package as rwkvzip.models."""
