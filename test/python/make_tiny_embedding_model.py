"""Makes a real (randomly initialised) BERT sentence-embedding model for the dense retriever's tests and bench.

    .venv/bin/python test/python/make_tiny_embedding_model.py OUT_DIR [--size tiny|minilm]

Writes, under OUT_DIR:
  model/                     a sentence-transformers-style folder, the layout lib/retrievers/dense loads:
    onnx/model.onnx          BertModel exported with torch.onnx.export (inputs input_ids, attention_mask,
                             token_type_ids, int64 [batch, sequence]; output last_hidden_state)
    tokenizer.json           a WordPiece tokenizer (HF `tokenizers`) trained on a few code-like strings:
                             BertNormalizer (lower case), BertPreTokenizer, "[CLS] $A [SEP]" template
    tokenizer_config.json, config.json, model.safetensors, sentence_bert_config.json (max_seq_length),
    modules.json             Transformer → Pooling → Normalize
    1_Pooling/config.json    mean pooling
  reference.json             what transformers + tokenizers compute for a few texts: token ids, mean-pooled
                             normalised embeddings and raw CLS vectors, for the TypeScript parity tests

Nothing is downloaded: the weights come from torch.manual_seed(0). `--size minilm` gives all-MiniLM-L6-v2's
shape (6 layers, hidden 384, 12 heads, max_seq_length 256) for throughput benchmarks; the default `tiny`
(2 layers, hidden 32, max_seq_length 32, so that short files already span several chunks) is for tests.
"""

import argparse
import json
import os
import sys
import warnings

SIZES = {
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 max_position_embeddings=128, max_seq_length=32, vocab_size=400),
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                   max_position_embeddings=512, max_seq_length=256, vocab_size=2000),
}

# The tokenizer's training text: Python- and issue-like strings, so ordinary code splits into real word pieces.
TRAINING_TEXT = [
    "def retrieve(index, query, k=2):\n    return sorted(index.score(query), reverse=True)[:k]",
    "class QuerySet(models.Manager):\n    def filter(self, *args, **kwargs):\n        return self._chain()",
    "import numpy as np\nfrom django.db import models\nfrom astropy.modeling import separable",
    "Traceback (most recent call last):\n  File \"setup.py\", line 12, in <module>\nValueError: invalid literal",
    "The admin form raises a TypeError when the field is empty; expected the validation error message.",
    "export function parseConfig(text: string): Config { return JSON.parse(text) as Config; }",
    "interface ReadonlyArray<T> { readonly length: number; map<U>(fn: (value: T) => U): U[]; }",
    "the quick brown fox jumps over the lazy dog 0123456789 +-*/=<>()[]{}:;,.'\"_#@!?%&|^~`$\\",
]

REFERENCE_TEXTS = [
    "def add(a, b):\n    return a + b",
    "The admin form raises a TypeError.",
    "x",
    "class Author(models.Model):\n    name = models.CharField()",
]

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tokenizer(vocab_size):
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    tokenizer = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=None, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    trainer = WordPieceTrainer(vocab_size=vocab_size, min_frequency=1, special_tokens=SPECIALS,
                               continuing_subword_prefix="##")
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer=trainer)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return tokenizer


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    args = parser.parse_args()
    size = SIZES[args.size]

    try:
        import onnx  # noqa: F401  (torch.onnx.export needs it to write the file)
        import tokenizers  # noqa: F401
        import torch
        from transformers import BertConfig, BertModel
    except ImportError as error:
        sys.exit(f"make_tiny_embedding_model: {error}; run `bash scripts/setup.sh` to install the project venv")

    model_dir = os.path.join(args.out_dir, "model")
    os.makedirs(os.path.join(model_dir, "onnx"), exist_ok=True)

    tokenizer = build_tokenizer(size["vocab_size"])
    tokenizer.save(os.path.join(model_dir, "tokenizer.json"))
    pad_id = tokenizer.token_to_id("[PAD]")

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=size["hidden_size"],
        num_hidden_layers=size["num_hidden_layers"], num_attention_heads=size["num_attention_heads"],
        intermediate_size=size["intermediate_size"], max_position_embeddings=size["max_position_embeddings"],
        pad_token_id=pad_id, attn_implementation="eager")
    bert = BertModel(config, add_pooling_layer=False).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    # Exported in eval mode; export restores the wrapper's mode afterwards, which must not be training mode
    # (dropout would then make the reference below random).
    wrapper = LastHiddenState(bert).eval()
    example = torch.tensor([[2, 7, 8, 9, 3], [2, 7, 3, pad_id, pad_id]], dtype=torch.long)
    dynamic = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper, (example, (example != pad_id).long(), torch.zeros_like(example)),
            os.path.join(model_dir, "onnx", "model.onnx"),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "token_type_ids": dynamic,
                          "last_hidden_state": dynamic},
            opset_version=17, dynamo=False)

    bert.save_pretrained(model_dir)  # config.json + model.safetensors (the bench's PyTorch reference loads it)
    write_json(os.path.join(model_dir, "tokenizer_config.json"), {
        "tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": size["max_seq_length"],
        "pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
        "mask_token": "[MASK]", "clean_up_tokenization_spaces": True})
    write_json(os.path.join(model_dir, "sentence_bert_config.json"),
               {"max_seq_length": size["max_seq_length"], "do_lower_case": False})
    write_json(os.path.join(model_dir, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write_json(os.path.join(model_dir, "1_Pooling", "config.json"), {
        "word_embedding_dimension": size["hidden_size"], "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": False, "include_prompt": True})

    # The reference: the same tokenizer.json through HF tokenizers, the same weights through transformers,
    # sentence-transformers' mean pooling (attention-masked) and L2 normalisation.
    reference = []
    bert.eval()
    with torch.no_grad():
        for text in REFERENCE_TEXTS:
            ids = tokenizer.encode(text).ids
            if len(ids) > size["max_seq_length"]:
                sys.exit(f"make_tiny_embedding_model: reference text {text!r} has {len(ids)} tokens, over max_seq_length")
            input_ids = torch.tensor([ids], dtype=torch.long)
            hidden = bert(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                          token_type_ids=torch.zeros_like(input_ids)).last_hidden_state[0]
            mean = hidden.mean(dim=0)
            reference.append({
                "text": text, "input_ids": ids,
                "mean_normalized": torch.nn.functional.normalize(mean, dim=0).tolist(),
                "cls": hidden[0].tolist()})
    write_json(os.path.join(args.out_dir, "reference.json"),
               {"size": args.size, "max_seq_length": size["max_seq_length"], "texts": reference})


if __name__ == "__main__":
    main()
