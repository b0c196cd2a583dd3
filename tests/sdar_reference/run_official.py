"""The official side of the SDAR parity test; runs in .venv-sdar (`make sdar-env`), not in the main venv.

Builds a tiny random SDAR checkpoint with the official classes (the SDAR-4B-Chat config.json shrunk to 2 layers,
hidden 64, 4 heads, 2 key/value heads, head_dim 16, a 1024-token vocabulary, weights drawn at std 0.2 so that
the model's choices are clear-cut; fixed seed), `save_pretrained`s it with a small word-level tokenizer whose
mask token is the last id, then decodes a few fixed token-id prompts with the official
`block_diffusion_generate` (greedy, low_confidence_static, block 4, 4 steps, fp32, CPU; one run with a stop
token) and writes the tokens after each prompt as JSON:

    python tests/sdar_reference/run_official.py OUT_DIR      ->  OUT_DIR/model/, OUT_DIR/official.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import cpu_shims
import torch

HERE = Path(__file__).resolve().parent
SEED = 0
VOCAB = 1024  # the last two ids: <|endoftext|>, <|MASK|> (special tokens sit at the end, as in Qwen's vocabulary)
BLOCK, STEPS, GEN_LENGTH = 4, 4, 16
PROMPT_LENGTHS = (8, 6, 3)  # a whole number of blocks (a prefill), a part block, less than one block (no prefill)
TINY = {
    "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_window_layers": 2,
    "initializer_range": 0.2, "bos_token_id": VOCAB - 2, "eos_token_id": VOCAB - 2, "mask_token_id": VOCAB - 1,
    "torch_dtype": "float32",
}


def tiny_config() -> Any:
    config_cls = importlib.import_module(f"{cpu_shims.PACKAGE}.configuration_sdar").SDARConfig
    data = json.loads((HERE / "config.json").read_text(encoding="utf-8"))
    data.update(TINY)
    config = config_cls(**data)
    config._attn_implementation = "sdpa"  # the published config asks for flex_attention (training)
    return config


def save_tokenizer(folder: Path) -> None:
    """A word-level tokenizer `t0 .. t1021` + the two special tokens, saved as transformers saves Qwen's."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(VOCAB - 2)}
    vocab.update({"<|endoftext|>": VOCAB - 2, "<|MASK|>": VOCAB - 1})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", mask_token="<|MASK|>")
    fast.save_pretrained(str(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for model/ and official.json")
    args = parser.parse_args()
    cpu_shims.install(HERE)
    modeling = importlib.import_module(f"{cpu_shims.PACKAGE}.modeling_sdar")
    generate = importlib.import_module(f"{cpu_shims.PACKAGE}.generate")
    generate.sample_with_temperature_topk_topp = cpu_shims.greedy  # the official loop looks it up per call

    torch.manual_seed(SEED)
    model = modeling.SDARForCausalLM(tiny_config()).float().eval()
    with torch.no_grad():
        # A trained SDAR model gives the mask token next to no probability (it is never a target); a random one
        # gives it as much as any token. The engine drops it before ranking confidences, the official loop does
        # not, so a large mask probability could reorder near-equal confidences. A zero output row keeps its
        # logit at 0, well below the top logits of a model initialised at this scale.
        model.lm_head.weight[VOCAB - 1] = 0.0
    folder = args.out / "model"
    model.save_pretrained(str(folder))
    save_tokenizer(folder)

    prompts = torch.randint(0, VOCAB - 2, (len(PROMPT_LENGTHS), max(PROMPT_LENGTHS)),
                            generator=torch.Generator().manual_seed(SEED + 1))

    def decode(prompt: list[int], stop_ids: list[int] | None) -> list[int]:
        x = generate.block_diffusion_generate(
            model, {"input_ids": torch.tensor([prompt])}, mask_id=VOCAB - 1, gen_length=GEN_LENGTH,
            block_length=BLOCK, denoising_steps=STEPS, remasking_strategy="low_confidence_static",
            stopping_criteria_idx=stop_ids,
        )
        tokens: list[int] = x[0, len(prompt):].tolist()
        if stop_ids:  # blocks after the stop stay masks: keep the decoded ones (whole blocks)
            end = len(prompt) + len(tokens)
            while end > len(prompt) and x[0, end - 1] == VOCAB - 1:
                end -= 1
            tokens = tokens[:-(-end // BLOCK) * BLOCK - len(prompt)]
        return tokens

    cases = []
    for row, length in zip(prompts, PROMPT_LENGTHS, strict=True):
        prompt = row[:length].tolist()
        cases.append({"prompt": prompt, "gen_length": GEN_LENGTH, "stop_ids": [], "tokens": decode(prompt, None)})
    # early stop: the official loop given a stop token (as DICE's EOS) that the first prompt's output has in its
    # second block decodes up to the end of that block and no further
    first = cases[0]
    stop = [first["tokens"][BLOCK + 1]]
    cases.append({"prompt": first["prompt"], "gen_length": GEN_LENGTH, "stop_ids": stop,
                  "tokens": decode(first["prompt"], stop)})
    import transformers

    report = {
        "model": str(folder), "mask_id": VOCAB - 1, "eos_id": VOCAB - 2, "block_length": BLOCK, "steps": STEPS,
        "remasking_strategy": "low_confidence_static", "sampling": "greedy", "cases": cases,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": sys.version.split()[0]},
    }
    (args.out / "official.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
