"""What the RTD-vs-MLM study's tests share: a plan of the study in a temporary folder."""
from studies.rtd_vs_mlm import plan as study_plan


def plan_in(tmp_path, **changes):
    values = dict(work_dir=tmp_path, shared_data=tmp_path / "shared", electra_steps=1500, budgets=3,
                  tasks=["cola", "rte"], seeds=3, finetune_max_steps=0)
    values.update(changes)
    return study_plan.Plan(**values)
