"""From predictions to bytes and back: the per-byte kernels encoder and decoder share
(stepper.py), the predictors and frame coding (codec.py), the arithmetic coder (coder.py),
the container format (container.py) and independent blocks for threads (blocks.py)."""
