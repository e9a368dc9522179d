# %% [markdown]
# # Logit lens
#
# GPT-2 turns its last residual stream into next-token scores with the final
# LayerNorm, `ln_f`, and the unembedding, `lm_head`. Nothing stops us from doing the
# same with the stream after any earlier block: the *logit lens* (nostalgebraist,
# 2020). It shows what each layer would predict if the model stopped there. The
# model is the book's small GPT-2, trained on Shakespeare in
# [Part III](../gpt2/training.md); its forward pass is built by hand in
# [the forward pass by hand](../gpt2/forward.md).
#
# To play, download the notebook (the link under the title), change the prompt and
# run it again. Any text works.

# %%
prompt = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and"

# %%
import matplotlib.pyplot as plt
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel

name = "tensor-by-tensor/gpt2-shakespeare"
tokenizer = AutoTokenizer.from_pretrained(name)
model = GPT2LMHeadModel.from_pretrained(name).eval()


@torch.no_grad()
def logit_lens(input_ids):
    """Every layer's residual stream read as next-token logits: (L + 1, T, V).

    Row 0 reads the embeddings, row l the stream after block l. transformers returns
    the last hidden state with ln_f applied already, so it goes to lm_head as it is."""
    outputs = model(input_ids, output_hidden_states=True)
    *streams, last = outputs.hidden_states  # L × (1, T, C), then (1, T, C) after ln_f
    normed = [model.transformer.ln_f(stream) for stream in streams] + [last]
    lens = torch.cat([model.lm_head(x) for x in normed])  # (L + 1, T, V)
    return lens, outputs.logits[0]


input_ids = tokenizer(prompt, return_tensors="pt")["input_ids"][:, -64:]  # (1, T)
lens, logits = logit_lens(input_ids)
tokens = [tokenizer.decode([i]) for i in input_ids[0].tolist()]
print(f"{len(tokens)} tokens, lens {tuple(lens.shape)} (L + 1, T, V)")
print("the last row is the model's own logits:", torch.allclose(lens[-1], logits, atol=1e-5))

# %% [markdown]
# ## What each layer would say next
#
# For the last few positions of the prompt, each layer's most likely next token.
# Row `embed` reads the token embeddings alone. GPT-2 unembeds with the transpose of
# its token embedding (tied weights), so that row tends to predict the input token
# itself: the last line counts how often.

# %%
shown = range(max(0, len(tokens) - 6), len(tokens))
names = ["embed"] + [f"block {b}" for b in range(len(lens) - 1)]
print(f"{'':>9}" + "".join(f"{tokens[t]!r:>12}" for t in shown))
for row, layer_name in enumerate(names):
    top = lens[row, list(shown)].argmax(dim=-1).tolist()
    print(f"{layer_name:>9}" + "".join(f"{tokenizer.decode([i])!r:>12}" for i in top))
echo = (lens[0].argmax(dim=-1) == input_ids[0]).float().mean()
print(f"the embed row predicts its own input token at {echo:.0%} of the {len(tokens)} positions")

# %% [markdown]
# ## When does the final answer appear?
#
# For every position, the probability each layer gives to the token the whole model
# ranks first. A bright column early on means the answer was settled in a low layer.

# %%
final = logits.argmax(dim=-1)  # (T,): the model's own top token at each position
probs = lens.softmax(dim=-1)  # (L + 1, T, V)
on_final = probs[:, torch.arange(len(tokens)), final]  # (L + 1, T)
fig, ax = plt.subplots(figsize=(10, 3.2))
image = ax.imshow(on_final.numpy(), cmap="Blues", vmin=0, vmax=1, aspect="auto")
ax.set_yticks(range(len(names)), names, fontsize=9)
ax.set_xticks(range(len(tokens)), [repr(t)[1:-1] for t in tokens], rotation=90, fontsize=8)
ax.set_xlabel("position (the token read there)")
fig.colorbar(image, ax=ax, label="probability of the final top token")
plt.show()
print("mean probability of the final top token, by layer:")
for layer_name, p in zip(names, on_final.mean(dim=1).tolist(), strict=True):
    print(f"{layer_name:>9} {p:.3f}")
