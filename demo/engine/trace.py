"""The step trace of ``generate()``: what the model saw and weighed at every step (for teaching).
Infilling (``demo.engine.infill``) records its steps as the same ``StepTrace``, built as it goes.

``StepRecorder`` is the last logits processor: it sees the scores the decoder chooses from and
records each step's top tokens and, for beam search, the cumulative score of every live row.
``build_trace`` then follows the final output back through the steps, taking each step from the
row that held the output's prefix, and adds the masked LM's window from the decoding's record
(``demo.engine.mlm_decoder.DecodingRecord``).
"""

from dataclasses import dataclass
from itertools import accumulate

from transformers import LogitsProcessor

from .constraints import continuation
from .counting import Reads
from .mlm_decoder import DecodingRecord


@dataclass
class StepTrace:
    step: int
    window: list[str]  # tokens the model saw this step, masks included
    mask_positions: list[int]  # positions of the masks in `window` (first = predicted, unless `predicted`); [] causal
    top: list[tuple[str, float]]  # top-k next tokens (as text) with probabilities
    chosen: str  # the token taken at this step (as text; the end token as its name)
    beams: list[tuple[str, float]] | None  # beam search: live hypotheses, cumulative log-prob
    prompt_length: int  # window[:prompt_length] is [CLS] and the prompt (masked) or the prompt (causal)
    refreshed: bool | None = None  # fast decoding: whole window re-read (True) or only its tail; else None
    # the position in `window` predicted this step; None: mask_positions[0] (generation). Infilling
    # (demo.engine.infill) sets it: its order need not be left to right
    predicted: int | None = None
    # parallel unmasking (demo.engine.parallel_unmasking): j > 0 when this step ran no pass of its
    # own and took padding mask j of the window of step `step - j` (`window` is that one's)
    read_from: int = 0
    # the forward passes this step ran and the tokens they read, all rows together
    # (``demo.engine.counting``); None where nobody counted
    reads: Reads | None = None
    # any-order unmasking (demo.engine.unmasking): the positions written this step (several when
    # it writes several tokens a step), their tokens as text, and the positions masked again
    written: list[int] | None = None
    written_tokens: list[str] | None = None
    remasked: list[int] | None = None
    surest: float | None = None  # ... and the probability of the surest guess at the masks it read
    # ... and of the surest guess at a mask it read but left masked (None: it wrote every mask it
    # read): the guess a confidence threshold at or below it would have written too
    surest_unwritten: float | None = None


class StepRecorder(LogitsProcessor):
    """Counts decoding steps and, for the trace, records what each step saw and scored.

    Installed after every constraint, so it sees the scores the decoder chooses from (for
    sampling: before temperature / top-k / top-p, which transformers applies afterwards). For
    beam search those scores are the log-probs added to each hypothesis, so cumulative beam
    scores follow by adding each row's parent score and its last token's log-prob.
    """

    def __init__(self, prompt_len: int, record: bool, top_k: int, reads: Reads | None = None):
        self.prompt_len, self.record, self.top_k = prompt_len, record, top_k
        self.n_steps = 0
        # the request's counter, read after each step's pass: what each step read
        self.reads, self.step_reads, self._counted = reads, [], Reads()
        self.steps: list[dict] = []
        self._previous = None  # (rows, cumulative scores, scores) of the last step
        # one row (greedy, sampling): the log-prob of each step's token among what the decoder
        # could write, read when the next step shows which token it was
        self.chosen_logprobs: list[float] = []
        self._row_logprobs = None

    def __call__(self, input_ids, scores):
        self.n_steps += 1
        # the step's scores stay on the model's device: only the values read come to the host
        if scores.shape[0] == 1:
            if self._row_logprobs is not None:
                self.chosen_logprobs.append(float(self._row_logprobs[input_ids[0, -1]]))
            self._row_logprobs = scores[0].detach().float().log_softmax(-1)
        if self.reads is not None:
            self.step_reads.append(Reads(self.reads.passes - self._counted.passes,
                                         self.reads.tokens - self._counted.tokens))
            self._counted = Reads(self.reads.passes, self.reads.tokens)
        if not self.record:
            return scores
        rows = [tuple(r) for r in input_ids[:, self.prompt_len:].tolist()]
        if self._previous is None:
            cumulative = [0.0] * len(rows)
        else:
            prev_rows, prev_cumulative, prev_scores = self._previous
            where = {r: i for i, r in enumerate(prev_rows)}
            cumulative = [prev_cumulative[where[r[:-1]]] + float(prev_scores[where[r[:-1]], r[-1]])
                          if r[:-1] in where else float("-inf") for r in rows]
        probs = scores.float().log_softmax(-1).exp()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        self.steps.append(dict(rows=rows, cumulative=cumulative, top_ids=top.indices.tolist(),
                               top_probs=top.values.tolist()))
        self._previous = (rows, cumulative, scores.detach().float())
        return scores

    def log_likelihood(self, ids) -> float | None:
        """The output's log-likelihood under the decoder: the sum of its tokens' log-probs, each
        at the step that wrote it (``ids``: the tokens after the prompt, an end token included);
        None where no single row was followed (beam search)."""
        if self._row_logprobs is None:
            return None if ids else 0.0
        values = self.chosen_logprobs[:len(ids)]
        if len(values) < len(ids):
            values = values + [float(self._row_logprobs[ids[len(values)]])]
        return sum(values)


def build_trace(lm, record: DecodingRecord | None, recorder: StepRecorder, prompt_ids, generated,
                tokens, end_ids, beam: bool) -> list[StepTrace]:
    """One StepTrace per token of the output, taken from the row that held its prefix; ``record``:
    what a masked LM's steps read (None for a causal LM, which reads its context)."""
    tokenizer, n = lm.tokenizer, len(prompt_ids)
    read_from = record.read_from if record is not None else (0,) * len(generated)
    refreshed = record.refreshed if record is not None else None  # fast decoding (masked LMs only)
    passes = list(accumulate(j == 0 for j in read_from))  # forward passes up to each step
    steps = []
    for t, token_id in enumerate(generated):
        scored = recorder.steps[t]
        prefix = tuple(generated[:t])  # beam search: some live row holds the output's prefix
        row = scored["rows"].index(prefix) if prefix in scored["rows"] else 0
        context = prompt_ids + list(generated[:t])
        if record is not None:
            window_ids = record.windows[t][row].tolist()
            first_mask = n + t - read_from[t] + 1  # in the window of this step's pass
            mask_positions = list(range(first_mask, first_mask + record.padding_masks + 1))
        else:
            window_ids, mask_positions = context, []
        top = [(piece_or_name(tokenizer, context, i, end_ids), p)
               for i, p in zip(scored["top_ids"][row], scored["top_probs"][row])]
        chosen = tokens[t] if t < len(tokens) else piece_or_name(tokenizer, context, token_id, end_ids)
        own_pass = read_from[t] == 0
        steps.append(StepTrace(step=t, window=tokenizer.convert_ids_to_tokens(window_ids),
                               mask_positions=mask_positions, top=top, chosen=chosen,
                               beams=_live_beams(tokenizer, prompt_ids, scored) if beam else None,
                               prompt_length=n + 1 if record is not None else n,
                               refreshed=refreshed[passes[t] - 1] if refreshed is not None and own_pass else None,
                               read_from=read_from[t],
                               reads=recorder.step_reads[t] if t < len(recorder.step_reads) else None))
    return steps


def _live_beams(tokenizer, prompt_ids, scored: dict) -> list[tuple[str, float]]:
    """Beam search's live hypotheses at a step, as text, best first, with their cumulative scores."""
    live = {}
    for r, score in zip(scored["rows"], scored["cumulative"]):
        if score > -1e8 and r not in live:  # -1e9: beam search's placeholder rows
            live[r] = score
    return sorted(((continuation(tokenizer, prompt_ids, list(r)), score) for r, score in live.items()),
                  key=lambda b: -b[1])


def piece_or_name(tokenizer, context, token_id: int, end_ids) -> str:
    if token_id in end_ids or token_id in tokenizer.all_special_ids:
        return tokenizer.convert_ids_to_tokens(token_id)
    return continuation(tokenizer, context, [token_id])
