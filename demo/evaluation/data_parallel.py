"""Data parallel runs: which process this is, which share of the work is its own, and how the
shares come back together, in input order, into one output that an interrupted run resumes.

    torchrun --nproc_per_node 4 -m demo score --model M --input items.jsonl --output scores.csv
    accelerate launch --multi_gpu --num_processes 4 -m demo probe --model M --output grid.csv

One process per device (``accelerate launch`` or ``torchrun`` starts them; each loads its own
copy of the model). Run directly, the run is one process and nothing here starts a process
group or needs accelerate's launcher. The lm-eval plugin (``demo.harness.model``)
starts its processes here too.

How the work is shared: every ``count``-th item of what is left to do (:func:`share`), not
contiguous blocks. Inputs are often ordered by length (a needle grid runs its lengths in order,
corpora are often sorted), and blocks would give the last process all the longest items; taking
turns keeps every share within one item of the others, also for what an interrupted run left.

How a run resumes (``mlm-icl score``; ``probe`` has its own resumable rows, ``haystack``): the
input is cut into fixed chunks of ``chunk_size`` items (:func:`chunks`), the same whatever the
number of processes, and each chunk is computed in one batched call. A score depends (in its last
bits) on what else shares its batch, never on which process computes it, so the same chunks give
the same output on one process or on eight (bit for bit on CPUs: ``tests/test_data_parallel.py``).
Each process appends every chunk it finishes as one JSON line to its own part file,
``<output>.parts/<name>.rank-<K>.jsonl``, whose first line is the run's fingerprint (model,
settings, input); an interrupted run loses at most the chunk each process was computing. Run again,
every process reads every part file, skips the chunks already there, and shares out the rest; parts
with another fingerprint are refused rather than mixed in. When every process is done, rank 0
merges the parts in input order into the output and removes them.
"""

import atexit
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tqdm.auto import tqdm

# ---------------------------------------------------------------- processes


def launched_processes() -> int:
    """How many processes ``accelerate launch`` / ``torchrun`` started (1 when run directly)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def make_accelerator(device: str):
    """The Accelerator of a multi-process launch, as lm-eval's HFLM makes it (a year-long timeout:
    ranks wait for each other at the end, and one may have much longer work than the others)."""
    import torch
    from accelerate import Accelerator, InitProcessGroupKwargs
    # On CPU accelerate needs cpu=True to use gloo (torchrun on a machine without GPUs, tests).
    cpu = device.startswith("cpu") or not torch.cuda.is_available()
    return Accelerator(cpu=cpu, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(weeks=52))])


def leave_process_group() -> None:
    """Tear the process group down at exit, as PyTorch asks: gloo's threads still running when
    the interpreter exits can abort a finished process (SIGABRT)."""
    import torch
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


@dataclass(frozen=True)
class Processes:
    """The processes of a run: a launch's, or this one alone (rank 0 of 1)."""
    rank: int = 0  # global: across machines too
    count: int = 1
    device: str = "auto"  # this process's device (a launch: one per process)
    accelerator: object = None  # accelerate's, in a launch of several processes

    @property
    def main(self) -> bool:
        """Rank 0: the process that reports, shows progress and writes the merged output."""
        return self.rank == 0

    def share(self, items: list) -> list:
        """This process's share of ``items``: every ``count``-th, from its rank (module doc)."""
        return share(items, self.rank, self.count)

    def wait(self) -> None:
        """Until every process gets here (nothing to wait for when alone)."""
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()


def start(device: str = "auto") -> Processes:
    """This process's place in the run: from accelerate when launched as several processes (each
    then on its own device: cuda:<local rank>, or the CPU), else alone on ``device``."""
    if launched_processes() <= 1:
        return Processes(device=device)
    accelerator = make_accelerator(device)
    atexit.register(leave_process_group)
    return Processes(rank=accelerator.process_index, count=accelerator.num_processes,
                     device=str(accelerator.device), accelerator=accelerator)


# ---------------------------------------------------------------- sharing out and merging


def share(items: list, rank: int, count: int) -> list:
    """Every ``count``-th item from ``rank`` on: ``share([a, b, c, d, e], 1, 2) == [b, d]``."""
    return list(items[rank::count])


def chunks(n_items: int, size: int) -> list[range]:
    """The input's items 0..n_items-1 cut into fixed chunks of ``size`` (the last one shorter)."""
    if size < 1:
        raise ValueError(f"The chunk size must be at least 1, not {size}.")
    return [range(start, min(start + size, n_items)) for start in range(0, n_items, size)]


def in_input_order(numbered: Iterable[tuple[int, object]], n_items: int) -> list:
    """The items of ``(index, item)`` pairs from every part, in index order 0..n_items-1, each
    once (a chunk found twice was computed twice from the same input: the first is kept);
    ValueError naming what is missing."""
    found = {}
    for index, item in numbered:
        found.setdefault(index, item)
    missing = [k for k in range(n_items) if k not in found]
    if missing:
        raise ValueError(f"{len(missing)} of {n_items} items are missing from the parts (first: "
                         f"{missing[0]}); run the same command again to compute them.")
    return [found[k] for k in range(n_items)]


# ---------------------------------------------------------------- part files


def parts_folder(output: Path) -> Path:
    """Where the processes of a run writing ``output`` keep their parts: ``<output>.parts``."""
    return output.with_name(output.name + ".parts")


def fingerprint(*what) -> str:
    """A short hash of what makes a run's results what they are (JSON-able values)."""
    text = json.dumps(what, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class ChunkParts:
    """The part files of one run's chunks: ``<folder>/<name>.rank-<K>.jsonl``, each a header line
    ``{"fingerprint": ...}`` and then one ``{"chunk": k, "results": [...]}`` line per finished chunk."""
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

    def read(self) -> dict[int, list]:
        """Chunk -> results, from the part files of every rank (of this or an earlier launch, with
        any number of processes). A last line cut short by an interruption is not a chunk."""
        self.check()
        done = {}
        for path in self.files():
            with path.open(encoding="utf-8") as handle:
                lines = [line for line in handle if line.endswith("\n")]
            for line in lines[1:]:
                record = json.loads(line)
                done.setdefault(record["chunk"], record["results"])
        return done

    def open(self, rank: int):
        """This rank's part file, for appending: created with its header, or its last line cut
        short by an interruption removed (so the next chunk starts a line of its own)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path(rank)
        if path.is_file():
            data = path.read_bytes()
            if not data.endswith(b"\n"):
                path.write_bytes(data[:data.rfind(b"\n") + 1])
        if not path.is_file() or path.stat().st_size == 0:
            path.write_text(json.dumps({"fingerprint": self.fingerprint}) + "\n", encoding="utf-8")
        return path.open("a", encoding="utf-8")

    def remove(self) -> None:
        """Remove these parts, and the folder once it holds nothing else."""
        for path in self.files():
            path.unlink()
        if self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()


def run_chunks(processes: Processes, parts: ChunkParts, n_items: int, chunk_size: int,
               work: Callable[[range], list], progress: bool = False) -> list | None:
    """Every item's result, in input order, on rank 0 (None on the others), computed by ``work``
    (the items of a range -> one JSON-able result each) a chunk at a time: the chunks not yet in
    ``parts`` are shared out, and each process appends each chunk it finishes to its own part file.
    The parts stay until the caller has written the output (then :meth:`ChunkParts.remove`)."""
    all_chunks = chunks(n_items, chunk_size)
    done = parts.read()
    processes.wait()  # every process has read the parts before any appends to them: the same todo
    todo = [k for k in range(len(all_chunks)) if k not in done]
    mine = processes.share(todo)
    bar = tqdm(total=sum(len(all_chunks[k]) for k in mine), desc="items", unit="item",
               disable=not (progress and processes.main))
    with parts.open(processes.rank) as handle, bar:
        for k in mine:
            results = work(all_chunks[k])
            handle.write(json.dumps({"chunk": k, "results": results}, ensure_ascii=False) + "\n")
            handle.flush()  # a chunk written is a chunk kept, whatever happens next
            bar.update(len(all_chunks[k]))
    processes.wait()  # every share is in its file
    if not processes.main:
        return None
    merged = in_input_order(parts.read().items(), len(all_chunks))
    return [result for chunk in merged for result in chunk]
