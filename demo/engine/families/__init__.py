"""What each model family needs the rest of the code to know.

One table, keyed by ``config.model_type``: what each family has and supports (positions, padding
masks, how it loads, the prefix cache). Facts that can be measured on the loaded tokenizer (does
"\\n" survive? ``demo.engine.text.newline_survives``) are measured; this table holds what cannot
be. Importing it loads no torch; a family's own code sits in its module, loaded when used:

- ``blocks``      what every family's prefix-cache block encoder shares: the contract, key/value buffers
- ``queries``     what every family's last layer at the rows read shares: the positions read per row
- ``bert``        BERT's layers (and those copying them): with a key/value cache, and the last at the rows read
- ``albert``      ALBERT's layers (narrow embeddings, layers shared in groups): the same two
- ``modernbert``  ModernBERT's layers (rotary positions, local windows): the same two
- ``deberta_v2``  DeBERTa-v2's layers with a key/value cache (disentangled attention, convolution)
- ``deberta``     DeBERTa's last layer at the rows read (v1 and v2), and its enhanced mask decoder: the
                  position table, the two passes; which head layout a checkpoint holds
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "masked" or "causal"
    # Relative (or rotary) positions: no hard length limit, quality degrades past pretraining.
    relative_positions: bool
    # Default number of padding masks after the predicted [MASK] when generating (docs/method.md, section 2):
    # models pretrained to fill spans (DeBERTa: up to 3 tokens, ALBERT: n-grams up to 3) get 2;
    # single-token maskers get 1, enough to keep [SEP] from sitting right after the prediction.
    padding_masks: int = 1
    # The module here whose ``encode_block`` runs the family with the prefix cache
    # (``demo.engine.prefix_cache``); None: the family has only the exact method.
    prefix_cache: str | None = None
    # The module here whose ``states_at`` runs the last layer at the rows read only
    # (``demo.engine.reading``: PLL, exact generation, infilling); None: the whole model runs and
    # the rows are picked from its output (DistilBERT: its layers are not written out
    # here; causal LMs read every position).
    last_layer: str | None = None
    # The ``legacy`` flag DeBERTa's head is built with where the checkpoint's weight names do not
    # tell (``deberta.legacy_of`` reads them): False, Microsoft's lm_predictions.* head. A head built
    # under names the weights lack would be silently re-initialised (docs/method.md, section 2).
    # None: transformers' default, never passed.
    legacy: bool | None = None
    # Positions are numbered after padding_idx (RoBERTa), so 514 embeddings hold 512 tokens.
    positions_after_padding: bool = False
    # The length pretraining used, where it is known apart from the config (DeBERTa: 512);
    # otherwise the config's position count stands for it.
    pretrained_length: int | None = None
    # Pretrained with an enhanced mask decoder before its head (DeBERTa v1 and v2: ``deberta``)
    emd: bool = False


FAMILIES = {
    f.name: f
    for f in [
        Family("bert", "masked", relative_positions=False, prefix_cache="bert", last_layer="bert"),
        Family("distilbert", "masked", relative_positions=False),
        Family("roberta", "masked", relative_positions=False, prefix_cache="bert", last_layer="bert",
               positions_after_padding=True),
        Family("xlm-roberta", "masked", relative_positions=False, last_layer="bert",
               positions_after_padding=True),
        Family("camembert", "masked", relative_positions=False, last_layer="bert",
               positions_after_padding=True),
        Family("electra", "masked", relative_positions=False, last_layer="bert"),
        Family("albert", "masked", relative_positions=False, padding_masks=2, prefix_cache="albert",
               last_layer="albert"),
        Family("modernbert", "masked", relative_positions=True, prefix_cache="modernbert",
               last_layer="modernbert"),
        Family("deberta", "masked", relative_positions=True, padding_masks=2, last_layer="deberta",
               legacy=False, pretrained_length=512, emd=True),
        Family("deberta-v2", "masked", relative_positions=True, padding_masks=2, prefix_cache="deberta_v2",
               last_layer="deberta", legacy=False, pretrained_length=512, emd=True),
        Family("gpt2", "causal", relative_positions=False, padding_masks=0),
        Family("opt", "causal", relative_positions=False, padding_masks=0),
        Family("llama", "causal", relative_positions=True, padding_masks=0),
        Family("mistral", "causal", relative_positions=True, padding_masks=0),
        Family("qwen2", "causal", relative_positions=True, padding_masks=0),
        Family("gemma", "causal", relative_positions=True, padding_masks=0),
        Family("phi3", "causal", relative_positions=True, padding_masks=0),
        Family("gpt_neox", "causal", relative_positions=True, padding_masks=0),
        # Ettin's decoders: ModernBERT's architecture (rotary positions) with causal attention
        Family("modernbert-decoder", "causal", relative_positions=True, padding_masks=0),
    ]
}

# The families the prefix cache runs, in the table's order (its refusal names them).
PREFIX_CACHE_FAMILIES = tuple(name for name, family in FAMILIES.items() if family.prefix_cache)


def family_of(config) -> Family:
    """The family of a transformers config; unknown types get conservative defaults."""
    model_type = getattr(config, "model_type", "")
    family = FAMILIES.get(model_type)
    if family is not None:
        if family.relative_positions and getattr(config, "position_biased_input", False):
            # A DeBERTa built with absolute position embeddings is length-limited like BERT.
            return replace(family, relative_positions=False)
        return family
    is_causal = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in (config.architectures or []))
    return Family(model_type or "unknown", "causal" if is_causal else "masked",
                  relative_positions=not hasattr(config, "max_position_embeddings"),
                  padding_masks=0 if is_causal else 1)


def max_positions(config, family: Family) -> int | None:
    """Hard limit on input length in tokens (specials included), or None for relative positions."""
    if family.relative_positions:
        return None
    n = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if n is None:
        return None
    if family.positions_after_padding:
        n -= (getattr(config, "pad_token_id", 1) or 1) + 1
    return int(n)


def pretrained_length(config, family: Family) -> int | None:
    """Length the model saw in pretraining (to mark on length plots)."""
    if family.pretrained_length is not None:
        return family.pretrained_length
    n = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    limit = max_positions(config, family)
    return limit if limit is not None else n
