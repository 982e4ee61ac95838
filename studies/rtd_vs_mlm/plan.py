"""The study's plan: one encoder shape pretrained with each objective, the MLM arm given as many steps as
match the ELECTRA arm's training FLOPs (configs/flops.py: the count of the product's --also-mlm), checkpoints at
equal-compute budgets."""
import dataclasses
import pathlib

from configs import flops
from configs.pretraining_config import PretrainingConfig
from training_jax import fit

ARMS = ("electra", "mlm")
WARMUP_FRACTION = 0.1
CONTROL = "random_init"  # the no-pretraining control: the ELECTRA arm's model folder at step 0
# The study's encoder: hidden 128, 4 layers, embedding 128 (issue 6's "small model shape"); the
# generator a quarter of the discriminator's width, as the paper found best.
MODEL = {"model_size": "electra_small",
         "model_hparam_overrides": {"hidden_size": 128, "num_layers": 4, "num_heads": 2, "intermediate_size": 512},
         "generator_hidden_size": 0.25}
PRETRAINING = {"learning_rate": 5e-4, "train_batch_size": 64, "eval_batch_size": 64,
               "mixed_precision": "mixed_bfloat16", "use_xla": False, "iterations_per_loop": 50,
               "keep_checkpoint_max": 0, "do_eval": True, "num_eval_steps": 10}


@dataclasses.dataclass
class Plan:
    work_dir: pathlib.Path
    shared_data: pathlib.Path
    electra_steps: int
    budgets: int
    tasks: list
    seeds: int
    finetune_max_steps: int
    extra_budgets: list = dataclasses.field(default_factory=list)  # more budgets, as ELECTRA steps
    model: dict = dataclasses.field(default_factory=lambda: dict(MODEL))
    pretraining: dict = dataclasses.field(default_factory=lambda: dict(PRETRAINING))

    @property
    def data_dir(self):
        return self.work_dir / "data"

    def arm_hparams(self, arm):
        return {**self.model, **self.pretraining, "electra_objective": arm == "electra"}

    def arm_config(self, arm):
        return PretrainingConfig.create(self.arm_hparams(arm))

    def flops_per_step(self, arm):
        return flops.train_flops_per_step(self.arm_config(arm))

    def steps_per_electra_step(self, arm):
        """The arm's steps per ELECTRA step at equal training FLOPs (1 for ELECTRA)."""
        if arm == "electra":
            return 1.0
        return flops.steps_at_equal_flops(self.arm_config("electra"), self.arm_config(arm))

    def steps(self, arm):
        """ELECTRA's steps as given; MLM's scaled to the same FLOPs, a multiple of the budget count (the rule
        a run sized on the accelerator follows too: training_jax.fit.model_steps)."""
        if arm == "electra":
            return self.electra_steps
        return fit.model_steps(self.electra_steps, self.steps_per_electra_step(arm), self.budgets)

    def checkpoint_steps(self, arm):
        """The budgets' checkpoints, ascending: the evenly spaced ones and the extra ones. Entry k of both
        arms is the same compute."""
        return sorted(self.evenly_spaced_steps(arm) + self.extra_checkpoint_steps(arm))

    def evenly_spaced_steps(self, arm):
        every = self.steps(arm) // self.budgets
        return [every * (k + 1) for k in range(self.budgets)]

    def extra_checkpoint_steps(self, arm):
        """The extra budgets that are not evenly spaced ones already (which would pair an arm's checkpoint with
        two of the other's), for MLM at the nearest step of the ELECTRA step's FLOPs."""
        extras = sorted(set(self.extra_budgets) - set(self.evenly_spaced_steps("electra")))
        ratio = self.steps_per_electra_step(arm)
        return [max(1, round(step * ratio)) for step in extras]


def pretraining_hparams(plan, arm):
    """The arm's run_pretraining.py --hparams: the study's settings, its step count, warmup 10%."""
    steps = plan.steps(arm)
    return {**plan.arm_hparams(arm), "num_train_steps": steps,
            "num_warmup_steps": fit.warmup_steps(steps, WARMUP_FRACTION), "save_checkpoints_steps": steps // plan.budgets,
            "eval_every_steps": steps // plan.budgets,
            "extra_checkpoint_steps": plan.extra_checkpoint_steps(arm)}
