"""The RTD-vs-MLM study's runs sized on the accelerator (training_jax.fit) get the config its plan resolves
for the same length: the import here checks one against the other."""
from studies.rtd_vs_mlm.plan import WARMUP_FRACTION, pretraining_hparams
from tests.study_fixtures import plan_in
from training_jax import fit


def test_a_sized_run_has_the_config_a_planned_run_of_that_length_has(tmp_path):
    """The import here checks the returned run's config against the plan's: both rules must agree."""
    for budgets, electra_steps in ((1, 6_040), (3, 1_500), (2, 14)):
        plan = plan_in(tmp_path, electra_steps=electra_steps, budgets=budgets, extra_budgets=[])
        for arm in ("electra", "mlm"):
            steps = fit.model_steps(electra_steps, plan.steps_per_electra_step(arm), budgets)
            assert steps == plan.steps(arm)
            fields = fit.sized_fields(steps, budgets, WARMUP_FRACTION, evals=30)
            planned = pretraining_hparams(plan, arm)
            assert {k: planned[k] for k in fields["config"] if k != "extra_checkpoint_steps"} == \
                {k: v for k, v in fields["config"].items() if k != "extra_checkpoint_steps"}
            assert fields["checkpoint_steps"] == plan.checkpoint_steps(arm)
