"""How long building a settings object takes, as every request, command and test builds one.

Times ``GenerationSettings`` (pydantic, every field checked) built from a request's values, and the
page's way in (``settings_form.endpoint``: the widget values made whole, the deployment's caps,
then the class), against a plain frozen dataclass with the same fields and defaults and no checks,
built in the same run (the floor of any settings object). The target: no slower than the
dataclass settings this replaced took for generation (35 us).

    python benchmarks/bench_settings.py [--repeats 20000]

Last line: ``bench_settings generation_us=.. page_request_us=.. plain_us=.. over_plain=..``.
"""

import argparse
import dataclasses
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo.declared import default_of
from demo.settings import GenerationSettings  # noqa: E402

# a sampled request, as the page's first preset sends it
VALUES = dict(strategy="sample", max_new_tokens=24, num_beams=4, temperature=0.2, top_k=64, top_p=0.9,
              repetition_penalty=1.0, padding_masks=None, stop_at_newline=True, seed=0, trace=True, trace_top_k=5)


def microseconds(build, repeats: int) -> float:
    """The quickest of five rounds, per build."""
    return min(timeit.repeat(build, number=repeats, repeat=5)) / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20000)
    args = parser.parse_args()
    from demo.ui.prompting import generate_masked

    fields = [(f.name, object, dataclasses.field(default_factory=lambda f=f: default_of(GenerationSettings, f.name)))
              for f in dataclasses.fields(GenerationSettings)]
    plain = dataclasses.make_dataclass("Plain", fields, frozen=True)
    page = dict(VALUES, padding_masks="default", prompt="p", model_name="m", decoding="exact")
    checked = microseconds(lambda: GenerationSettings(**VALUES), args.repeats)
    request = microseconds(lambda: generate_masked.settings(page), args.repeats // 4)
    floor = microseconds(lambda: plain(**VALUES), args.repeats)
    print(f"GenerationSettings: {checked:.1f} us checked; from a page request {request:.1f} us; a plain "
          f"dataclass {floor:.1f} us")
    print(f"bench_settings generation_us={checked:.2f} page_request_us={request:.2f} plain_us={floor:.2f} "
          f"over_plain={checked / floor:.2f}")


if __name__ == "__main__":
    main()
