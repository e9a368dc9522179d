"""A GGUF checkpoint, dequantised once into a plain transformers folder.

transformers dequantises a GGUF file every time it loads one (about 25 s for
SmolLM2-135M on a laptop CPU). Saved once as float32 safetensors, the same
model loads in about a second, with exactly the same logits (tests/test_snippets_hub.py).
Included by docs/gpt2/smollm2.md; snippets.hub uses it at set-up.
"""

# --8<-- [start:dequantize_once]
import os
import shutil
import tempfile
from pathlib import Path

from safetensors.torch import save_model
from transformers import AutoModelForCausalLM, AutoTokenizer


def dequantize_once(repo_id, gguf_file, target):
    """The folder `target` holding the GGUF's model in float32; converted on the first call."""
    target = Path(target)
    if (target / "model.safetensors").is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(repo_id, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(repo_id, gguf_file=gguf_file)
    del model.config.quantization_config  # the saved weights are plain float32
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    try:  # written whole, then renamed: an interrupted run leaves no half-written folder
        save_model(model, str(staging / "model.safetensors"))  # the tied embeddings stored once
        model.config.save_pretrained(staging)
        model.generation_config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


# --8<-- [end:dequantize_once]
