"""Writes the ML app's model: a Llama-architecture causal LM built from a
transformers config with random weights (nothing is downloaded: no hub is
reachable here), saved as safetensors so that `from_pretrained` maps it.

    python make_model.py DIR

Size: hidden 2048, 6 layers, MLP 5632, vocabulary 32,000, float32:
439 M parameters, 1.76 GB of weights (the issue's "~1.7 GB model").
Idempotent: a DIR whose stamp names the same shape is kept.
"""
import json
import os
import sys

SHAPE = dict(hidden_size=2048, num_hidden_layers=6, intermediate_size=5632,
             num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
             max_position_embeddings=2048)


def main(out):
    stamp = os.path.join(out, "appflow-model.json")
    try:
        with open(stamp) as f:
            if json.load(f) == SHAPE:
                print(f"model kept: {out}")
                return
    except (OSError, ValueError):
        pass
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(1)
    cfg = LlamaConfig(**SHAPE, torch_dtype="float32")
    model = LlamaForCausalLM(cfg)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="4GB")
    with open(stamp, "w") as f:
        json.dump(SHAPE, f)
    n = sum(p.numel() for p in model.parameters())
    print(f"model written: {out} ({n / 1e6:.0f} M parameters)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_model.py DIR")
    main(sys.argv[1])
