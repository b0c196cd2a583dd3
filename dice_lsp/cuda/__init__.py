"""CUDA source understanding with tree-sitter-cuda: functions, kernels and their bodies."""
