"""The ML app: loads a causal LM with transformers (torch, CPU) from a
local directory (safetensors, mapped by from_pretrained) and generates.

    python ml_app.py MODEL_DIR

Ready marker: the line `token N` of its first generated token. It then
generates 3 more tokens, as a chat app streams its answer, and exits.
"""
import sys
import time

t0 = time.monotonic()
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
model.eval()
ids = torch.tensor([[1, 450, 4996, 17354, 1701, 1092, 12500, 975]])
with torch.no_grad():
    out = model(input_ids=ids, use_cache=True)
    tok = int(out.logits[0, -1].argmax())
    print(f"token {tok}", flush=True)
    for _ in range(3):
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=out.past_key_values,
                    use_cache=True)
        tok = int(out.logits[0, -1].argmax())
        print(f"token {tok}", flush=True)
print(f"done in {time.monotonic() - t0:.2f} s", flush=True)
