"""The policy: a local causal LM with a LoRA adapter, and its token log-probs.

The base model loads from a local directory with `from_pretrained(path)`. A
hub name only works on a machine that can reach the hub; training nodes
usually cannot, so pass a directory (e.g. one written by
`huggingface-cli download` elsewhere and copied over).

The reference policy for the KL term is the same network with the adapter
disabled (CodeGrep App. A.4: the base weights stay frozen), so no second copy
of the model is kept.
"""

from __future__ import annotations

import os
import torch


def pick_device_and_dtype(dtype: str) -> tuple:
    """bf16 on a GPU, fp32 on CPU, unless the config says otherwise."""
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if dtype == "auto":
        return device, (torch.bfloat16 if device.type == "cuda" else torch.float32)
    return device, getattr(torch, dtype)


class FullFineTune(torch.nn.Module):
    """A causal LM whose every weight trains (config `finetune: full`; CodeScout §4.1
    trains without LoRA), with the few methods of a peft model the trainer uses.
    There is no adapter to disable, hence no reference policy (config.py refuses
    a KL term with it)."""

    def __init__(self, base):
        super().__init__()
        self.base = base

    def get_base_model(self):
        return self.base

    def generate(self, *args, **kwargs):
        return self.base.generate(*args, **kwargs)

    def save_pretrained(self, path: str, **kwargs):
        return self.base.save_pretrained(path, **kwargs)

    @property
    def config(self):
        return self.base.config

    def disable_adapter(self):
        raise RuntimeError("finetune: full has no adapter to disable (no reference policy): set kl_beta 0, "
                           "track_kl false")


def load_policy(model_path: str, lora, dtype: torch.dtype, device: torch.device,
                gradient_checkpointing: bool, finetune: str = "lora"):
    """(peft model, or FullFineTune, tokenizer). LoRA adapters are kept in fp32
    even when the base is bf16, so 5e-6-sized updates are not rounded away; a
    full fine-tune keeps all weights in fp32 for the same reason (CodeScout's
    lr is 1e-6), at 16 bytes per parameter with AdamW."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not os.path.isdir(model_path):
        raise FileNotFoundError(
            f"model_path {model_path!r} is not a local directory; the trainer loads models from disk "
            "(hub names only work where a hub is reachable)")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32 if finetune == "full" else dtype)
    base.to(device)
    if gradient_checkpointing:
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if finetune == "full":
        return FullFineTune(base), tokenizer
    peft_config = LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=lora.target_modules, task_type="CAUSAL_LM", bias="none")
    model = get_peft_model(base, peft_config, autocast_adapter_dtype=True)
    for _name, p in model.named_parameters():
        if p.requires_grad:
            p.data = p.data.float()
    return model, tokenizer


def trainable_parameters(model) -> list:
    return [p for p in model.parameters() if p.requires_grad]


def count_parameters(model) -> tuple:
    """(total, trainable) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                   loss_mask: torch.Tensor, chunk: int = 2048, temperature: float = 1.0) -> torch.Tensor:
    """log pi(token_t | tokens_<t) at every position where loss_mask is 1, with
    pi = softmax(logits / temperature): the distribution the tokens were
    sampled from (before top-k/top-p truncation), so ratios and KL are of the
    sampled policy, not of the temperature-1 one.

    Returns [batch, seq] (0 where loss_mask is 0). Only the masked-in positions
    go through the output head, in chunks, so the [tokens x vocab] logits of
    prompts and tool outputs (most of a rollout) are never materialised.
    """
    backbone = model.get_base_model().model  # the transformer without its LM head
    lm_head = model.get_base_model().get_output_embeddings()
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    # The token at t is predicted from the hidden state at t - 1.
    targets_mask = loss_mask[:, 1:].bool()
    positions = targets_mask.nonzero(as_tuple=False)
    out = torch.zeros(loss_mask.shape, dtype=torch.float32, device=input_ids.device)
    if positions.numel() == 0:
        return out + 0.0 * hidden.sum()  # keep the graph connected
    states = hidden[:, :-1][targets_mask]
    targets = input_ids[:, 1:][targets_mask]
    pieces = []
    for start in range(0, states.shape[0], chunk):
        logits = lm_head(states[start:start + chunk]).float() / temperature
        pieces.append(torch.log_softmax(logits, dim=-1)
                      .gather(-1, targets[start:start + chunk, None]).squeeze(-1))
    values = torch.cat(pieces)
    index = positions.clone()
    index[:, 1] += 1
    return out.index_put((index[:, 0], index[:, 1]), values)

