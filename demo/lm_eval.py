"""``python -m demo.lm_eval``: lm-evaluation-harness's own command line, with our model registered.

    python -m demo.lm_eval --model mlm --tasks copa --device cuda:0 \\
        --model_args pretrained=microsoft/deberta-v2-xxlarge,method=right_masks [--include_path DIR]
    accelerate launch -m demo.lm_eval --model mlm --model_args pretrained=... --tasks ...

Everything after the module name is lm-eval's (``python -m demo.lm_eval run --help``); the model
and its ``--model_args`` are ``demo.lm_eval_model``'s. No fork of lm-eval: this module only
imports ours (which registers ``mlm``) before handing over to lm-eval's ``cli_evaluate``.
"""

import sys

if not __package__:  # run as a file, this module's folder would come first and shadow lm-eval
    sys.exit("Run it as a module: python -m demo.lm_eval ... (or accelerate launch -m demo.lm_eval ...)")

from lm_eval.__main__ import cli_evaluate  # noqa: E402  (lm-eval's package, not this module)

from . import lm_eval_model  # noqa: E402,F401  registers the "mlm" model


def main() -> None:
    """lm-eval's command line (it reads sys.argv)."""
    cli_evaluate()


if __name__ == "__main__":
    main()
