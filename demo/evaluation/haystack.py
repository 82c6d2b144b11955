"""Needle in a haystack: can a (masked or causal) LM find a number hidden in a long prompt?

The BERTs paper's length probe (its section 2.3, Figure 3, appendix A.1; docs/method.md, section 4). A random
6-digit number is hidden at a given depth in public-domain filler text, in the paper's template:

    > Some special magic number is hidden within the following articles. Make sure to memorize
    > it. I will quiz you about the magic number afterwards.

    {prefix sentences, one per line}
    The magic number is {needle}.
    {suffix sentences, one per line}

    > Question: What is the special magic number mentioned in the provided text?
    > Answer: The special magic number mentioned in the provided text is

(the "> " marks and blank lines are the paper's reference code's). Prompts are raw text: the
engine writes the paper's "\\n " newline marker for tokenizers that lose "\\n" (``demo.engine.text``),
and the token counts here are taken on that model text. The model answers with digits-only
constrained decoding of exactly 6 digits (``demo.engine.generation``); exact match scores.

What "length" means here: the number of positions the model needs to answer, counted the way
``demo.engine.generation`` checks room. The answer gets room for 7 tokens (a word-boundary token such as
"Ġ" or "▁", then one token per digit at worst). For a causal LM: the prompt's tokens (with the
tokenizer's specials) + 7. For a masked LM: its last decoding window, [CLS] + prompt + 6 answer
tokens + the predicted [MASK] + its padding masks + [SEP] (``demo.engine.mlm_decoder.build_windows``).
So a 512-token cell fits a 512-position BERT exactly, and a cell is "beyond the model's limit"
exactly when length > ``lm.max_length``. (Digits merged into one token make the real answer
shorter, never longer.)

How the exact length is reached: consecutive filler sentences (starting at a seeded random
sentence) are added until the budget is covered; the last one is cut at a token boundary, and the
cut is searched by counting the WHOLE prompt with the model's tokenizer, so the count is exact even
where tokenization is not additive. Depth 0.0 puts the needle before the first filler sentence,
1.0 after the last; in between it goes to the sentence boundary nearest to that fraction of the
filler's tokens, so the needle sits within one sentence of the requested depth of the haystack.

The grid runner saves every finished cell in ``<output>.parts/`` and, once the grid is done, adds
the rows to the output CSV in grid order (``demo.evaluation.resumable``, also for a
data-parallel launch), so an interrupted run resumes where it stopped:
``mlm-icl probe --model M --lengths 256 512 --output grid.csv``. ``--cache prefix``
answers with a masked LM's approximate prefix cache (``demo.engine.prefix_cache``). Every row
records its run (the digest of everything its answer depends on but the cell: model, precision,
revision, head, padding masks, decoding, seed, filler; ``demo.evaluation.identity``), the
decoding it used (``cache``: exact or prefix; a causal LM is always exact) and the precision, and
a cell is identified by run, length, depth and repetition: runs with other settings, and the two
sides of a pair, share a file without being confused, and a rerun with another setting adds its
own rows beside the first run's. An output file without the ``run`` column is refused, not
guessed at.
"""

import bisect
import csv
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..engine.mask_window import padding_masks_of, window_length
from ..engine.text import newline_survives, prompt_as_read
from ..evaluation_settings import GridSettings
from ..paths import ASSETS
from ..settings import GenerationSettings, cache_used
from ..user_text import as_said
from .data_parallel import Processes
from .identity import Identity, digest
from .resumable import ChunkParts, parts_folder, run_chunks

HEADER = ("> Some special magic number is hidden within the following articles. "
          "Make sure to memorize it. I will quiz you about the magic number afterwards.")
QUESTION = ("> Question: What is the special magic number mentioned in the provided text?\n"
            "> Answer: The special magic number mentioned in the provided text is")
NEEDLE_SENTENCE = "The magic number is {needle}."
DIGITS = 6
# Room for the answer: a word-boundary token ("Ġ" / "▁", which the digits constraint lets open
# the number) and then, at worst, one token per digit.
ANSWER_TOKENS = DIGITS + 1
DEFAULT_FILLER = ASSETS / "haystack" / "persuasion.txt"
# Long sentences would make depth coarse in short haystacks (a 256-token prompt holds ~10 of the
# median sentence); skipping the longest 3% keeps every sentence a small step of the haystack.
MAX_SENTENCE_CHARS = 400
COLUMNS = ["run", "model", "cache", "dtype", "length", "depth", "repetition", "needle", "answer", "correct",
           "seconds", "status"]
CELL = ["run", "length", "depth", "repetition"]  # what identifies a cell's row


# ---------------------------------------------------------------- filler text


def split_sentences(text: str) -> list[str]:
    """Paragraphs at blank lines, lines re-joined, split after . ! ? (plus closing quotes).

    Hand-written: nltk's punkt needs a data download, and filler only needs plausible sentence
    boundaries, not perfect ones.
    """
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = re.sub(r"\s+", " ", paragraph).strip()
        if paragraph:
            # a boundary is followed by a capital, a quote, a bracket or a dash ("Esq. of" is not)
            sentences += re.split(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z\"'(\[-])", paragraph)
    return [s.strip() for s in sentences if s.strip()]


def usable_sentences(sentences: list[str]) -> list[str]:
    """Drop sentences with digits (the needle must be the only number) and overlong ones."""
    return [s for s in sentences
            if re.search(r"[A-Za-z]", s) and not re.search(r"\d", s) and len(s) <= MAX_SENTENCE_CHARS]


@lru_cache(maxsize=4)
def _load_filler_cached(path: str, mtime: float) -> tuple[str, ...]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"Cannot read the filler file {path}: {err}. Give a UTF-8 text file.") from err
    sentences = usable_sentences(split_sentences(text))
    if not sentences:
        raise ValueError(f"The filler file {path} has no usable sentences (it is empty, or every "
                         f"sentence holds digits or is longer than {MAX_SENTENCE_CHARS} characters).")
    return tuple(sentences)


def load_filler(path: str | Path | None = None) -> list[str]:
    """Filler sentences from a text file (default: the bundled public-domain book)."""
    path = Path(path) if path is not None else DEFAULT_FILLER
    if not path.is_file():
        raise ValueError(f"Filler file {path} does not exist.")
    return list(_load_filler_cached(str(path.resolve()), path.stat().st_mtime))


# ---------------------------------------------------------------- counting tokens as the model reads them


@dataclass(frozen=True)
class Reader:
    """How a model reads a prompt: its tokenizer and the tokens it adds around the prompt text."""
    tokenizer: object
    extra_tokens: int  # tokens in the last answer window besides the prompt's own text tokens
    add_special_tokens: bool  # count the tokenizer's own specials (causal LMs)
    newline_survives: bool

    def model_text(self, prompt: str) -> str:
        """The raw prompt as the model reads it (``generate()``'s reading)."""
        return prompt_as_read(prompt, self.newline_survives)

    def count(self, prompt: str) -> int:
        ids = self.tokenizer(self.model_text(prompt), add_special_tokens=self.add_special_tokens,
                             verbose=False)["input_ids"]
        return len(ids) + self.extra_tokens


def reader_of(lm, padding_masks: int | None = None) -> Reader:
    """The :class:`Reader` of a LoadedModel (see the module doc for what is counted).

    A bare tokenizer also works (e.g. to preview a prompt before loading weights): then only the
    prompt's tokens with the tokenizer's own specials are counted.
    """
    if isinstance(lm, Reader):
        return lm
    if not hasattr(lm, "kind"):  # a tokenizer
        return Reader(lm, 0, True, newline_survives(lm))
    if lm.kind == "masked":
        # the last window reads the text and all answer tokens but the last
        extra = window_length(ANSWER_TOKENS - 1, padding_masks_of(lm, padding_masks))
        return Reader(lm.tokenizer, extra, False, lm.newline_survives)
    return Reader(lm.tokenizer, ANSWER_TOKENS, True, lm.newline_survives)  # prompt + whole answer


# ---------------------------------------------------------------- one prompt


@dataclass
class NeedlePrompt:
    text: str  # the raw prompt (generate() encodes newlines for the model)
    needle: str  # the 6 digits
    length: int  # positions the model needs to answer (module doc); the requested length
    depth: float  # requested depth
    needle_depth: float  # filler tokens before the needle / all filler tokens (measured)
    n_sentences: int  # filler sentences used (the last one may be cut)


def render(prefix: list[str], needle: str, suffix: list[str]) -> str:
    lines = prefix + [NEEDLE_SENTENCE.format(needle=needle)] + suffix
    return HEADER + "\n\n" + "\n".join(lines) + "\n\n" + QUESTION


def _check_depth(depth: float) -> float:
    try:
        depth = float(depth)
    except (TypeError, ValueError):
        raise ValueError(f"Depth must be a number between 0 and 1, not {as_said(depth)}.") from None
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"Depth must be between 0.0 (needle first) and 1.0 (needle last), not {depth}.")
    return depth


def build_needle_prompt(reader, length: int, depth: float, needle: str, sentences: list[str],
                        start: int = 0) -> NeedlePrompt:
    """The needle prompt of exactly ``length`` tokens for ``reader`` (LoadedModel, Reader, tokenizer).

    Filler: ``sentences`` taken in order from index ``start`` (wrapping around); the last one is cut
    at a token boundary to hit the length exactly. Where no cut can (a run of very short sentences
    around it, each adding a multi-token newline marker), the filler starts one sentence later.
    """
    reader = reader_of(reader)
    depth = _check_depth(depth)
    if not (isinstance(needle, str) and needle.isdigit()):
        raise ValueError(f"The needle must be a string of digits, not {needle!r}.")
    if not sentences:
        raise ValueError("No filler sentences given.")
    length = int(length)
    fixed = reader.count(render([], needle, []))
    if length < fixed:
        raise ValueError(f"A {length}-token prompt cannot hold the template and the needle: this "
                         f"model needs at least {fixed} tokens for them. Ask for a longer length.")
    if length == fixed:
        text = render([], needle, [])
        return NeedlePrompt(text, needle, length, depth, needle_depth=0.0, n_sentences=0)
    for shift in range(min(32, len(sentences))):
        fitted = _fit_filler(reader, length - fixed, depth, needle, sentences, start + shift)
        if fitted is not None:
            text, n_sentences = fitted
            return NeedlePrompt(text=text, needle=needle, length=reader.count(text), depth=depth,
                                needle_depth=_needle_depth(reader, text, needle),
                                n_sentences=n_sentences)
    raise ValueError(f"Cannot build a prompt of exactly {length} tokens with this tokenizer (the "
                     f"template and needle alone take {fixed}); try a length a few tokens longer.")


def _fit_filler(reader: Reader, budget: int, depth: float, needle: str, sentences: list[str],
                start: int) -> tuple[str, int] | None:
    """(prompt text, filler sentences used) hitting fixed + ``budget`` tokens, or None."""
    length = reader.count(render([], needle, [])) + budget
    # 1. Consecutive sentences whose tokens (measured in one joined string) cover the budget with
    # room to spare; tokens are at least one character, so measure only once there are enough.
    separator = reader.model_text("\n")
    margin = 16
    chosen, spans, joined, position = [], [], "", start % len(sentences)
    need_chars = budget + margin
    while True:
        while len(joined) < need_chars:
            sentence = sentences[position]
            joined += separator if joined else ""
            spans.append((len(joined), len(joined) + len(sentence)))
            chosen.append(sentence)
            joined += sentence
            position = (position + 1) % len(sentences)  # a short filler wraps around
        encoded = reader.tokenizer(joined, add_special_tokens=False, return_offsets_mapping=True,
                                   verbose=False)
        n_tokens = len(encoded["input_ids"])
        if n_tokens >= budget + margin:
            break
        need_chars = len(joined) + (budget + margin - n_tokens) * len(joined) / max(n_tokens, 1) + 1
    token_ends = sorted(end for start_char, end in encoded["offset_mapping"] if end > start_char)

    # 2. The needle's sentence boundary: nearest to depth x filler tokens.
    tokens_before = [bisect.bisect_right(token_ends, s) for s, _ in spans]  # per sentence start
    candidates = [b for b in range(len(chosen)) if tokens_before[b] <= budget]
    distances = [abs(tokens_before[b] - depth * budget) for b in candidates]
    needle_at = candidates[int(np.argmin(distances))]
    if depth == 1.0 or abs(budget - depth * budget) < min(distances):
        needle_at = len(chosen)  # after the last (cut) sentence

    # 3. Cut points: every token end inside a sentence (never inside a separator), in text order.
    cuts = [(i, end - s) for i, (s, e) in enumerate(spans)
            for end in token_ends[bisect.bisect_right(token_ends, s):bisect.bisect_right(token_ends, e)]]

    def prompt_at(cut: int) -> str:
        i, chars = cuts[cut]
        filler = chosen[:i] + [chosen[i][:chars].rstrip()]
        return render(filler[:needle_at], needle, filler[needle_at:])

    best = _search_exact(lambda cut: reader.count(prompt_at(cut)), len(cuts), length)
    return None if best is None else (prompt_at(best), cuts[best][0] + 1)


def _search_exact(count_at, n_cuts: int, length: int) -> int | None:
    """Index of a cut whose prompt has exactly ``length`` tokens, or None if none nearby.

    Binary search for the first cut reaching the length (the count grows with the cut), then a
    look around it: re-tokenizing a cut word can jump by 2 tokens.
    """
    low, high = 0, n_cuts - 1
    if count_at(high) < length:
        raise ValueError("The filler text is too short for this length.")
    while low < high:
        middle = (low + high) // 2
        if count_at(middle) < length:
            low = middle + 1
        else:
            high = middle
    for offset in (0, -1, 1, -2, 2, -3, 3, -4, 4, -6, 6, -8, 8):
        cut = low + offset
        if 0 <= cut < n_cuts and count_at(cut) == length:
            return cut
    return None


def _needle_depth(reader: Reader, text: str, needle: str) -> float:
    """Filler tokens before the needle / all filler tokens, measured on the final prompt."""
    text = reader.model_text(text)
    encoded = reader.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    starts = [s for s, e in encoded["offset_mapping"] if e > s]
    needle_char = text.index(NEEDLE_SENTENCE.format(needle=needle))
    needle_end = needle_char + len(NEEDLE_SENTENCE.format(needle=needle))
    header_end = len(reader.model_text(HEADER + "\n\n"))
    question_start = text.rindex(reader.model_text("\n\n" + QUESTION))
    before = sum(1 for s in starts if header_end <= s < needle_char)
    after = sum(1 for s in starts if needle_end <= s < question_start)
    return before / (before + after) if before + after else 0.0


# ---------------------------------------------------------------- the grid


def cell_rng(seed: int, length: int, depth: float, repetition: int) -> np.random.Generator:
    """One generator per cell: a cell's needle and filler do not depend on the rest of the grid."""
    return np.random.default_rng([int(seed), int(length), int(round(depth * 10_000)), int(repetition)])


def cell_needle_and_start(seed, length, depth, repetition, n_sentences: int) -> tuple[str, int]:
    rng = cell_rng(seed, length, depth, repetition)
    needle = str(int(rng.integers(100_000, 1_000_000)))  # 100000..999999, as in the paper
    return needle, int(rng.integers(n_sentences))


def answer_digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def grid_cells(grid: GridSettings) -> list[tuple[int, float, int]]:
    """The grid's cells (length, depth, repetition) in the order a run does them and writes them."""
    return [(n, d, r) for n in grid.lengths for d in grid.depths for r in range(int(grid.repetitions))]


@dataclass(frozen=True)
class GridRun:
    """One model's grid, ready to answer cell by cell: everything a cell's row depends on."""
    lm: object
    grid: GridSettings
    sentences: tuple[str, ...]  # the filler
    model_name: str  # what the rows call the model
    cache: str  # the decoding really used (a causal LM's is exact whatever was asked)
    reader: Reader
    settings: GenerationSettings  # how every answer is generated
    generate_fn: Callable
    identity: Identity  # what every row depends on, the cell aside (demo.evaluation.identity)

    def row(self, cell: tuple[int, float, int]) -> dict:
        """The cell's row: the needle, the answer and whether it is right, or "beyond_limit"."""
        length, depth, repetition = cell
        began = time.perf_counter()
        needle, start = cell_needle_and_start(self.grid.seed, length, depth, repetition, len(self.sentences))
        row = dict(run=self.identity.digest, model=self.model_name, cache=self.cache,
                   dtype=self.identity.parts["model"]["dtype"], length=length, depth=depth,
                   repetition=repetition, needle=needle)
        if self.lm.max_length is not None and length > self.lm.max_length:
            row.update(answer="", correct="", status="beyond_limit")
        else:
            prompt = build_needle_prompt(self.reader, length, depth, needle, self.sentences, start)
            answer = answer_digits(self.generate_fn(self.lm, prompt.text, self.settings).text)
            row.update(answer=answer, correct=int(answer == needle), status="ok")
        row["seconds"] = round(time.perf_counter() - began, 3)
        return row

    def check_first(self, todo: list) -> None:
        """Fail before hours of work, not after: the grid's shortest length must hold the template."""
        fits = [n for n in self.grid.lengths if self.lm.max_length is None or n <= self.lm.max_length]
        if todo and fits:
            needle, start = cell_needle_and_start(self.grid.seed, fits[0], self.grid.depths[0], 0,
                                                  len(self.sentences))
            build_needle_prompt(self.reader, fits[0], self.grid.depths[0], needle, self.sentences, start)

    def key(self, cell) -> tuple:
        return _cell_key(self.identity.digest, *cell)


def grid_run(lm, grid: GridSettings | None = None, sentences: list[str] | None = None,
             model_name: str | None = None, generate_fn=None) -> GridRun:
    """The :class:`GridRun` of ``lm``. Filler: ``sentences`` if given, else ``grid.filler`` (a text
    file), else the bundled book. ``generate_fn``: defaults to ``demo.engine.generation.generate``
    (tests may wrap it to count calls)."""
    from ..engine.generation import generate  # torch-heavy; imported when used

    grid = grid or GridSettings()
    sentences = usable_sentences(list(sentences)) if sentences is not None else load_filler(grid.filler)
    if not sentences:
        raise ValueError("The filler has no usable sentences.")
    cache = cache_used(grid.cache, lm.kind)  # what the rows record: the decoding really used
    settings = GenerationSettings(max_new_tokens=ANSWER_TOKENS, strategy="greedy", digits=DIGITS,
                                  padding_masks=grid.padding_masks, seed=grid.seed, cache=cache)
    model_name = model_name or lm.name
    # the grid's cells are keys of their own: a longer grid extends a shorter one of the same run
    identity = Identity.of(lm, label=model_name, filler=digest(sentences), answer=replace(
        settings, padding_masks=padding_masks_of(lm, grid.padding_masks)))
    return GridRun(lm, grid, tuple(sentences), model_name, cache, reader_of(lm, grid.padding_masks), settings,
                   generate_fn or generate, identity)


def iter_grid(lm, grid: GridSettings | None = None, *, sentences: list[str] | None = None,
              model_name: str | None = None, progress: bool = False, generate_fn=None,
              time_limit: float | None = None) -> Iterator[pd.DataFrame]:
    """The grid one cell at a time, into no file: yields the table so far, first empty, then after
    every cell (for a page that shows progress). With ``time_limit`` (seconds), no cell starts
    after that time: the last table is then partial. The arguments are :func:`grid_run`'s."""
    yield from _tables(grid_run(lm, grid, sentences, model_name, generate_fn), progress, time_limit)


def run_grid(lm, grid: GridSettings | None = None, *, sentences: list[str] | None = None,
             output: str | Path | None = None, model_name: str | None = None, progress: bool = False,
             generate_fn=None, processes: Processes | None = None) -> pd.DataFrame | None:
    """Run the lengths x depths x repetitions grid; one tidy row per cell.

    ``output``: a CSV file, resumed: the cells it holds are kept, the others run (each saved in
    ``<output>.parts/`` as it finishes) and added in grid order once all are done. ``processes``
    (``demo.evaluation.data_parallel.start``): a data-parallel launch's, each running its share of
    the cells; rank 0 writes the output and returns the table, the others return None. Cells
    longer than an absolute-position model's limit get status "beyond_limit". The other
    arguments are :func:`grid_run`'s.
    """
    run = grid_run(lm, grid, sentences, model_name, generate_fn)
    if output is None:
        for table in _tables(run, progress):
            pass
        return table
    return _run_into(run, Path(output), processes or Processes(), progress)


def _tables(run: GridRun, progress: bool, time_limit: float | None = None) -> Iterator[pd.DataFrame]:
    cells = grid_cells(run.grid)
    run.check_first(cells)
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    rows = []
    yield _grid_table(rows)
    for cell in tqdm(cells, desc=f"needle grid {run.model_name}", disable=not progress):
        if deadline is not None and time.perf_counter() > deadline:
            return
        rows.append(run.row(cell))
        yield _grid_table(rows)


def _run_into(run: GridRun, output: Path, processes: Processes, progress: bool) -> pd.DataFrame | None:
    """:func:`run_grid` into ``output``, through the run's parts (``demo.evaluation.resumable``)."""
    processes.wait()  # rank 0 may still be adding an earlier grid's rows (a pair's other side)
    done = _read_finished(output)
    finished = _finished_cells(done)
    cells = grid_cells(run.grid)
    todo = [cell for cell in cells if run.key(cell) not in finished]
    run.check_first(todo)
    parts = ChunkParts(parts_folder(output), _parts_name(run), run.identity.digest)
    rows = run_chunks(processes, parts, {cell: [cell] for cell in todo},
                      lambda chunk: [run.row(cell) for cell in chunk], progress, f"needle grid {run.model_name}")
    if rows is None:  # not rank 0
        return None
    _append_rows(output, rows)
    parts.remove()
    return _grid_table(rows, done, {run.key(cell) for cell in cells})


def _parts_name(run: GridRun) -> str:
    """The name of a grid's parts: one per run, and runs may share an output."""
    return "grid-" + re.sub(r"[^\w.\-]+", "-", f"{run.model_name}-{run.identity.digest}")


# ---------------------------------------------------------------- the output file


def _read_finished(output: Path) -> pd.DataFrame:
    if not output.is_file() or output.stat().st_size == 0:
        return pd.DataFrame(columns=COLUMNS)
    done = pd.read_csv(output, dtype={"run": str, "needle": str, "answer": str, "model": str, "cache": str})
    missing = set(COLUMNS) - set(done.columns)
    if "run" in missing and not missing - {"run", "cache", "dtype"}:
        raise ValueError(
            f"{output} has no 'run' column, so the settings its rows were made with (precision, masks, "
            f"decoding, revision) are unknown and a rerun cannot tell whether they match: give another "
            f"--output file.")
    if missing:
        raise ValueError(f"{output} is not a needle grid file (missing columns: {sorted(missing)}).")
    done["answer"] = done["answer"].fillna("")
    return done


def _append_rows(output: Path, rows: list[dict]) -> None:
    new = not output.is_file() or output.stat().st_size == 0
    with output.open("a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _cell_key(run: str, length, depth, repetition) -> tuple:
    return (str(run), int(length), round(float(depth), 6), int(repetition))


def _finished_cells(done: pd.DataFrame) -> dict[tuple, dict]:
    """Cell key -> its row, of the rows of a grid file."""
    return {_cell_key(*key): row for key, row in zip(
        done[CELL].itertuples(index=False, name=None), done.to_dict("records"))}


def _grid_table(rows: list[dict], done: pd.DataFrame | None = None, wanted: set | None = None) -> pd.DataFrame:
    """The ``rows`` with the grid's cells that an earlier run finished (``done``, kept where their
    key is ``wanted``), sorted."""
    table = pd.DataFrame(rows, columns=COLUMNS)
    if done is not None and len(done):
        keep = [_cell_key(*k) in wanted for k in done[CELL].itertuples(index=False, name=None)]
        table = pd.concat([done[pd.Series(keep, index=done.index, dtype=bool)], table], ignore_index=True)
    table["correct"] = pd.to_numeric(table["correct"], errors="coerce")
    return table.sort_values(["length", "depth", "repetition"]).reset_index(drop=True)[COLUMNS]
