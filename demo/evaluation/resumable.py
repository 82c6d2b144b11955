"""Resumable runs: an output computed in chunks, each saved as soon as it is done, so that an
interrupted run resumes where it stopped, run by one process or by every process of a
data-parallel launch (``demo.evaluation.data_parallel``). ``score``, ``probe`` and ``evaluate``
all write through it:

    mlm-icl score    --model M --input items.jsonl --output scores.csv   (chunks of --chunk-size lines)
    mlm-icl probe    --model M --output grid.csv                         (a chunk per cell)
    mlm-icl evaluate --model M --task copa                               (chunks of --chunk-size items)

The chunks: the work is cut into chunks, each computed in one call and known by a key (its number
in the input, or the cell it is). They are the same whatever the number of processes, so the
output is too: a score depends (in its last bits) on what else shares its batch, never on which
process computes it (bit for bit on CPUs: ``tests/test_data_parallel.py``).

The parts: each process appends every chunk it finishes as one JSON line to its own part file,
``<output>.parts/<name>.rank-<K>.jsonl``, whose first line is the run's fingerprint (the digest
of its identity: everything its numbers depend on, ``demo.evaluation.identity``). An
interruption loses at most the chunk each process was computing. Run again, with any number of
processes, every process reads every part file, skips the chunks already there and shares out the
rest; parts with another fingerprint are refused rather than mixed in.

The merge: when every process is done, rank 0 has every chunk's results in chunk order
(:func:`run_chunks`), writes the output in its command's format, then removes the parts
(:meth:`ChunkParts.remove`): the parts stay until the output holds what they held.
"""

import json
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm


def chunks(n_items: int, size: int) -> list[range]:
    """The input's items 0..n_items-1 cut into fixed chunks of ``size`` (the last one shorter)."""
    if size < 1:
        raise ValueError(f"The chunk size must be at least 1, not {size}.")
    return [range(start, min(start + size, n_items)) for start in range(0, n_items, size)]


def in_input_order(keyed: Iterable[tuple[Hashable, object]], keys: Iterable[Hashable]) -> list:
    """The items of ``(key, item)`` pairs from every part, in the order of ``keys``, each once (a
    chunk found twice was computed twice from the same input: the first is kept); ValueError
    naming what is missing."""
    found, keys = {}, list(keys)
    for key, item in keyed:
        found.setdefault(key, item)
    missing = [k for k in keys if k not in found]
    if missing:
        raise ValueError(f"{len(missing)} of {len(keys)} items are missing from the parts (first: "
                         f"{missing[0]}); run the same command again to compute them.")
    return [found[k] for k in keys]


def drop_cut_line(path: Path) -> None:
    """Remove a last line cut short by an interruption, so that appending starts a line of its own."""
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[:data.rfind(b"\n") + 1])


def _key(value):
    """A chunk key read back from JSON: its lists as tuples again, as the run made it."""
    return tuple(_key(v) for v in value) if isinstance(value, list) else value


# ---------------------------------------------------------------- part files


def parts_folder(output: Path) -> Path:
    """Where the processes of a run writing ``output`` keep their parts: ``<output>.parts``."""
    return output.with_name(output.name + ".parts")


@dataclass(frozen=True)
class ChunkParts:
    """The part files of one run's chunks: ``<folder>/<name>.rank-<K>.jsonl``, each a header line
    ``{"fingerprint": ...}`` and then one ``{"chunk": key, "results": [...]}`` line per finished chunk."""
    folder: Path
    name: str
    fingerprint: str

    def path(self, rank: int) -> Path:
        return self.folder / f"{self.name}.rank-{rank}.jsonl"

    def files(self) -> list[Path]:
        return sorted(self.folder.glob(f"{self.name}.rank-*.jsonl"))

    def check(self) -> None:
        """Refuse part files of another run (their header's fingerprint is not this one's)."""
        for path in self.files():
            with path.open(encoding="utf-8") as handle:
                header = handle.readline()
            if header.endswith("\n") and json.loads(header).get("fingerprint") != self.fingerprint:
                raise ValueError(
                    f"{self.folder} holds parts of another run (another model, input or settings: "
                    f"{path.name}). Run that command again to finish it, or remove the folder to start "
                    f"afresh.")

    def read(self) -> dict:
        """Chunk key -> results, from the part files of every rank (of this or an earlier launch,
        with any number of processes). A last line cut short by an interruption is not a chunk."""
        self.check()
        done = {}
        for path in self.files():
            with path.open(encoding="utf-8") as handle:
                lines = [line for line in handle if line.endswith("\n")]
            for line in lines[1:]:
                record = json.loads(line)
                done.setdefault(_key(record["chunk"]), record["results"])
        return done

    def open(self, rank: int):
        """This rank's part file, for appending: created with its header, or its last line cut
        short by an interruption removed."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(rank)
        drop_cut_line(path)
        if not path.is_file() or path.stat().st_size == 0:
            path.write_text(json.dumps({"fingerprint": self.fingerprint}) + "\n", encoding="utf-8")
        return path.open("a", encoding="utf-8")

    def remove(self) -> None:
        """Remove these parts, and the folder once it holds nothing else."""
        for path in self.files():
            path.unlink()
        if self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()


# ---------------------------------------------------------------- the run


def run_chunks(processes, parts: ChunkParts, keyed: dict[Hashable, list], work: Callable[[list], list],
               progress: bool = False, label: str = "items") -> list | None:
    """Every item's result, in the order of ``keyed`` (chunk key -> its items), on rank 0; None on
    the other processes. ``work`` turns a chunk's items into one JSON-able result each. The chunks
    not yet in ``parts`` are shared out (``processes.share``), and each process appends each chunk
    it finishes to its own part file. The parts stay until the caller has written the output
    (then :meth:`ChunkParts.remove`)."""
    done = parts.read()
    processes.wait()  # every process has read the parts before any appends to them: the same todo
    mine = processes.share([key for key in keyed if key not in done])
    bar = tqdm(total=sum(len(keyed[key]) for key in mine), desc=label, unit="item",
               disable=not (progress and processes.main))
    with parts.open(processes.rank) as handle, bar:
        for key in mine:
            results = work(keyed[key])
            handle.write(json.dumps({"chunk": key, "results": results}, ensure_ascii=False) + "\n")
            handle.flush()  # a chunk written is a chunk kept, whatever happens next
            bar.update(len(keyed[key]))
    processes.wait()  # every share is in its file
    if not processes.main:
        return None
    merged = in_input_order(parts.read().items(), keyed)
    return [result for chunk in merged for result in chunk]
