"""The precision left to the machine (``dtype="auto"``, the app's ``DEMO_CPU_DTYPE``): decided once
per process from the CPU's flags and, where they leave it open, a probe repeated until stable; the
tests' own precision is pinned (float32), whatever this CPU has."""

import pytest
import torch

from demo.engine import precision
from tests.conftest import STANDIN_MLM


@pytest.fixture
def machine(monkeypatch):
    """Pretend this machine has ``flags`` and measures ``speeds[dtype]`` GFLOP/s, one value per
    round where a list is given; ``measured`` counts the multiplies timed."""
    state = {"flags": set(), "speeds": {"float32": 160.0, "bfloat16": 400.0}, "measured": 0}

    def gflops(width, dtype, device="cpu"):
        state["measured"] += 1
        speed = state["speeds"][dtype]
        return speed.pop(0) if isinstance(speed, list) else speed
    monkeypatch.setattr(precision, "cpu_flags", lambda: state["flags"])
    monkeypatch.setattr(precision, "matmul_gflops", gflops)
    precision.decide.cache_clear()
    yield state
    precision.decide.cache_clear()


def test_a_cpu_without_bfloat16_units_runs_float32_without_measuring(machine):
    chosen = precision.decide("cpu")
    assert chosen.dtype == "float32" and "neither AMX nor AVX-512 BF16" in chosen.why
    assert machine["measured"] == 0


def test_a_cpu_with_amx_runs_bfloat16_and_says_what_it_measured(machine):
    machine["flags"] = {"avx2", "amx_bf16", "amx_tile"}
    machine["speeds"]["bfloat16"] = 200.0  # a loaded moment's figure does not overrule the units
    chosen = precision.decide("cpu")
    assert chosen.dtype == "bfloat16" and "AMX" in chosen.why and "200 GFLOP/s in bfloat16, 160 in float32" in chosen.why


def test_avx512_bf16_alone_takes_bfloat16_where_the_probe_finds_twice_the_speed(machine):
    machine["flags"] = {"avx512f", "avx512_bf16"}
    assert precision.decide("cpu").dtype == "bfloat16"  # 2.5x
    precision.decide.cache_clear()
    machine["speeds"]["bfloat16"] = 300.0  # 1.9x: not worth bfloat16's rounding
    chosen = precision.decide("cpu")
    assert (chosen.dtype, chosen.short) == ("float32", "auto: bfloat16 only 1.9x faster here")


def test_the_probe_repeats_until_two_rounds_agree_and_takes_their_middle(machine):
    machine["flags"] = {"avx512_bf16"}
    # rounds of bfloat16 against a steady float32 (100): 1.2x (cores busy), 3.0x, 2.9x: agreed at the third
    machine["speeds"] = {"float32": 100.0, "bfloat16": [120.0, 300.0, 290.0, 999.0]}
    assert precision.probe("cpu") == (290.0, 100.0)
    assert machine["speeds"]["bfloat16"] == [999.0]  # no fourth round


def test_auto_is_decided_once_per_process(machine):
    machine["flags"] = {"avx512_bf16"}
    first = precision.decide("cpu")
    machine["speeds"]["bfloat16"] = 100.0  # the machine now busy: nothing is measured again
    measured = machine["measured"]
    assert precision.decide("cpu") is first and machine["measured"] == measured


def test_the_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 amx_bf16\n\nprocessor\t: 1\nflags\t\t: fpu sse avx2 amx_bf16\n")
    assert precision.cpu_flags(str(info)) == {"fpu", "sse", "avx2", "amx_bf16"}
    assert precision.cpu_flags(str(tmp_path / "missing")) == set()


def test_the_measurement_is_a_real_speed():
    assert precision.matmul_gflops(64, "float32") > 0.1 and precision.matmul_gflops(64, "bfloat16") > 0.1


@pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) is not beside this clone")
def test_a_model_left_to_the_machine_loads_as_decided_and_says_why(machine):
    from demo.engine.models import load_model
    from demo.ui.pickers import model_note
    machine["flags"] = {"amx_bf16"}
    lm = load_model(str(STANDIN_MLM), dtype="auto")
    assert lm.dtype == torch.bfloat16 and lm.precision.dtype == "bfloat16"
    note = model_note(lm)
    assert "bfloat16" in note and "auto: AMX, 2.5x float32" in note and "400 GFLOP/s" in note
    assert load_model(str(STANDIN_MLM)).precision is None  # float32 asked for: nothing to say


def test_the_app_loads_in_its_cpu_precision_and_the_tests_pin_theirs():
    from demo.app.deployment import Deployment
    from demo.app_settings import AppSettings
    assert AppSettings().cpu_dtype == "float32"  # tests/conftest.py: not what this CPU measures
    if not torch.cuda.is_available():
        assert Deployment.current().dtype() == "float32"
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DEMO_CPU_DTYPE", "bfloat16")
            assert Deployment.current().dtype() == "bfloat16"
