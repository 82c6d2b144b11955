"""Scoring engine: pseudo-log-likelihood (PLL) for masked LMs, exact log-likelihood for causal LMs.

Three steps, one function each, run top to bottom by :func:`score_batch`:

1. ``prepare``: tokenize every text once with the fast tokenizer (ids, character offsets, word
   ids), decide which tokens are scored and, for a masked LM, which positions each *masked copy*
   hides. A copy is a small index record (which text, which positions masked, which scored),
   never a tensor.
2. ``compute``: all copies of all texts are sorted by length and cut into sub-batches of at most
   ``token_budget`` tokens (copies x padded length). The encoder runs once per sub-batch; its
   hidden states are gathered at the positions being scored and only those go through the
   prediction head. So the vocabulary projection costs (scored tokens x vocab), never
   (copies x length x vocab), which is what makes minicons run out of memory on long texts.
3. ``assemble``: per-token scores (text, character offsets, log-probability, rank, masked
   positions), per-word sums on request, per-candidate total / mean / score.

Methods (``docs/method.md``, section 3):
- ``salazar``: mask only the scored token (Salazar et al. 2020, "1 mask").
- ``right_masks``: also mask the next ``right_masks`` tokens to its right (Samuel 2024, the
  BERTs paper: 2 extra masks; masks never cover special tokens, so they stop at the text's end).
- ``within_word_l2r``: also mask the later subwords of the same word (Kauf and Ivanova 2023;
  same convention as minicons' ``PLL_metric="within_word_l2r"``, words from ``word_ids()``).
- ``whole_word``: mask every subword of the word; one copy per word scores all its subwords.
- ``decoder``: not a PLL: the masked LM's exact left-to-right likelihood, each token read in the
  window generation predicts it from, ``[CLS] text-before-it [MASK] [MASK]*p [SEP]`` (the BERTs
  paper's Table 5, last row; ``demo.engine.pll_decoder``, which replaces step 2 for it).
- ``causal``: exact left-to-right log-likelihood, one forward pass per text (causal LMs only).

The approximate PLL (``ScoringSettings.stride`` s > 1, any PLL method; off by default): every
s-th copy of a text merged into one, so s copies score it instead of one per token; in a ranking,
the tokens its candidates share and the others are merged apart, and ``rescore_band`` re-scores
the near-ties exactly (``demo.engine.pll_approx``). :func:`tokens_read` counts what it saves.
Fast scoring (``ScoringSettings.fast``) gives each ranking the setting measured for its length
(:func:`fast_plan`), exact where none was.

Every public function takes raw text and one :class:`ScoringSettings`; the text conventions
(newline marker, junction space: ``demo.engine.text``) and GPT-3's unconditional normalisation are
applied here, never by callers. Log-probabilities are natural logs.
"""

import statistics
from dataclasses import dataclass, replace

import torch
from tqdm.auto import tqdm

from ..settings import PLL_METHODS, ScoringSettings
from ..user_text import check_readable, quoted
from .batching import logprobs_and_ranks, padded, sub_batches
from .counting import Reads, count_pass
from .elbo import Pattern, enumerated, estimate, patterns
from .heads import causal_head, mlm_head
from .mask_window import padding_masks_of, window_length
from .pll_approx import FastBand, fast_band, near_ties, shared_tokens
from .pll_decoder import check_room, decoder_scores, windows
from .reading import hidden_at
from .text import encode_newlines, join, model_pair

# ---------------------------------------------------------------- results


@dataclass
class TokenScore:
    token: str  # == text[start:end]; "" for a token that only marks whitespace (RoBERTa's "Ġ")
    start: int  # character offsets into CandidateScore.text
    end: int
    logprob: float
    rank: int  # rank of the true token among the model's predictions; 1 = top prediction
    masked: list[int]  # input positions masked when this token was scored ([] for causal LMs)
    position: int = 0  # this token's position in the model input (0 is [CLS] for most MLMs)


@dataclass
class WordScore:
    word: str
    start: int
    end: int
    logprob: float  # sum over the word's scored tokens
    n_tokens: int


@dataclass
class CandidateScore:
    candidate: str
    text: str  # the text the model read (context + completion, newlines encoded); offsets refer to it
    tokens: list[TokenScore]
    total: float  # sum of the scored tokens' log-probabilities
    mean: float  # total / number of scored tokens (NormPLL)
    score: float  # what ranking uses: total or mean (reduction), minus the unconditional score
    words: list[WordScore] | None = None
    unconditional: float | None = None  # score(candidate | unconditional context), if used
    # the ELBO's Monte Carlo standard error of ``score`` (per token where ranked by the mean; 0: every
    # masking pattern scored); None for other methods
    stderr: float | None = None


def candidate_from_dict(record: dict) -> CandidateScore:
    """A :class:`CandidateScore` back from its ``dataclasses.asdict`` (what a JSON file keeps:
    JSON numbers read back as the same floats, so nothing changes on the way)."""
    words = record.get("words")
    return CandidateScore(**{**record, "tokens": [TokenScore(**t) for t in record["tokens"]],
                             "words": None if words is None else [WordScore(**w) for w in words]})


# ---------------------------------------------------------------- 1. prepare


@dataclass
class _Text:
    """One tokenized text and which of its tokens are scored."""
    text: str
    ids: list[int]
    spans: list[tuple[int, int]]  # cleaned character span per token (see _token_spans)
    word_ids: list[int | None]
    special: list[bool]
    scored: list[int]  # token positions whose log-probability is wanted


@dataclass
class _Copy:
    """One masked copy of a text: the unit of work of the masked-LM forward pass."""
    text_index: int
    masked: tuple[int, ...]
    targets: tuple[int, ...]  # positions scored from this copy (several only for whole_word, elbo)
    pattern: Pattern | None = None  # elbo: the masking pattern this copy is, with its weight


def _token_spans(text: str, offsets, blank: list[bool]) -> list[tuple[int, int]]:
    """Character spans such that text[start:end] is a token's own text, spans never overlap.

    Why not the raw offsets: SentencePiece and some BPE tokenizers include the leading space in a
    token's offsets ("▁sat" -> " sat"), a lone "▁" shares its offsets with the next token, and
    RoBERTa's lone "Ġ" has an empty span. So: trim whitespace, clip each span to start where the
    previous one ended, and give tokens that only stand for whitespace an empty span.
    """
    spans, previous_end = [], 0
    for (start, end), is_blank in zip(offsets, blank):
        start = max(start, previous_end)
        end = max(end, start)
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if is_blank:
            end = start
        spans.append((start, end))
        previous_end = max(previous_end, end)
    return spans


def _tokenize(lm, context: str, completion: str, scope: str, blank_ids: dict) -> _Text:
    """Tokenize context + completion; ``blank_ids`` caches which token ids decode to whitespace."""
    tokenizer = lm.tokenizer
    check_readable(context, "context")
    check_readable(completion, "candidate" if context else "text")
    text = context + completion
    encoding = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True,
                         verbose=False)  # the length check is ours (lm.check_length)
    ids = list(encoding["input_ids"])
    offsets = [tuple(o) for o in encoding["offset_mapping"]]
    special = [bool(s) for s in encoding["special_tokens_mask"]]
    word_ids = list(encoding.word_ids())
    boundary = len(context) if scope == "completion" else 0

    def is_scored(i: int) -> bool:
        # A token is scored unless it lies entirely inside the context (raw offsets, so that a
        # whitespace token at the junction counts as the completion's).
        (s, e), sp = offsets[i], special[i]
        return not sp and (e > boundary or s >= boundary)

    if lm.kind == "causal" and ids and is_scored(0):
        # The text's first token is scored, so it needs something to be predicted from: the
        # start-of-text token (BOS, else EOS), exactly where lm-eval's HFLM puts its prefix token
        # (an empty context). A context's own first token is only read, never predicted, so a
        # context starts as the tokenizer starts it (docs/method.md, section 3).
        start_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if start_id is None:
            raise ValueError(f"{lm.label} has no BOS or EOS token to condition the first token on.")
        ids, offsets = [start_id] + ids, [(0, 0)] + offsets
        special, word_ids = [True] + special, [None] + word_ids
    lm.check_length(len(ids), what="text")

    for i in set(ids) - blank_ids.keys():
        blank_ids[i] = not tokenizer.decode([i]).strip()
    blank = [blank_ids[i] and not s for i, s in zip(ids, special)]
    spans = _token_spans(text, offsets, blank)
    scored = [i for i in range(len(ids)) if is_scored(i)]
    if not scored:
        what, value = ("candidate", completion) if scope == "completion" else ("text", text)
        raise ValueError(f"The {what} '{quoted(value.strip())}' has nothing to score: give it some "
                         f"words.")
    return _Text(text, ids, spans, word_ids, special, scored)


def _masked_copies(t: _Text, text_index: int, method: str, right_masks: int, stride: int = 1,
                   shared: frozenset | None = None) -> list[_Copy]:
    """The method's copies of one text, one per scored token (per word for whole_word); with
    ``stride`` s > 1 (the approximate PLL) every s-th of them merged into one copy.

    ``shared``: the positions this text shares with every other candidate of its ranking (None:
    no ranking). Those tokens' copies and the others' are merged apart: a shared token's score
    then never sees masks where the candidates differ, so its error is nearly the same in every
    candidate and cancels in their comparison (docs/method.md, section 3, measured there).
    """
    copies = _exact_copies(t, text_index, method, right_masks)
    if stride == 1:
        return copies
    parts = [copies] if shared is None else [[c for c in copies if c.targets[0] in shared],
                                             [c for c in copies if c.targets[0] not in shared]]
    merged = []
    for part in parts:
        # Copy c scores targets c, c+s, c+2s, ... each with its own masks; every target then also
        # sees the other targets' masks: the approximation.
        for group in (part[c::stride] for c in range(min(stride, len(part)))):
            masked = sorted({j for c in group for j in c.masked})
            merged.append(_Copy(text_index, tuple(masked), tuple(j for c in group for j in c.targets)))
    return merged


def _exact_copies(t: _Text, text_index: int, method: str, right_masks: int) -> list[_Copy]:
    n, words = len(t.ids), t.word_ids
    copies = []
    if method == "whole_word":
        # Masking the whole word is the same input for each of its subwords: one copy per word.
        groups: dict[int, list[int]] = {}
        for i in t.scored:  # a token without a word id is its own group (negative key)
            groups.setdefault(words[i] if words[i] is not None else -1 - i, []).append(i)
        for key, targets in groups.items():
            masked = [j for j in range(n) if words[j] == key] if key >= 0 else targets
            copies.append(_Copy(text_index, tuple(masked), tuple(targets)))
        return copies
    for i in t.scored:
        masked = [i]
        if method == "right_masks":
            masked += [j for j in range(i + 1, min(n, i + 1 + right_masks)) if not t.special[j]]
        elif method == "within_word_l2r" and words[i] is not None:
            j = i + 1
            while j < n and words[j] == words[i]:
                masked.append(j)
                j += 1
        copies.append(_Copy(text_index, tuple(masked), (i,)))
    return copies


# ---------------------------------------------------------------- 2. compute


def _compute_masked(lm, texts: list[_Text], copies: list[_Copy], token_budget: int,
                    progress: bool) -> dict[tuple[int, int], tuple[float, int, tuple]]:
    """(text index, position) -> (logprob, rank, masked positions) for every scored token."""
    read = _compute_copies(lm, texts, copies, token_budget, progress)
    return {(c.text_index, j): (logprob, rank, c.masked)
            for c, scores in zip(copies, read) for j, (logprob, rank) in zip(c.targets, scores)}


@torch.inference_mode()
def _compute_copies(lm, texts: list[_Text], copies: list[_Copy], token_budget: int,
                    progress: bool) -> list[list[tuple[float, int]]]:
    """Each copy's (logprob, rank) of each of its targets, in order."""
    head = mlm_head(lm.model)
    mask_id, pad_id = lm.tokenizer.mask_token_id, lm.tokenizer.pad_token_id
    results: list[list[tuple[float, int]]] = [[] for _ in copies]
    batches = sub_batches([len(texts[c.text_index].ids) for c in copies], token_budget)
    with tqdm(total=len(copies), desc="Scoring (masked copies)", unit="copy",
              disable=not progress) as bar:
        for batch in batches:
            batch_copies = [copies[k] for k in batch]
            input_ids, attention = padded([texts[c.text_index].ids for c in batch_copies],
                                           pad_id, lm.device)
            mask_rows = [r for r, c in enumerate(batch_copies) for _ in c.masked]
            mask_cols = [j for c in batch_copies for j in c.masked]
            input_ids[mask_rows, mask_cols] = mask_id
            target_rows = [r for r, c in enumerate(batch_copies) for _ in c.targets]
            target_cols = [j for c in batch_copies for j in c.targets]
            true_ids = torch.tensor([texts[c.text_index].ids[j] for c in batch_copies
                                     for j in c.targets], device=lm.device)

            # What the head reads (the last layer, or DeBERTa's enhanced mask decoder) and the
            # vocabulary projection, only at the scored positions: [scored tokens, vocab].
            hidden = hidden_at(lm.model, input_ids, attention, target_rows, target_cols)
            logprobs, ranks = logprobs_and_ranks(head, hidden, true_ids)

            owners = [k for k, c in zip(batch, batch_copies) for _ in c.targets]
            for k, logprob, rank in zip(owners, logprobs, ranks):
                results[k].append((logprob, rank))
            bar.update(len(batch_copies))
    return results


def _elbo_copies(texts: list[_Text], settings: ScoringSettings) -> list[_Copy]:
    """A masked copy per masking pattern the ELBO scores each text with, its masks its targets
    (drawn with a seed named by the text, so a text scores the same in any batch)."""
    return [_Copy(k, p.masked, p.masked, p) for k, t in enumerate(texts)
            for p in patterns(t.scored, settings.elbo_samples, f"{settings.elbo_seed}:{t.ids}")]


def _compute_elbo(lm, texts: list[_Text], copies: list[_Copy], settings: ScoringSettings,
                  progress: bool) -> tuple[dict[tuple[int, int], tuple[float, int, tuple]], list[float]]:
    """(text index, position) -> (the token's share of the ELBO, its mean rank where masked, its
    position), and each text's standard error, from every text's patterns run as masked copies."""
    read = _compute_copies(lm, texts, copies, settings.token_budget, progress)
    per_text: list[list[tuple[_Copy, list]]] = [[] for _ in texts]
    for copy, scores in zip(copies, read):
        per_text[copy.text_index].append((copy, scores))
    results, errors = {}, []
    for k, (t, runs) in enumerate(zip(texts, per_text)):
        shares, error = estimate([c.pattern for c, _ in runs], [[lp for lp, _ in s] for _, s in runs],
                                 sampled=not enumerated(len(t.scored), settings.elbo_samples))
        ranks: dict[int, list[int]] = {}
        for copy, scores in runs:
            for j, (_, rank) in zip(copy.masked, scores):
                ranks.setdefault(j, []).append(rank)
        results.update({(k, j): (shares.get(j, 0.0), round(statistics.mean(ranks.get(j, [0]))), (j,))
                        for j in t.scored})
        errors.append(error)
    return results, errors


@torch.inference_mode()
def _compute_causal(lm, texts: list[_Text], token_budget: int,
                    progress: bool) -> dict[tuple[int, int], tuple[float, int, tuple]]:
    """Exact log P(token | everything before it): one forward pass per text, batched."""
    decoder, head = lm.model.base_model, causal_head(lm.model)
    results = {}
    batches = sub_batches([len(t.ids) for t in texts], token_budget)
    with tqdm(total=len(texts), desc="Scoring (causal)", unit="text", disable=not progress) as bar:
        for batch in batches:
            # Right padding: real tokens keep positions 0..n-1, padding is masked out.
            input_ids, attention = padded([texts[k].ids for k in batch],
                                           lm.tokenizer.pad_token_id, lm.device)
            count_pass(input_ids, attention)
            hidden = decoder(input_ids=input_ids, attention_mask=attention,
                             use_cache=False).last_hidden_state
            pairs = [(r, j) for r, k in enumerate(batch) for j in texts[k].scored]
            rows = [r for r, _ in pairs]
            previous = [j - 1 for _, j in pairs]  # the hidden state that predicts token j
            true_ids = torch.tensor([texts[batch[r]].ids[j] for r, j in pairs], device=lm.device)
            logprobs, ranks = logprobs_and_ranks(head, hidden[rows, previous], true_ids)
            for (r, j), logprob, rank in zip(pairs, logprobs, ranks):
                results[(batch[r], j)] = (logprob, rank, ())
            bar.update(len(batch))
    return results


# ---------------------------------------------------------------- 3. assemble


def _assemble(t: _Text, text_index: int, completion: str, results, normalize: bool,
              word_level: bool) -> CandidateScore:
    tokens = []
    for j in t.scored:
        logprob, rank, masked = results[(text_index, j)]
        start, end = t.spans[j]
        tokens.append(TokenScore(token=t.text[start:end], start=start, end=end, logprob=logprob,
                                 rank=rank, masked=list(masked), position=j))
    total = sum(tok.logprob for tok in tokens)
    mean = total / len(tokens)
    words = _words(t, tokens) if word_level else None
    return CandidateScore(candidate=completion, text=t.text, tokens=tokens, total=total,
                          mean=mean, score=mean if normalize else total, words=words)


def _words(t: _Text, tokens: list[TokenScore]) -> list[WordScore]:
    """Group scored tokens by the tokenizer's word ids (consecutive tokens of one word)."""
    groups: list[list[TokenScore]] = []
    for tok in tokens:
        word = t.word_ids[tok.position]
        if groups and word is not None and t.word_ids[groups[-1][0].position] == word:
            groups[-1].append(tok)
        else:
            groups.append([tok])
    words = []
    for group in groups:
        spans = [(tok.start, tok.end) for tok in group if tok.end > tok.start] or \
                [(group[0].start, group[0].start)]
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        words.append(WordScore(word=t.text[start:end], start=start, end=end,
                               logprob=sum(tok.logprob for tok in group), n_tokens=len(group)))
    return words


# ---------------------------------------------------------------- public API


def input_length(lm, text: str, settings: ScoringSettings | None = None) -> int:
    """Tokens of the longest input the engine feeds the model for ``text`` scored whole
    (``scope="full"``): the newline marker applied, the tokenizer's specials, a causal LM's start
    token where the tokenizer puts none first (as :func:`_tokenize`); with the decoder's method,
    its last window. No length check: for callers that cut long texts to fit."""
    settings = settings or ScoringSettings()
    text = encode_newlines(text, lm.newline_survives)
    if settings.method_for(lm) == "decoder":
        ids = lm.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return window_length(len(ids) - 1, padding_masks_of(lm, settings.padding_masks))
    ids = lm.tokenizer(text, verbose=False)["input_ids"]
    starts = lm.kind == "causal" and not (ids and ids[0] in lm.tokenizer.all_special_ids)
    return len(ids) + starts


def score_batch(lm, items: list[tuple[str, str]], settings: ScoringSettings | None = None, *,
                progress: bool = False, rankings: list[range] | None = None) -> list[CandidateScore]:
    """Score each raw (context, completion) pair; the model reads context + completion.

    The text conventions of ``demo.engine.text`` are applied here (newline marker, junction space);
    ``CandidateScore.text`` is the text the model read. Identical items are scored once.
    ``rankings`` (ranges of ``items``, each the candidates of one ranking) tell the approximate PLL
    (``settings.stride`` > 1) which tokens the candidates share (``_masked_copies``); the exact
    PLL does not use them.
    """
    settings = settings or ScoringSettings()
    method = settings.method_for(lm)
    keys, unique, texts, copies = _prepare(lm, items, settings, rankings)
    errors = None
    if method == "causal":
        results = _compute_causal(lm, texts, settings.token_budget, progress)
    elif method == "decoder":
        results = decoder_scores(lm, texts, padding_masks_of(lm, settings.padding_masks),
                                 settings.token_budget, progress)
    elif method == "elbo":
        results, errors = _compute_elbo(lm, texts, copies, settings, progress)
    else:
        results = _compute_masked(lm, texts, copies, settings.token_budget, progress)
    scored = {key: _assemble(t, k, key[0][1], results, settings.reduction == "mean", settings.word_level)
              for k, (key, t) in enumerate(zip(unique, texts))}
    if errors is not None:
        for k, key in enumerate(unique):
            per = len(scored[key].tokens) if settings.reduction == "mean" else 1
            scored[key].stderr = errors[k] / per
    return [scored[key] for key in keys]


def _prepare(lm, items: list[tuple[str, str]], settings: ScoringSettings, rankings: list[range] | None):
    """(a key per item, the distinct keys, their texts, a PLL method's copies or None): step 1.

    A key is the item and the positions it shares with its ranking's other candidates (None
    unless the approximate PLL uses them): a text is scored once per key."""
    method = settings.method_for(lm)
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and all(isinstance(s, str) for s in item)):
            raise ValueError(f"Each item must be a (context, completion) pair of strings, not {item!r}.")
    pairs = [(c, x) for c, x in items]
    blank_ids = {}
    tokenized = {pair: _tokenize(lm, *model_pair(*pair, lm.newline_survives), settings.scope, blank_ids)
                 for pair in dict.fromkeys(pairs)}
    shared: list[frozenset | None] = [None] * len(pairs)
    if rankings and settings.stride > 1 and method in PLL_METHODS:
        for ranking in rankings:
            positions = shared_tokens([tokenized[pairs[i]].ids for i in ranking])
            for i, kept in zip(ranking, positions):
                shared[i] = frozenset(kept)
    keys = list(zip(pairs, shared))
    unique = list(dict.fromkeys(keys))
    texts = [tokenized[pair] for pair, _ in unique]
    if method == "decoder":
        for t in texts:
            check_room(lm, t, padding_masks_of(lm, settings.padding_masks))
    if method == "elbo":
        return keys, unique, texts, _elbo_copies(texts, settings)
    if method not in PLL_METHODS:
        return keys, unique, texts, None
    copies = [copy for k, ((_, kept), t) in enumerate(zip(unique, texts))
              for copy in _masked_copies(t, k, method, settings.right_masks, settings.stride, kept)]
    return keys, unique, texts, copies


@dataclass(frozen=True)
class Choice:
    """One candidate of a ranking: ``completion`` is scored after ``context``; ``candidate`` is
    the answer itself, what follows the unconditional context (they differ when a template
    wraps the candidate, e.g. Winograd's sentence around it)."""
    context: str
    completion: str
    candidate: str


def choices_for(context: str, candidates: list[str]) -> list[Choice]:
    """Candidates typed on their own, each joined to the context by ``demo.engine.text.join``."""
    if not isinstance(context, str):
        raise ValueError(f"The context must be a string, not {type(context).__name__}.")
    if isinstance(candidates, str) or not candidates:
        raise ValueError("Give at least one candidate completion (a list of strings).")
    for candidate in candidates:
        if not isinstance(candidate, str) or not candidate.strip():
            raise ValueError(f"Every candidate needs some non-whitespace text; got {candidate!r}.")
    return [Choice(context, join(context, c), c) for c in candidates]


def score_choices(lm, choice_sets: list[list[Choice]], settings: ScoringSettings | None = None, *,
                  progress: bool = False) -> list[list[CandidateScore]]:
    """Score every choice of every set in one batched run; one result per choice, in order.

    With ``settings.unconditional_context`` (e.g. "Answer:"), ``score`` becomes
    score(completion | context) minus score(candidate | unconditional context): GPT-3's
    normalisation for ARC and OpenBookQA, computed here and nowhere else.
    """
    settings = settings or ScoringSettings()
    if settings.fast:
        return _in_groups(lm, choice_sets, settings, lambda group, chosen: score_choices(
            lm, group, chosen, progress=progress))
    flat, sets = _flatten(choice_sets)
    results = _score_flat(lm, flat, sets, settings, progress)
    if settings.stride > 1 and settings.rescore_band > 0 and settings.method_for(lm) in PLL_METHODS:
        # The approximate PLL: each ranking's near-ties are scored again, exactly (demo.engine.pll_approx).
        again = []
        for ranking in sets:
            close = near_ties([results[k].score for k in ranking], settings.rescore_band)
            again += [ranking[i] for i in close]
        if again:
            exact = _score_flat(lm, [flat[k] for k in again], [], replace(settings, stride=1), progress)
            for k, result in zip(again, exact):
                results[k] = result
    remaining = iter(results)
    return [[next(remaining) for _ in choices] for choices in choice_sets]


def scored_span(lm, choices: list[Choice], settings: ScoringSettings) -> int:
    """Tokens scored in the longest candidate of a ranking (what fast scoring's bands are set by)."""
    return max(len(_tokenize(lm, *model_pair(c.context, c.completion, lm.newline_survives), settings.scope,
                             {}).scored) for c in choices)


def fast_plan(lm, choice_sets: list[list[Choice]], settings: ScoringSettings) -> list[FastBand | None]:
    """Per ranking, the approximate PLL setting fast scoring gives it (``demo.engine.pll_approx``),
    or None where it is scored exactly: fast off, not a PLL method, one candidate, no band measured
    for its length."""
    if not settings.fast or settings.method_for(lm) not in PLL_METHODS:
        return [None] * len(choice_sets)
    return [fast_band(scored_span(lm, choices, settings)) if len(choices) > 1 else None
            for choices in choice_sets]


def _in_groups(lm, choice_sets: list[list[Choice]], settings: ScoringSettings, run) -> list:
    """``run(rankings, settings)`` once per setting of ``fast_plan``, on the rankings it covers;
    the results back in the rankings' order."""
    plan = fast_plan(lm, choice_sets, settings)
    results: list = [None] * len(choice_sets)
    for band in dict.fromkeys(plan):
        which = [k for k, b in enumerate(plan) if b == band]
        chosen = replace(settings, fast=False) if band is None else replace(
            settings, fast=False, stride=band.stride, rescore_band=band.rescore_band)
        for k, result in zip(which, run([choice_sets[k] for k in which], chosen)):
            results[k] = result
    return results


def _score_flat(lm, flat: list[Choice], sets: list[range], settings: ScoringSettings,
                progress: bool) -> list[CandidateScore]:
    """One result per choice (``sets``: the rankings among them), its unconditional score
    subtracted where the settings ask."""
    neutral = settings.unconditional_context
    items, rankings = _choice_items(flat, sets, neutral)
    scores = score_batch(lm, items, settings, progress=progress, rankings=rankings)
    results = []
    for k, choice in enumerate(flat):
        result = replace(scores[k], candidate=choice.candidate)
        if neutral is not None:
            unconditional = scores[len(flat) + k].score
            result = replace(result, unconditional=unconditional, score=result.score - unconditional)
        results.append(result)
    return results


def _flatten(choice_sets: list[list[Choice]]) -> tuple[list[Choice], list[range]]:
    """All choices in one list, and each set's range in it."""
    flat = [choice for choices in choice_sets for choice in choices]
    starts = [sum(len(choices) for choices in choice_sets[:k]) for k in range(len(choice_sets))]
    return flat, [range(start, start + len(choices)) for start, choices in zip(starts, choice_sets)]


def _choice_items(flat: list[Choice], sets: list[range],
                  neutral: str | None) -> tuple[list[tuple[str, str]], list[range]]:
    """The (context, completion) pairs scored for these choices: each choice, then (with an
    unconditional context) each candidate after it; and the rankings among them."""
    items = [(c.context, c.completion) for c in flat]
    rankings = list(sets)
    if neutral is not None:
        items += [(neutral, join(neutral, c.candidate.strip())) for c in flat]
        rankings += [range(len(flat) + r.start, len(flat) + r.stop) for r in sets]
    return items, rankings


def tokens_read(lm, choice_sets: list[list[Choice]], settings: ScoringSettings | None = None) -> int:
    """Tokens the model reads to score these rankings as :func:`score_choices` does, before any
    near-tie is re-scored (a masked LM: every masked copy's length, summed; a causal LM: every
    text's length; the decoder: every window's length), counted without running it: the cost the
    approximate PLL cuts."""
    return choice_reads(lm, choice_sets, settings).tokens


def choice_reads(lm, choice_sets: list[list[Choice]], settings: ScoringSettings | None = None) -> Reads:
    """The rows and tokens :func:`score_choices` reads for these rankings, before any near-tie is
    re-scored, counted without running the model (what each of several rankings scored in one
    batch read)."""
    settings = settings or ScoringSettings()
    if settings.fast:
        return sum(_in_groups(lm, choice_sets, settings, lambda group, chosen: [
            choice_reads(lm, [ranking], chosen) for ranking in group]), Reads())
    flat, sets = _flatten(choice_sets)
    return planned_reads(lm, *_choice_items(flat, sets, settings.unconditional_context), settings)


def planned_reads(lm, items: list[tuple[str, str]], rankings: list[range] | None = None,
                  settings: ScoringSettings | None = None) -> Reads:
    """The rows and tokens scoring ``items`` reads as :func:`score_batch` reads them (a masked LM:
    a row per masked copy, the whole text; a causal LM: a row per text; the decoder: a row per
    window), counted without running the model: what the app's work budget asks of the engine."""
    settings = settings or ScoringSettings()
    _, _, texts, copies = _prepare(lm, items, settings, rankings)
    if settings.method_for(lm) == "decoder":
        rows = [len(window) for *_, window in windows(lm, texts, padding_masks_of(lm, settings.padding_masks))]
    elif copies is None:
        rows = [len(t.ids) for t in texts]
    else:
        rows = [len(texts[copy.text_index].ids) for copy in copies]
    return Reads(passes=len(rows), tokens=sum(rows))


def check_choices(lm, choices: list[Choice], settings: ScoringSettings | None = None) -> None:
    """Raise what ``score_choices`` would raise for these texts (``InputTooLong`` for one longer
    than the model reads), without running the model: for callers that filter inputs first."""
    settings = settings or ScoringSettings()
    decoder = settings.method_for(lm) == "decoder"
    for context, completion in _choice_items(choices, [], settings.unconditional_context)[0]:
        t = _tokenize(lm, *model_pair(context, completion, lm.newline_survives), settings.scope, {})
        if decoder:
            check_room(lm, t, padding_masks_of(lm, settings.padding_masks))


def score_candidate_sets(lm, requests: list[tuple[str, list[str]]],
                         settings: ScoringSettings | None = None, *,
                         progress: bool = False) -> list[list[CandidateScore]]:
    """Candidates of many contexts, batched together: ``[(context, [candidate, ...]), ...]``.

    Every masked copy of every candidate of every request shares the sub-batches, so many small
    requests (a benchmark's examples) run as fast as one large one.
    """
    return score_choices(lm, [choices_for(context, candidates) for context, candidates in requests],
                         settings, progress=progress)


def score_candidates(lm, context: str, candidates: list[str], settings: ScoringSettings | None = None,
                     *, progress: bool = False) -> list[CandidateScore]:
    """Score candidate completions of one context (one result per candidate, in order)."""
    return score_candidate_sets(lm, [(context, candidates)], settings, progress=progress)[0]
