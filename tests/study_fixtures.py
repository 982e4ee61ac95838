"""What the RTD-vs-MLM study's tests share: a plan of the study in a temporary folder, and a micro study
exported for the device."""
from studies.rtd_vs_mlm import plan as study_plan


def plan_in(tmp_path, **changes):
    values = dict(work_dir=tmp_path, shared_data=tmp_path / "shared", electra_steps=1500, budgets=3,
                  tasks=["cola", "rte"], seeds=3, finetune_max_steps=0)
    values.update(changes)
    return study_plan.Plan(**values)


def export_tiny_study(tmp_path, electra_steps=6, budgets=2, finetune_tasks=False, export=None, minutes=None,
                      throughput_seconds=None, **changes):
    """A study of a 1-layer micro model (it compiles fastest under JAX) on a tiny dataset, exported for the
    device: (plan, export folder). With finetune_tasks, an RTE-format fixture is exported too; with
    `export` (a folder in a repository mirror), the wheels are expected beside it in .whl/; throughput_seconds
    as export_for_device's (None: its default)."""
    from studies.rtd_vs_mlm.device import THROUGHPUT_SECONDS, WHEELS_DIR, export_for_device
    from tests.helpers import MICRO_MODEL, build_tiny_dataset

    plan = plan_in(tmp_path / "work", electra_steps=electra_steps, budgets=budgets, tasks=["rte"], **changes)
    build_tiny_dataset(plan.data_dir, max_seq_length=32, num_shards=2)
    vocab = plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt"  # the study reads the shared vocab
    vocab.parent.mkdir(parents=True)
    vocab.write_text((plan.data_dir / "vocab.txt").read_text())
    if finetune_tasks:
        from tests.helpers import write_rte

        text = " ".join(p.read_text() for p in sorted((plan.data_dir / "corpus").glob("*.txt")))
        sentences = [" ".join(s.split()[:10]) for s in text.replace("\n", " ").split(". ") if len(s.split()) >= 6]
        write_rte(plan.shared_data / "glue" / "rte", sentences, {"train": 40, "dev": 16}, seed=0)
    plan.model["model_hparam_overrides"] = {**MICRO_MODEL, "num_layers": 1}
    plan.pretraining.update(train_batch_size=4, eval_batch_size=4, num_eval_steps=2)
    mirror = export is not None
    export = export or tmp_path / "export"
    export_for_device(plan, export, finetune_tasks=finetune_tasks, minutes=minutes,
                      shown_as=export.name if mirror else None,
                      wheels_dir=export.parent / WHEELS_DIR if mirror else None, wheels=mirror,
                      throughput_seconds=throughput_seconds or THROUGHPUT_SECONDS)
    return plan, export
