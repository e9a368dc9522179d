# %% [markdown]
# # Attention explorer
#
# Pick a sentence, a layer and a head of MiniLM, the BERT of
# [Part I](../bert/self-attention.md): the heatmap shows how much each token (a row)
# attends to every token (the columns). Every row sums to 1.
#
# To play, download the notebook (the link under the title), change the values below
# and run it again. Any sentence works: `word` is the word whose attention the last
# table follows, and when the sentence does not have it, the table follows the
# sentence's last word.

# %%
sentence = "The animal didn't cross the street because it was too tired."
layer = 2  # 0 to 5
head = 8  # 0 to 11
word = "it"

# %%
import matplotlib.pyplot as plt
import torch
from transformers import AutoModel, AutoTokenizer

name = "sentence-transformers/all-MiniLM-L6-v2"
tokenizer = AutoTokenizer.from_pretrained(name)
# eager attention: the default (SDPA) computes attention without returning the weights
model = AutoModel.from_pretrained(name, attn_implementation="eager").eval()


@torch.no_grad()
def attention_of(text):
    """The tokens of `text` and every layer's attention: L × (H, T, T)."""
    inputs = tokenizer(text, return_tensors="pt", truncation=True)
    attentions = model(**inputs, output_attentions=True).attentions  # L × (B, H, T, T)
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    return tokens, [a[0] for a in attentions]


tokens, attentions = attention_of(sentence)
print(f"{len(tokens)} tokens: {' '.join(tokens)}")
print(f"{len(attentions)} layers, each {tuple(attentions[0].shape)} (H, T, T)")


# %%
def show_head(layer, head, ax=None):
    weights = attentions[layer][head]  # (T, T): row = query token, column = key token
    ax = ax or plt.subplots(figsize=(6.5, 5.5))[1]
    ax.imshow(weights.numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=9)
    ax.set_yticks(range(len(tokens)), tokens, fontsize=9)
    ax.set_title(f"layer {layer}, head {head}", fontsize=10)
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
    ax.imshow(attentions[layer][h].numpy(), cmap="Blues", vmin=0, vmax=1)
    ax.set_title(f"head {h}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle(f"layer {layer}: rows are queries, columns keys ({len(tokens)} tokens)")
plt.show()

# %% [markdown]
# ## Where does one word look?
#
# For `word`, each layer's three heads that put the most weight on a single other
# word of the sentence, and that word. `[CLS]`, `[SEP]` and the word itself are left
# out: most heads park their weight there.


# %%
def position_of(word, tokens):
    """The first token that is `word`; else the sentence's last word (a token of letters
    that does not continue another word), else the last token before [SEP]."""
    if word.lower() in tokens:
        return tokens.index(word.lower())
    words = [i for i, token in enumerate(tokens) if token.isalpha()]
    return words[-1] if words else len(tokens) - 2


query = position_of(word, tokens)
others = [i for i, t in enumerate(tokens) if i != query and t not in ("[CLS]", "[SEP]")]
print(f"following {tokens[query]!r} (token {query})")
print("layer  head  weight  on")
for layer_index, weights in enumerate(attentions):
    if not others:
        break
    to_others = weights[:, query, others]  # (H, T'): each head's weight on each other token
    best, where = to_others.max(dim=1)  # (H,), (H,)
    for h in best.argsort(descending=True)[:3].tolist():
        print(f"{layer_index:>5} {h:>5} {best[h]:>7.3f}  {tokens[others[where[h]]]}")

# %% [markdown]
# ## Does a head follow the referent?
#
# "The animal didn't cross the street because it was too **tired**": `it` is the
# animal. Make it too **wide**, and `it` is the street. A story about attention says a
# head resolves the pronoun. Measured on both sentences, the weight that `it` puts on
# `animal` and on `street` in each head, and how far it moves toward `street` when the
# referent changes: a head that followed the referent would move most of its weight.

# %%
pair = [
    f"The animal didn't cross the street because it was too {end}." for end in ("tired", "wide")
]
weights = {}
for text in pair:
    pair_tokens, pair_attentions = attention_of(text)
    it, animal, street = (pair_tokens.index(t) for t in ("it", "animal", "street"))
    from_it = torch.stack([a[:, it] for a in pair_attentions])  # (L, H, T)
    weights[text] = from_it[:, :, animal], from_it[:, :, street]  # (L, H) each
(animal_tired, street_tired), (animal_wide, street_wide) = weights.values()
toward_street = (street_wide - animal_wide) - (street_tired - animal_tired)  # (L, H)

print("              tired            wide")
print("layer head  →animal →street  →animal →street  moved")
order = toward_street.flatten().argsort(descending=True).tolist()
for index in order[:5] + order[-2:]:
    row = divmod(index, toward_street.shape[1])  # (layer, head)
    print(
        f"{row[0]:>5} {row[1]:>4} {animal_tired[row]:>8.3f} {street_tired[row]:>7.3f}"
        f" {animal_wide[row]:>8.3f} {street_wide[row]:>7.3f} {toward_street[row]:>+6.3f}"
    )
moved = (toward_street.abs() > 0.1).sum().item()
print(f"heads that move more than 0.1 of their weight: {moved} of {toward_street.numel()}")
follows = (animal_tired > street_tired) & (street_wide > animal_wide)  # (L, H)
print("heads whose larger share goes to the referent in both sentences:", end=" ")
print(", ".join(f"{i}.{j}" for i, j in follows.nonzero().tolist()) or "none")

# %% [markdown]
# Most heads barely move. The heads that do are candidates, not proof: two sentences
# show a correlation, and whether the model needs those heads to tell the referents
# apart is a question for an ablation, which would zero them and measure the change.
