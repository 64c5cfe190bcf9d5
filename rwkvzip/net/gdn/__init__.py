"""Gated DeltaNet: config and model (model.py), forward kernels (forward.py), gradients
(backward.py)."""
