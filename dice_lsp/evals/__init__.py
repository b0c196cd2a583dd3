"""CUDA-Infill: a benchmark of fills cut from CUDA code the model never saw, scored by running them."""
