"""The byte-level networks: one package per architecture (rwkv7/, gdn/), each with its
config and model (model.py), forward kernels (forward.py) and gradients (backward.py); what
they share: the parameter layout and safetensors names (params.py), the model base class
(base.py), embedding/head kernels and trace slots (common.py), the optimizers (optim.py) and
the seeded initialisation (rng.py)."""
