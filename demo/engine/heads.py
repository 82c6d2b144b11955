"""A model's prediction head on its own: hidden states to vocabulary logits, at the positions a
caller chooses (scoring reads the masked positions only, the decoder its window's first mask).
Used by PLL scoring, the masked LM's decoder and infilling."""

import torch


def mlm_head(model):
    """The model's own prediction head as a function of hidden states [n, hidden] -> [n, vocab].

    Hand-written per family because transformers has no "head only at these positions" API
    (ModernBERT's sparse_prediction needs labels; get_output_embeddings() misses the transform
    and, for DeBERTa legacy=False, returns the transform's dense layer instead of the decoder).
    """
    if getattr(model, "lm_predictions", None) is not None:  # DeBERTa v1/v2, legacy=False
        embeddings = model.get_input_embeddings()
        return lambda hidden: model.lm_predictions(hidden, embeddings)
    for name in ("cls", "lm_head", "predictions"):  # BERT & co; RoBERTa & co; ALBERT
        if getattr(model, name, None) is not None:
            return getattr(model, name)
    if getattr(model, "head", None) is not None and getattr(model, "decoder", None) is not None:
        return lambda hidden: model.decoder(model.head(hidden))  # ModernBERT
    if getattr(model, "vocab_projector", None) is not None:  # DistilBERT
        return lambda hidden: model.vocab_projector(model.vocab_layer_norm(
            model.activation(model.vocab_transform(hidden))))
    if getattr(model, "generator_lm_head", None) is not None:  # ELECTRA generator
        return lambda hidden: model.generator_lm_head(model.generator_predictions(hidden))
    raise ValueError(f"Scoring does not know the prediction head of {type(model).__name__}.")


def causal_head(model):
    """The output projection of a causal LM, with Gemma-2-style logit soft-capping if set.

    ModernBERT-decoder (Ettin's decoders) puts a transform (``lm_head``: dense, activation, norm)
    before its output projection (``decoder``); get_output_embeddings() returns only the latter.
    """
    projection = model.get_output_embeddings()
    transform = getattr(model, "lm_head", None)
    if transform is not None and transform is not projection:
        head = lambda hidden: projection(transform(hidden))  # noqa: E731
    else:
        head = projection
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        return lambda hidden: torch.tanh(head(hidden) / cap) * cap
    return head
