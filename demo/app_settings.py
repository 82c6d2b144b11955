"""What a deployment sets through ``DEMO_*`` environment variables (pydantic-settings):
:class:`AppSettings` is the only place they are read (``spaces_config/settings.env`` lists them,
a test keeps both equal); and the one reading of a yes or no typed as text, which the variables
and the command line share (:func:`parse_boolean`)."""

import os
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .refusals import refusal
from .settings import DTYPES, MAX_NEW_TOKENS_CAP
from .user_text import LARGEST, as_said


def parse_boolean(text: str) -> bool:
    """A yes/no value typed as text (a ``DEMO_*`` variable, a command-line option), in any case:
    pydantic's reading, which pydantic-settings gives the variables."""
    try:
        return _BOOLEAN.validate_python(text.strip())
    except ValidationError:
        raise ValueError(f"Expected yes or no (yes/true/t/y/on/1 or no/false/f/n/off/0), "
                         f"not {as_said(text)}.") from None


_BOOLEAN = TypeAdapter(bool)


def _on_a_space() -> bool:
    """A Hugging Face Space sets SPACE_ID: public mode and the start-up check are on there, unless
    the DEMO_PUBLIC and DEMO_SELF_CHECK variables say otherwise."""
    return bool(os.environ.get("SPACE_ID"))


Count = Annotated[int, Field(ge=1, le=LARGEST)]
Amount = Annotated[float, Field(gt=0)]


class AppSettings(BaseSettings):
    """What a deployment sets through environment variables (``DEMO_<FIELD>``, upper case), read by
    pydantic-settings when it is made: ``AppSettings()`` is the only reader of ``DEMO_*`` variables
    (values given to it win)."""
    model_config = SettingsConfigDict(env_prefix="DEMO_", env_ignore_empty=True, frozen=True, allow_inf_nan=False)

    concurrency: Count = Field(1, description=
        "model runs at a time of each kind: generating, scoring, probing (1 on CPU)")
    answers_at_once: Count = Field(32, description=
        "requests of a kind the queue lets in at once (a class): shared answers and refusals go out, "
        "and those waiting for a model are gathered into batches, while `concurrency` of them run a model")
    batch_requests: Count = Field(16, description=
        "distinct requests (generations, fills, rankings) with the same model and settings that wait for "
        "a turn together run as one batch of at most this many, each answer what it gets alone (1: one "
        "at a time; never on ZeroGPU)")
    queue_size: Count = Field(256, description=
        "requests waiting before new ones are refused (a class of 30 pressing buttons that each start "
        "two to four requests, twice over)")
    share_results: bool = Field(True, description=
        "compute identical requests once and share the answer (greedy, beams, seeded sampling: "
        "a class on one lesson step waits for one run)")
    shared_results: Count = Field(256, description=
        "answers of identical requests kept to share (least recently used dropped)")
    warm_lesson: bool = Field(True, description=
        "at start-up, load the default pair and compute every lesson step in the background, so "
        "a class's first press of each step is answered at once")
    max_models: Count = Field(3, description="models kept loaded (least recently used dropped)")
    max_model_gb: Amount = Field(8.0, description="their total parameter memory")
    cpu_dtype: Literal["auto", "float32", "bfloat16"] = Field("float32", description=
        "weights' precision where the app runs on a CPU. auto is decided once at start-up: bfloat16 "
        "with AMX, float32 without bfloat16 units, and with AVX-512 BF16 alone bfloat16 where a probe "
        "repeated until stable measures at least 2x float32's speed; each run's model line says which "
        "and why, and its Reproduce code loads the same. bfloat16 changes some lesson figures "
        "(docs/lesson.md quotes float32's), so float32 stays the default")
    gpu_dtype: Literal[DTYPES] = Field("float16", description=
        "weights' precision where the app runs on a GPU. float16 kept every "
        "ranking and greedy output of float32 and scored 1.2-2.5x faster on an H100, scores moved by "
        "at most 0.07 nats (benchmarks/bench_precision.py --device cuda, docs/method.md section 3)")
    max_prompt_chars: Count = Field(6000, description="characters of a prompt or context")
    max_candidate_chars: Count = Field(400, description="characters per candidate")
    max_new_tokens: Count = Field(128, le=MAX_NEW_TOKENS_CAP, description="new tokens per generation")
    max_grid_cells: Count = Field(24, description="needle-grid runs per request")
    max_grid_tokens: Count = Field(2048, description="longest needle-grid length")
    max_sweep_items: Count = Field(40, description="mask sweep: items evaluated at each value")
    max_request_tflop: Amount = Field(4.0, description=
        "work one request may do, in trillions of operations (demo.app.budget); refused beyond")
    assumed_gflops: Amount = Field(50.0, description=
        "the machine's speed assumed when telling people how long a request would take")
    max_request_seconds: Amount = Field(120.0, description=
        "a generation or needle grid stops after this long, keeping what it has")
    local_models: str = Field("", description=
        "local model folders or .gguf files offered as 'local', separated by os.pathsep")
    local_pairs: str = Field("", description=
        "JSON file of model pairs to offer: [{name, masked, causal, why}], local folders")
    data_root: str = Field("", description="folder with the evaluation datasets")
    mcp: bool = Field(True, description="also serve the app's endpoints as MCP tools, for agents (/gradio_api/mcp/sse)")
    public: bool = Field(default_factory=_on_a_space, description=
        "public mode: typed names must be Hub ids, Hub models are size-checked before download, "
        "and each visitor's model runs are rate-limited (on by itself where SPACE_ID is set)")
    max_hub_gb: Amount = Field(6.0, description=
        "public mode: weight files a typed Hub model may download, from Hub metadata")
    runs_per_minute: Count = Field(20, description="public mode: model runs per visitor per minute")
    self_check: bool = Field(default_factory=_on_a_space, description=
        "check the default models at start-up (obvious words, a COPA slice; mlm-icl check-model) "
        "and show the result in the page (on by itself where SPACE_ID is set)")

    def __init__(self, **values):
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise ValueError(refusal(AppSettings, err, name_of=AppSettings.variable)) from None

    @classmethod
    def variable(cls, name: str) -> str:
        """The environment variable of a field: ``local_models`` -> ``DEMO_LOCAL_MODELS``."""
        return f"{cls.model_config['env_prefix']}{name.upper()}"
