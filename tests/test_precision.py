"""The precision left to the machine (``dtype="auto"``, the app's ``DEMO_CPU_DTYPE``): bfloat16 only
where it measured at least 2x float32's speed, said on the model line; the tests' own precision is
pinned (float32), whatever this CPU measures."""

import pytest
import torch

from demo.engine import precision
from tests.conftest import STANDIN_MLM


@pytest.fixture
def measured(monkeypatch):
    """Pretend this machine measured ``speeds[dtype]`` GFLOP/s."""
    speeds = {"float32": 160.0, "bfloat16": 400.0}
    monkeypatch.setattr(precision, "matmul_gflops", lambda width, dtype, device="cpu": speeds[dtype])
    return speeds


def test_auto_takes_bfloat16_only_where_it_is_at_least_twice_as_fast(measured):
    chosen = precision.choose(384)
    assert (chosen.dtype, chosen.short) == ("bfloat16", "auto: 2.5x float32's speed here")
    assert "400 GFLOP/s in bfloat16, 160 in float32" in chosen.why and "384-wide" in chosen.why
    measured["bfloat16"] = 300.0  # 1.9x: not worth bfloat16's rounding
    chosen = precision.choose(384)
    assert (chosen.dtype, chosen.short) == ("float32", "auto: bfloat16 only 1.9x faster here")
    measured["bfloat16"] = 320.0
    assert precision.choose(384).dtype == "bfloat16"  # 2.0x: taken


def test_the_measurement_is_a_real_speed():
    assert precision.matmul_gflops(64, "float32") > 0.1 and precision.matmul_gflops(64, "bfloat16") > 0.1


@pytest.mark.skipif(not STANDIN_MLM.is_dir(), reason="../shared/models (offline stand-in MLM) is not beside this clone")
def test_a_model_left_to_the_machine_loads_as_measured_and_says_why(measured):
    from demo.engine.models import load_model
    from demo.ui.pickers import model_note
    lm = load_model(str(STANDIN_MLM), dtype="auto")
    assert lm.dtype == torch.bfloat16 and lm.precision.dtype == "bfloat16"
    note = model_note(lm)
    assert "bfloat16" in note and "auto: 2.5x float32" in note and "400 GFLOP/s" in note
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
