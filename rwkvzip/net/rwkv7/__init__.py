"""RWKV-7: config and model (model.py), forward kernels (forward.py), gradients (backward.py)."""
