"""Where every masked-LM read goes through: the hidden states a model's prediction head reads.

For most models that is the last layer's output at the positions read. A DeBERTa whose enhanced
mask decoder is on (``demo.engine.families.deberta``) reads the decoder's output instead,
computed at those positions only. Scoring (``demo.engine.pll``) and exact generation
(``demo.engine.mlm_decoder``) call :func:`hidden_at` and apply the head to what it returns; the
prefix cache runs the decoder inside its own layers (``demo.engine.families.deberta_v2``).
"""

import torch

from .families import deberta


def hidden_at(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, rows, cols) -> torch.Tensor:
    """[len(rows), hidden]: what the head of ``model`` (a ``*ForMaskedLM``) reads at positions
    (rows[i], cols[i]) of the right-padded batch ``input_ids`` (``attention_mask`` None: no
    padding)."""
    if deberta.table_of(model) is not None:
        return deberta.states_at(model, input_ids, attention_mask, rows, cols)
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return hidden[rows, cols]
