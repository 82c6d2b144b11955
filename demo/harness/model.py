"""Our engines as an lm-evaluation-harness model: ``--model mlm`` (lm-eval 0.4.13). lm-eval's glue
only: the requests go to the engines, whose rules they follow (docs/method.md section 5).

    python -m demo.harness --model mlm --model_args pretrained=microsoft/deberta-v2-xxlarge --tasks copa
    accelerate launch -m demo.harness --model mlm --model_args pretrained=... --tasks ...  # per GPU

Importing this module registers the model (``demo.harness`` is lm-eval's command line with this
import done first); ``lm_eval.simple_evaluate(model=MaskedLMEval(pretrained=...))`` works from Python.

- ``--model_args``: the fields of ModelSettings (``pretrained`` is its ``model``), ScoringSettings,
  WritingSettings and HarnessSettings (``demo.settings``), each checked by its dataclass.
- ``loglikelihood`` / ``loglikelihood_rolling``: ``demo.engine.pll.score_batch``, all requests in one
  call (its token budget batches them); long texts in windows (``demo.engine.fitting.rolling_pairs``).
- ``generate_until``: ``demo.engine.generation.generate_grouped`` with lm-eval's kwargs read as HFLM
  reads them (``model_args.generation_settings``).
- Inputs longer than an absolute-position model reads are cut from the left as HFLM cuts them, or
  skipped, and counted (``demo.engine.fitting``). Data parallel: each process of ``accelerate
  launch`` takes its own device (``demo.evaluation.data_parallel.start``); rank 0 gathers.
"""

import logging
from collections import Counter

import lm_eval.models  # noqa: F401  lm-eval's own models: registering ours first would hide them
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from tqdm.auto import tqdm

from ..app.deployment import Deployment
from ..engine.fitting import SKIPPED, fit_generation, fitted_note, score_fitted, score_rolling
from ..engine.generation import generate_grouped
from ..engine.mask_window import padding_masks_of
from ..engine.models import with_bos_token
from ..evaluation.data_parallel import start_model
from .model_args import check_kind, generation_settings, parse_model_args

logger = logging.getLogger(__name__)

@register_model("mlm")
class MaskedLMEval(LM):
    """A masked or causal LM behind lm-eval's three request types, on this project's engines.

    ``is_greedy`` of a loglikelihood answer: every scored token is the model's top prediction at its
    position (rank 1, ties count): for a masked LM under the method's masking, the PLL counterpart
    of "greedy decoding would have written it"; with method=decoder and for a causal LM exactly that.
    """

    def __init__(self, **model_args):
        super().__init__()
        self.settings = parse_model_args(model_args)
        if self.settings.model.threads:
            torch.set_num_threads(self.settings.model.threads)
        m = self.settings.model
        processes = start_model(m.device, m.device_map)
        self.accelerator = processes.accelerator  # (the same processes as `mlm-icl score` and `probe` start)
        self._rank, self._world_size = processes.rank, processes.count  # global: across nodes too
        # the deployment's door, as for mlm-icl: a local model's short name, a folder, a .gguf file or a Hub id
        self.lm = Deployment.current().load(m.model, paths=True, **dict(m.load_options(), device=processes.device))
        if self.lm.emd_note:
            logger.warning(self.lm.emd_note)
        self.scoring = check_kind(self.lm, self.settings)  # refuse mismatches before any request
        self.lm = with_bos_token(self.lm, self.settings.harness.add_bos_token, m.revision, m.trust_remote_code)
        self._device = self.lm.device
        self.too_long = Counter()  # what fit_generation / fit_pair changed, over the whole run

    # -- what lm-eval reads besides the three request types

    @property
    def tokenizer(self):
        return self.lm.tokenizer

    @property
    def max_length(self) -> int | None:
        return self.lm.max_length

    def get_model_info(self) -> dict:
        """Recorded in lm-eval's results ("config"), so a results file says how it was scored, and
        how many requests were changed to fit the model (this process's, in a multi-process run)."""
        s = self.scoring
        return dict(model_label=self.lm.label, model_kind=self.lm.kind,
                    model_num_parameters=self.lm.n_parameters, model_dtype=str(self.lm.dtype),
                    model_device=str(self.lm.device),
                    pll_method=s.method, right_masks=s.right_masks if s.method == "right_masks" else None,
                    padding_masks=padding_masks_of(self.lm, s.padding_masks) if self.lm.kind == "masked" else None,
                    reduction=s.reduction, add_bos_token=self.settings.harness.add_bos_token,
                    max_length=self.lm.max_length, too_long=dict(self.too_long))

    def _record(self, request_type: str, changes: list[tuple[str, ...]]) -> None:
        note = fitted_note(request_type, changes, self.lm)
        if note:
            skipped = "an empty string" if request_type == "generate_until" else "-inf"
            logger.warning(f"{note} (as lm-eval's HFLM, inputs are cut from the left; a skipped request is "
                           f"answered {skipped}).")
            self.too_long.update(f"{request_type}: {what}" for change in changes for what in change)

    def _progress(self, disable_tqdm: bool) -> bool:
        return not disable_tqdm and self.rank == 0

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """(score, is_greedy) of each (context, continuation) (``score_fitted``); (-inf, False) skipped."""
        pairs = [tuple(req.args) for req in requests]
        scores, changes = score_fitted(self.lm, pairs, self.scoring, progress=self._progress(disable_tqdm))
        self._record("loglikelihood", changes)
        answers = [(float("-inf"), False) if s is None else (s.score, all(t.rank == 1 for t in s.tokens))
                   for s in scores]
        for pair, answer in zip(pairs, answers):
            self.cache_hook.add_partial("loglikelihood", pair, answer)
        return answers

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Each text's total log-likelihood, in windows (``score_rolling``)."""
        texts = [req.args[0] for req in requests]
        totals = score_rolling(self.lm, texts, self.scoring, progress=self._progress(disable_tqdm))
        for text, total in zip(texts, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """``generate()`` per request, fitted to the model first (``fit_generation``; a skipped one is
        answered ""), those with the same settings ``batch_size`` at a time (``generate_grouped``)."""
        fitted = [fit_generation(self.lm, req.args[0], generation_settings(
            req.args[1], self.settings.scoring.padding_masks, self.settings.writing)) for req in requests]
        kept = [i for i, (_, _, change) in enumerate(fitted) if SKIPPED not in change]
        outputs = [""] * len(requests)
        def done(batch: list[int], results: list) -> None:  # each batch cached as it is written
            for k, result in zip(batch, results):
                outputs[kept[k]] = result.text
                self.cache_hook.add_partial("generate_until", requests[kept[k]].args, result.text)
            bar.update(len(batch))

        with tqdm(total=len(requests), desc="generate_until", disable=not self._progress(disable_tqdm)) as bar:
            generate_grouped(self.lm, [fitted[i][:2] for i in kept], self.settings.harness.batch_size, done)
            bar.update(len(requests) - bar.n)  # the skipped ones
        self._record("generate_until", [change for _, _, change in fitted])
        return outputs

    # -- data parallel (what lm-eval's evaluator calls when world_size > 1), as HFLM does it

    def all_gather(self, tensor):
        return tensor if self.world_size <= 1 else self.accelerator.gather(tensor)

    def gather_object(self, obj, dst=0):
        if self.world_size <= 1:
            return [obj]
        gathered = [None] * self.world_size if self.rank == dst else None
        torch.distributed.gather_object(obj=obj, object_gather_list=gathered, dst=dst)
        return gathered

    def barrier(self) -> None:
        if self.world_size > 1:
            self.accelerator.wait_for_everyone()
