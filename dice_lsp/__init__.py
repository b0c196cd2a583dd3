"""dice-lsp: a language server that writes and optimizes CUDA kernels with a diffusion LLM."""

__version__ = "0.1.0"
