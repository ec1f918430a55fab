"""PyTorch reference for bench/dense.ts: the same model (model.safetensors of a folder made by
make_tiny_embedding_model.py), the same token sequences, the same batching, mean pooling + L2 normalisation.

    .venv/bin/python test/python/dense_bench_reference.py SPEC.json

SPEC: {"model_dir", "sequences": [[ids...]], "batch_size", "threads", "return": N}. Prints JSON:
{"seconds", "cpu_seconds", "embeddings": the first N vectors in input order}. Times only the forward passes
and pooling (model loading and JSON are excluded), with torch.set_num_threads(threads).
"""

import json
import sys
import time


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    import torch
    from transformers import BertModel

    torch.set_num_threads(spec["threads"])
    model = BertModel.from_pretrained(spec["model_dir"], add_pooling_layer=False, attn_implementation="eager").eval()
    sequences = spec["sequences"]
    order = sorted(range(len(sequences)), key=lambda i: (-len(sequences[i]), i))
    out = [None] * len(sequences)
    pad = model.config.pad_token_id or 0
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for start in range(0, len(order), spec["batch_size"]):
            batch = order[start:start + spec["batch_size"]]
            width = max(len(sequences[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
                mask[row, : len(sequences[i])] = 1
            hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=1)
            for row, i in enumerate(batch):
                out[i] = pooled[row]
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    json.dump({"seconds": seconds, "cpu_seconds": cpu_seconds,
               "embeddings": [v.tolist() for v in out[: spec["return"]]]}, sys.stdout)


if __name__ == "__main__":
    main()
