"""``python -m demo.harness``: lm-evaluation-harness's own command line, with our model
registered.

    python -m demo.harness --model mlm --tasks copa --device cuda:0 \\
        --model_args pretrained=microsoft/deberta-v2-xxlarge,method=right_masks [--include_path DIR]
    accelerate launch -m demo.harness --model mlm --model_args pretrained=... --tasks ...

Everything after the module name is lm-eval's (``python -m demo.harness run --help``);
the model and its ``--model_args`` are ``demo.harness.model``'s. No fork of lm-eval:
this module only imports ours (which registers ``mlm``) before handing over to lm-eval's
``cli_evaluate``.
"""

from lm_eval.__main__ import cli_evaluate

from . import model  # noqa: F401  registers the "mlm" model


def main() -> None:
    """lm-eval's command line (it reads sys.argv)."""
    cli_evaluate()


if __name__ == "__main__":
    main()
