"""Where every masked-LM read goes through: the hidden states a model's prediction head reads.

For most models that is the last layer's output at the positions read. A DeBERTa whose enhanced
mask decoder is on (``demo.engine.families.deberta``) reads the decoder's output instead. Either
way only those positions need the last layer's queries, attention and feed-forward (its keys and
values need every position): the family's ``states_at`` computes it there and nowhere else, where
the family table names one (``Family.last_layer``), with the same outputs as the full forward
pass up to float rounding. Scoring (``demo.engine.pll``), exact generation
(``demo.engine.mlm_decoder``) and infilling (``demo.engine.infill``) call :func:`hidden_at` and
apply the head to what it returns; the prefix cache reads rows inside its own layers
(``demo.engine.families.blocks``). Each call is a forward pass per row, counted here
(``demo.engine.counting``).
"""

import importlib

import torch

from . import families
from .counting import count_pass


def hidden_at(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """[len(rows), hidden]: what the head of ``model`` (a ``*ForMaskedLM``) reads at positions
    (rows[i], cols[i]) of the right-padded batch ``input_ids`` (``attention_mask`` None: no
    padding)."""
    count_pass(input_ids, attention_mask)
    family = families.FAMILIES.get(getattr(model.config, "model_type", None))
    module = family.last_layer if family is not None else None  # (unknown families: the full pass)
    if module is not None:
        return importlib.import_module(f"{families.__name__}.{module}").states_at(
            model, input_ids, attention_mask, rows, cols)
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return hidden[rows, cols]
