"""training_jax.fit: a run's length set from its measured speed, by the same rules as a planned run."""
import numpy as np
import pytest

from finetune.trials import same_but_trials
from model.lr_schedules import SCHEDULES
from training_jax import fit
from training_jax.step import SizedSchedule


def test_the_units_that_fit_are_bounded_by_the_slowest_arm_per_unit():
    rates, ratios = {"electra": 20.0, "mlm": 30.0}, {"electra": 1.0, "mlm": 1.2}
    units = fit.units_that_fit(rates, ratios, seconds=300.0, multiple=4)
    assert units % 4 == 0
    assert units <= 300 * 20 and units * 1.2 <= 300 * 30  # each arm's steps fit at its own rate
    assert units + 4 > 300 * min(20 / 1.0, 30 / 1.2)  # and no more units would
    slow_mlm = fit.units_that_fit({"electra": 20.0, "mlm": 6.0}, ratios, seconds=300.0, multiple=4)
    assert slow_mlm * 1.2 <= 300 * 6 < slow_mlm * 1.2 + 4 * 1.2 * 1.01
    assert fit.units_that_fit(rates, ratios, seconds=0.1, multiple=4) == 0


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("total,warmup", [(1000, 100), (1000, 0), (7, 1)])
def test_the_sized_schedule_gives_the_configs_rates_from_traced_step_counts(name, total, warmup):
    from keras import ops

    schedule = SCHEDULES[name](5e-4, total, warmup, 1.0)
    sized = SizedSchedule(schedule)
    sized.steps = ops.convert_to_tensor(np.array([total, warmup], "float32"))
    for step in (0, 1, warmup, warmup + 1, total // 2, total, total + 5):
        assert float(sized(step)) == pytest.approx(float(schedule(step)), rel=1e-6, abs=1e-12)
    sized.steps = None  # outside a traced step: the config's own schedule
    assert float(sized(3)) == float(schedule(3))


def test_a_rerun_with_more_seeds_keeps_the_trials_done():
    saved = {"learning_rate": 1e-4, "num_trials": 1}
    assert same_but_trials(saved, {"learning_rate": 1e-4, "num_trials": 3})
    assert not same_but_trials(saved, {"learning_rate": 2e-4, "num_trials": 3})
    assert not same_but_trials({**saved, "num_trials": 5}, {"learning_rate": 1e-4, "num_trials": 3})
    assert not same_but_trials(None, saved)
