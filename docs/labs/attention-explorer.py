# %% [markdown]
# # Attention explorer
#
# Pick a sentence, a layer and a head of MiniLM (the BERT of Part I): the heatmap
# shows how much each token (a row) attends to every token (the columns). Every row
# sums to 1.
#
# To play, download the notebook (the link under the title), change the three
# values below and run it again. It runs in the book's environment offline, or
# anywhere `transformers` can download the model.

# %%
sentence = "The animal didn't cross the street because it was too tired."
layer = 2  # 0 to 5
head = 8  # 0 to 11

# %%
import matplotlib.pyplot as plt
import torch
from transformers import AutoModel, AutoTokenizer

name = "sentence-transformers/all-MiniLM-L6-v2"
tokenizer = AutoTokenizer.from_pretrained(name)
# eager attention: the default (SDPA) computes attention without returning the weights
model = AutoModel.from_pretrained(name, attn_implementation="eager").eval()

inputs = tokenizer(sentence, return_tensors="pt")
with torch.no_grad():
    attentions = model(**inputs, output_attentions=True).attentions  # L × (B, H, T, T)
tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
print(f"{len(attentions)} layers, each {tuple(attentions[0].shape)} (B, H, T, T)")


# %%
def show_head(layer, head, ax=None):
    weights = attentions[layer][0, head]  # (T, T): row = query token, column = key token
    ax = ax or plt.subplots(figsize=(6.5, 5.5))[1]
    ax.imshow(weights, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
    ax.set_title(f"layer {layer}, head {head}", fontsize=9)
    return ax


show_head(layer, head)
plt.show()

# %% [markdown]
# ## Every head of the layer
#
# Heads of one layer read the same input and learn different patterns: some look
# at the next or previous token, some at `[SEP]` or `[CLS]` (a place to put
# attention when there is nothing useful to attend to), some at related words.

# %%
fig, axes = plt.subplots(3, 4, figsize=(10, 7.8))
for h, ax in enumerate(axes.flat):
    ax.imshow(attentions[layer][0, h], cmap="Blues", vmin=0, vmax=1)
    ax.set_title(f"head {h}", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle(f"layer {layer}: rows are queries, columns keys ({len(tokens)} tokens)")
plt.show()

# %% [markdown]
# ## Where does "it" look?
#
# For the token `it`, the share of its attention that goes to `animal` and to
# `street`, in every head of every layer. A head that resolves the pronoun would
# put most of its weight on `animal`. Measure before you believe a story about
# what a head "does".

# %%
query = tokens.index("it")
animal, street = tokens.index("animal"), tokens.index("street")
from_it = torch.stack([a[0, :, query] for a in attentions])  # (L, H, T)
preference = from_it[:, :, animal] - from_it[:, :, street]  # (L, H)
print("the five heads that tell animal and street apart most")
print("layer  head  →animal  →street")
for index in preference.abs().flatten().argsort(descending=True)[:5].tolist():
    layer_index, head_index = divmod(index, preference.shape[1])
    weights = from_it[layer_index, head_index]
    print(f"{layer_index:>5} {head_index:>5} {weights[animal]:>8.3f} {weights[street]:>8.3f}")
