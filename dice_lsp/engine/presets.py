"""Named model shapes: the embedded model's architecture and the SDAR/DICE-8B shape used in benchmarks."""

from __future__ import annotations

from dice_lsp.engine.config import ModelConfig

# The embedded default: ~28M parameters, 56 MB in bf16 with tied embeddings (the package limit is 60 MB).
DICE_TINY = ModelConfig(
    vocab_size=8192, hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
    num_key_value_heads=4, head_dim=64, max_position_embeddings=512, rope_theta=10_000.0,
    tie_word_embeddings=True, attention="bidirectional", model_type="dice",
)

# Qwen3-8B's shape, which SDAR-8B and DICE-8B share (block diffusion, blocks of 4).
SDAR_8B = ModelConfig(
    vocab_size=151_936, hidden_size=4096, intermediate_size=12_288, num_hidden_layers=36, num_attention_heads=32,
    num_key_value_heads=8, head_dim=128, max_position_embeddings=40_960, rope_theta=1_000_000.0,
    tie_word_embeddings=False, attention="block", block_size=4, model_type="sdar",
)
