"""The CUDA toolchain: finding nvcc and compiling sources in a scratch directory."""
