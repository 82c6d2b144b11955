"""What a request's settings do on the model it runs: each setting declares where it acts (its
``applies`` words, shown on the page before its help line); one that does nothing for this request
(top-k on a greedy run, the ELBO's patterns for another method, the prefix cache's refresh with
exact decoding) goes back to its default, so that it neither splits the run's identity nor stands
in its Reproduce code as if it mattered, and is said. A seed is drawn where one acts and none was
given, and recorded, so that the Reproduce code reruns to the same answer.

Every page handler that runs a model passes its settings through :func:`in_effect`; the engine
needs none of it (a setting that does nothing changes no number).
"""

import secrets
from collections.abc import Callable
from dataclasses import fields, replace

from ..declared import default_of, schema
from ..settings import DEFAULT_MASKED_METHOD, PLL_METHODS, ModelSettings
from ..user_text import as_said


def _method(s, kind: str) -> str:
    return "causal" if kind == "causal" else s.method or DEFAULT_MASKED_METHOD


# A field's ``applies`` words: (whether it acts for settings ``s`` on a ``kind`` of LM, where it
# acts, in a sentence's words). Words not listed here are not about a request (an evaluation's).
ACTS: dict[str, tuple[Callable, str]] = {
    "sampling only": (lambda s, kind: s.strategy == "sample", "when sampling"),
    "beam search only": (lambda s, kind: s.strategy == "beam", "in beam search"),
    "sampling or a random order": (lambda s, kind: s.strategy == "sample" or (
        getattr(s, "order", None) == "random" and kind == "masked"), "when sampling or in a random order"),
    "masked LMs": (lambda s, kind: kind == "masked", "on masked LMs"),
    "a sliding window": (lambda s, kind: kind == "masked" and s.window == "slide",
                         "on masked LMs writing in a sliding window (in blocks, the block's masks follow the text)"),
    "causal LMs": (lambda s, kind: kind == "causal", "on causal LMs"),
    "prefix cache": (lambda s, kind: kind == "masked" and s.cache == "prefix", "with the prefix cache"),
    "any order": (lambda s, kind: kind == "masked" and s.any_order, "when writing in any order"),
    "any order, in blocks": (lambda s, kind: kind == "masked" and s.window == "block", "when writing in blocks"),
    "most confident first only": (lambda s, kind: kind == "masked" and s.order == "confidence",
                                  "when the surest masks are written first"),
    "masked diffusion ELBO": (lambda s, kind: _method(s, kind) == "elbo", "with the masked diffusion ELBO"),
    "method decoder": (lambda s, kind: _method(s, kind) == "decoder", "with the decoder's own likelihood"),
    "the PLL methods": (lambda s, kind: _method(s, kind) in PLL_METHODS, "with the PLL methods"),
    "the right-masks variant": (lambda s, kind: _method(s, kind) == "right_masks", "with the right-masks variant"),
}


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _left_out(names: list[str], where: str) -> str:
    return (f"{_listed(names)} {'acts' if len(names) == 1 else 'act'} only {where}: left out of this run and of "
            f"its Reproduce code.")


def _named(settings, name: str, value) -> str:
    """A setting and its value as the page names them: "Label (shown value)"."""
    said = schema(settings, name)
    return f"{said.get('label', name)} ({said.get('shown', {}).get(value, as_said(value))})"


def head_in_effect(emd: str, lm) -> tuple[str, list[str]]:
    """(the DeBERTa head a request runs with on the loaded ``lm``, a line where it asked for one
    that ``lm``'s family does not have): back at its default, which its Reproduce code then
    leaves out."""
    default = default_of(ModelSettings, "emd")
    if emd == default or lm.family.emd:
        return emd, []
    return default, [_left_out([_named(ModelSettings, "emd", emd)], "on DeBERTa masked LMs")]


def in_effect(settings, kind: str, idle: dict[str, str] | None = None,
              seed: Callable[[], int] = lambda: secrets.randbelow(2 ** 31)):
    """(the settings a request runs with on a ``kind`` ("masked"/"causal") LM, a line for each
    change): each setting that does nothing for it back at its default (``idle``: more that do
    nothing for this request, by name, with where they act), and a seed drawn (``seed()``) where
    one acts and none was given."""
    unused, named = {}, {}  # named: where they act -> the settings that do not, with their values
    for field in fields(settings):
        said = schema(settings, field.name)
        acts = ACTS.get(said.get("applies"))
        value, default = getattr(settings, field.name), default_of(settings, field.name)
        if field.name in (idle or {}):
            acts = (lambda s, kind: False, idle[field.name])
        if acts is None or value == default or acts[0](settings, kind):
            continue
        unused[field.name] = default
        if value is None:  # (left to the core: nothing was set)
            continue
        named.setdefault(acts[1], []).append(_named(settings, field.name, value))
    lines = [_left_out(names, where) for where, names in named.items()]
    settings = replace(settings, **unused)
    if hasattr(settings, "seed") and settings.seed is None and "seed" not in unused:
        settings = replace(settings, seed=seed())
        lines.append(f"No seed was given: this run drew seed {settings.seed}, which its Reproduce code uses, so it "
                     f"reruns to the same answer.")
    return settings, lines
