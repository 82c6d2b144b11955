"""The engine: loads a masked or causal LM and runs it (scoring, generating). It takes raw text and
one settings object, applies the text conventions itself, and knows nothing of tasks or the app.

- ``sources``       where a model comes from (Hub id, folder, GGUF file), without torch
- ``gguf_cache``    a GGUF file converted once into a plain model folder, read by every later load
- ``families``      what each family has and supports (one table), and each family's own code (a package)
- ``models``        ``load_model``: one entry point for masked and causal LMs; bounded cache
- ``precision``     the weights' precision left to the machine: decided once, from the CPU's units
- ``batch_invariance`` half precision on the CPU: each batch row computed as it is alone (tiles, per-row attention)
- ``text``          the text conventions: newline marker, junction space
- ``reading``       what a masked LM's head reads (the last layer, or DeBERTa's enhanced mask decoder)
- ``heads``         a model's prediction head on its own: hidden states to logits at chosen positions
- ``pll``           scoring: PLL variants, causal log-likelihood, per-token scores
- ``pll_approx``    the approximate PLL's near-ties, re-scored exactly
- ``pll_decoder``   the decoder's own likelihood: each token read in the window generation predicts it from
- ``elbo``          the masked diffusion ELBO: masking patterns drawn (or all of them), their estimate (no torch)
- ``batching``      scoring's forward passes: sub-batches under a token budget, padding, the head in chunks
- ``mask_window``   the mask window's size and the padding-mask default (no torch)
- ``mlm_decoder``   a masked LM dressed as a causal LM for transformers' ``generate()``
- ``prefix_cache``  the approximate, faster decoding: the prompt's keys/values reused
- ``block_cache``   the same for writing block by block: what precedes the open block kept (Fast-dLLM)
- ``parallel_unmasking`` the padding masks' confident guesses written without a pass of their own
- ``decoding``      one run of transformers' ``generate()`` over either kind, and what it did
- ``batch_rows``    requests decoded together by ``generate()``: each request's rows, as it runs alone
- ``generation``    one ``generate()`` for masked and causal LMs
- ``unmasking``     the any-order unmasking loop: k tokens a step, in an order, sliding or block by block
- ``sampling``      how a written token is drawn: transformers' processors, for generate() and unmasking alike
- ``infill``        a masked LM fills blanks in a text by iterative unmasking, in a chosen order
- ``infill_causal`` a causal LM's fill of the same blanks (from the left, or in the middle), both ranked
- ``constraints``   what the decoder may write and when it stops: digits, choices, stop strings
- ``trace``         the step-by-step record of a generation (windows, top-k, beams)
- ``counting``      the work a request did: forward passes and the tokens they read, counted as they run
- ``fitting``       inputs longer than a model reads: cut from the left or skipped; long texts in windows
"""
