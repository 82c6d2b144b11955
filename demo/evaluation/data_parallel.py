"""Data parallel runs: which process this is and which share of the work is its own.

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
How the shares are saved, resumed and merged into one output: ``demo.evaluation.resumable``.
"""

import atexit
import logging
import os
from dataclasses import dataclass
from datetime import timedelta

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


def start_model(device: str, model_parallel: str | None = None) -> Processes:
    """:func:`start` for a run of one model that may be spread across GPUs (``model_parallel``, a
    device map), which a launch of several processes cannot be. Alone, a CUDA device asked for on
    a machine without one is the CPU, with a warning, as lm-eval's HFLM does it (its --device is
    cuda:0 unless given)."""
    if launched_processes() > 1:
        if model_parallel is not None:
            raise ValueError("parallelize / device_map (one model across GPUs) and a multi-process "
                             "launch (a model per process) do not mix here; pick one.")
        return start(device)
    import torch
    if model_parallel is None and device.startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger(__name__).warning(
            "No CUDA device here: running on the CPU instead of %s (lm-eval's --device, cuda:0 unless "
            "given).", device)
        device = "cpu"
    return Processes(device=device)


# ---------------------------------------------------------------- sharing out


def share(items: list, rank: int, count: int) -> list:
    """Every ``count``-th item from ``rank`` on: ``share([a, b, c, d, e], 1, 2) == [b, d]``."""
    return list(items[rank::count])
