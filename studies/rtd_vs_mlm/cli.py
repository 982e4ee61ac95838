"""The paper's central comparison at small scale: replaced-token detection vs masked LM at equal compute.

    python -m studies.rtd_vs_mlm --work-dir runs/rtd_vs_mlm          # hours on 2 cores; stop and rerun freely

One encoder shape is pretrained twice on the shared Wikipedia shards with BERT's vocabulary, by
run_pretraining.py: the ELECTRA objective and the MLM-only objective, with the same data and
hyperparameters. The MLM run gets as many steps as give it the ELECTRA run's training FLOPs
(bench/flops.py: generator and discriminator, forward and backward), and both save --budgets evenly
spaced checkpoints, so checkpoint k of each run has spent the same compute. Every checkpoint is then
fine-tuned by run_finetuning.py on each task with --seeds seeds (medians reported).

Stages, each skipped when its output is complete, so the same command continues after any stop:
  1. dataset      <work>/data/pretrain_tfrecords (build_pretraining_dataset.py)
  2. pretraining  <work>/data/models/{electra,mlm}/ (run_pretraining.py resumes from its last checkpoint)
  3. fine-tuning  <work>/data/models/<arm>_step<N>/results/<task>_results.json, one folder per checkpoint,
                  on the shared GLUE files (<shared-data>/glue)
                  (a task whose results file says "complete" is not run again); last, the same for
                  <work>/data/models/random_init: the encoder with no pretraining at all (step 0, seed 0),
                  the floor that pretraining has to beat
  4. summary      <work>/summary.json, <work>/summary.md and the figures <work>/dev_score_vs_flops.png and
                  <work>/pretraining_curves.png, rewritten after every fine-tuning run

<work>/timings.json adds up the wall-clock seconds of every stage the script ran (across restarts; a run
cut off by a stop is not counted, its rerun is).

Pretraining and fine-tuning on an accelerator without TensorFlow (JAX only; studies/rtd_vs_mlm/device.py):
  --device-export DIR    stage 1, then each arm's resolved config, the examples and the fine-tuning tasks as
                         arrays into DIR, and the accelerator's commands (printed, and in DIR/COMMANDS.txt):
                         --device-size DIR, studies.device_path.pretrain_export per arm, --device-finetune DIR,
                         --device-collect DIR --out OUT; stop
  --device-results OUT   stage 2 imports what came back: OUT/<arm>/weights-<step>.npz (whole or in shards) as
                         budget folders, the metrics as TensorBoard logs, OUT/finetune/<model>.json as the
                         results of the models fine-tuned there, instead of running run_pretraining.py
  --control-only         only the no-pretraining control's fine-tuning (it needs no pretraining)
  --finetune-ready       only the fine-tuning of the budget checkpoints that exist now, the last budget first
                         (pretraining may still be running, or have been stopped): a partial table when there
                         is no time for all
  --pretrain-only ARM    only stage 2 for one arm, then stop: to run the arms in another order, or on two
                         machines sharing the work folder
The same flags (--electra-steps, --budgets, --extra-budgets, --hparams) must be given to every call of one study.
"""
import argparse
import json
import os
import pathlib

from studies.rtd_vs_mlm.plan import ARMS, CONTROL, Plan
from studies.rtd_vs_mlm.report import write_summary
from studies.rtd_vs_mlm.stages import (REPO, budget_folder, build_dataset, control_folder, finetune, finetuned, log,
                                pretrain, ready_budgets)
from common.errors import InputError, exit_on_input_error
from finetune.registry import get_task

DEFAULT_ELECTRA_STEPS = 1500


@exit_on_input_error
def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.rtd_vs_mlm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, default=None, help="the study's folder (required but "
                        "for the accelerator's stages --device-size, --device-finetune and --device-collect)")
    parser.add_argument("--shared-data", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("ELECTRA_SHARED_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--electra-steps", type=int, default=None, help="the ELECTRA run's steps (default 1500; "
                        "with --device-results, the steps the accelerator sized, from OUT/plan.json)")
    parser.add_argument("--budgets", type=int, default=3, help="evenly spaced checkpoints per run")
    parser.add_argument("--extra-budgets", default="",
                        help="more budgets, as ELECTRA steps separated by commas (e.g. 500: a point below the "
                             "first evenly spaced one); the MLM run saves at the steps of equal FLOPs")
    parser.add_argument("--model-size", default="study",
                        help="'study': the small shape the CPU study uses (hidden 128, 4 layers); or a model size "
                             "as run_pretraining.py names them (electra_small: the paper's, for a GPU)")
    parser.add_argument("--tasks", default="cola,sst,mrpc,sts,rte")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--finetune-max-steps", type=int, default=0,
                        help="cap each fine-tuning run's updates (0: the full recipe's epochs)")
    parser.add_argument("--hparams", default="{}",
                        help="JSON overrides of the study's pretraining hparams (a smaller model for a trial run)")
    parser.add_argument("--device-export", type=pathlib.Path, default=None,
                        help="build the dataset, write what training_jax.pretrain needs to pretrain both arms "
                             "on an accelerator without TensorFlow into this folder, and stop")
    parser.add_argument("--device-results", type=pathlib.Path, default=None,
                        help="the folder holding training_jax.pretrain's <arm>/ outputs: import them instead "
                             "of running run_pretraining.py, then fine-tune as usual")
    parser.add_argument("--control-only", action="store_true",
                        help="fine-tune only the no-pretraining control (it needs no pretraining, so it can run "
                             "here while the arms pretrain on an accelerator) and stop")
    parser.add_argument("--finetune-ready", action="store_true",
                        help="fine-tune only the budget checkpoints pretraining has saved so far, and stop")
    parser.add_argument("--pretrain-only", choices=ARMS, default=None,
                        help="build the dataset if needed, pretrain only this arm, and stop")
    accelerator = parser.add_argument_group("on the accelerator (JAX, no TensorFlow; no --work-dir)")
    accelerator.add_argument("--device-size", type=pathlib.Path, default=None, metavar="EXPORT",
                             help="measure both arms' speed and set the steps so both finish in --minutes")
    accelerator.add_argument("--device-finetune", type=pathlib.Path, default=None, metavar="EXPORT",
                             help="fine-tune each arm's last checkpoint and the control; stops before --minutes")
    accelerator.add_argument("--device-collect", type=pathlib.Path, default=None, metavar="EXPORT",
                             help="copy what comes back (at most 8 files) into --out")
    accelerator.add_argument("--minutes", type=float, default=None,
                             help="--device-size (the 30-minute plan): the pretraining time of both arms "
                                  "(default 17, two pieces); --device-finetune: this call's limit (default 8.5)")
    accelerator.add_argument("--out", type=pathlib.Path, default=None, help="--device-collect: where to copy")
    accelerator.add_argument("--part", choices=("pretraining", "finetuning"), default="pretraining",
                             help="--device-collect: what the call that ends with it did (what comes back)")
    parser.add_argument("--call-minutes", default=None,
                        help="--device-export: the two device calls' minutes, e.g. 9,3 (the default: the "
                             "15-minute plan of studies/rtd_vs_mlm/DEVICE.md)")
    args = parser.parse_args(argv)
    if args.device_size or args.device_finetune or args.device_collect:
        from studies.rtd_vs_mlm import device

        if args.device_size:
            device.size_on_device(args.device_size, args.minutes or 2 * device.PIECE_MINUTES)
        elif args.device_finetune:
            device.finetune_on_device(args.device_finetune, args.minutes or device.PIECE_MINUTES)
        else:
            if args.out is None:
                raise InputError("--device-collect: give --out (on the accelerator, $OUT)")
            device.collect_from_device(args.device_collect, args.out, args.part)
        return
    if args.work_dir is None:
        raise InputError("--work-dir: required (the study's folder, e.g. runs/rtd_vs_mlm)")
    tasks = args.tasks.split(",")
    for task in tasks:
        get_task(task)  # an unknown name stops here, before any work
    try:
        extra_budgets = [int(step) for step in args.extra_budgets.split(",") if step.strip()]
    except ValueError:
        raise InputError(f"--extra-budgets {args.extra_budgets!r}: give ELECTRA steps separated by commas, e.g. 500")
    if args.device_results:
        args.electra_steps = sized_electra_steps(args.device_results, args.electra_steps)
    args.electra_steps = args.electra_steps or DEFAULT_ELECTRA_STEPS
    if any(not 0 < step < args.electra_steps for step in extra_budgets):
        raise InputError(f"--extra-budgets {args.extra_budgets}: each must be between 1 and --electra-steps - 1 "
                         f"({args.electra_steps - 1})")
    plan = Plan(args.work_dir.resolve(), args.shared_data.resolve(), args.electra_steps, args.budgets, tasks,
                args.seeds, args.finetune_max_steps, extra_budgets)
    if args.model_size != "study":
        plan.model = {"model_size": args.model_size}
    plan.pretraining.update(json.loads(args.hparams))
    plan.work_dir.mkdir(parents=True, exist_ok=True)
    log(f"ELECTRA {plan.steps('electra')} steps, MLM {plan.steps('mlm')} steps (equal FLOPs: "
        f"{plan.flops_per_step('electra'):.3e} vs {plan.flops_per_step('mlm'):.3e} per step); checkpoints "
        f"{plan.checkpoint_steps('electra')} / {plan.checkpoint_steps('mlm')}")
    if args.control_only:
        for task in plan.tasks:
            finetune(plan, control_folder(plan), task, CONTROL)
            write_summary(plan)
        log(f"control done: {plan.work_dir / 'summary.md'}")
        return
    if args.finetune_ready:
        ready = ready_budgets(plan)
        log(f"checkpoints ready: {', '.join(f'{arm} {step}' for arm, step in ready) or 'none'}")
        for arm, step in ready:
            for task in plan.tasks:
                finetune(plan, budget_folder(plan, arm, step), task, arm)
                write_summary(plan)
        return
    build_dataset(plan)
    if args.device_export:
        from studies.rtd_vs_mlm.device import export_for_device

        export_for_device(plan, args.device_export.resolve(), minutes=call_minutes(args.call_minutes),
                          shown_as=args.device_export)
        return
    if args.pretrain_only:
        pretrain(plan, args.pretrain_only)
        log(f"{args.pretrain_only} pretrained to {plan.steps(args.pretrain_only)} steps")
        return
    if args.device_results:
        from studies.rtd_vs_mlm.device import import_device_finetuning, import_device_run

        for arm in ARMS:
            import_device_run(plan, arm, args.device_results.resolve())
        import_device_finetuning(plan, args.device_results.resolve())
        write_summary(plan)  # what came back, as it is: fine-tuning at this size is the accelerator's work
        log(f"imported: {plan.work_dir / 'summary.md'}")
        return
    for arm in ARMS:
        pretrain(plan, arm)
    for budget in range(len(plan.checkpoint_steps("electra"))):
        for arm in ARMS:
            step = plan.checkpoint_steps(arm)[budget]
            folder = plan.data_dir / "models" / f"{arm}_step{step}"
            if all(finetuned(folder, task) for task in plan.tasks):
                continue  # fine-tuned already (here, or on the accelerator)
            folder = budget_folder(plan, arm, step)
            for task in plan.tasks:
                finetune(plan, folder, task, arm)
                write_summary(plan)
    for task in plan.tasks:
        finetune(plan, control_folder(plan), task, CONTROL)
        write_summary(plan)
    write_summary(plan)
    log(f"done: {plan.work_dir / 'summary.md'}")


def call_minutes(text):
    """--call-minutes "9,3" → (9.0, 3.0); None → the default plan."""
    if text is None:
        return None
    try:
        minutes = tuple(float(part) for part in text.split(","))
    except ValueError:
        minutes = ()
    if len(minutes) != 2 or min(minutes) <= 0:
        raise InputError(f"--call-minutes {text!r}: give the two calls' minutes, e.g. 9,3")
    return minutes


def sized_electra_steps(results_dir, given):
    """The ELECTRA steps the accelerator sized the run to: they replace --electra-steps when that is left out or
    is the planned (exported) length the device sized shorter; any other --electra-steps is refused."""
    sized, planned, source = device_sized_steps(results_dir)
    if sized and given and given != sized:
        if given != planned:
            raise InputError(f"--electra-steps {given}: {source} says the accelerator sized the run to {sized}; give "
                             f"{sized} or leave the flag out")
        log(f"--electra-steps {given}: the planned length; the accelerator sized the run to {sized} steps "
            f"({source}), which the study takes")
    return sized or given


def device_sized_steps(results_dir):
    """(sized ELECTRA steps, planned ones, the file that says so) of what came back: the collect's plan.json
    (its sized entry), else the ELECTRA run's record; (None, None, None) when neither is there."""
    from checkpoints import run_record
    from studies.device_path.export_file import from_old_format
    from pretrain_loop.metrics_file import METRICS_FILE

    path = pathlib.Path(results_dir) / run_record.PLAN_FILE
    if path.is_file():
        record = json.loads(path.read_text())
        sized = (record["arms"]["electra"].get("sized") or {}).get("num_train_steps")
        return sized, from_old_format(record["study"])["models"]["electra"]["num_train_steps"], path
    metrics = pathlib.Path(results_dir) / "electra" / METRICS_FILE
    run = run_record.read_run(metrics)[1] if metrics.is_file() else None
    if run is None:
        return None, None, None
    return run["num_train_steps"], run["config"]["num_train_steps"], metrics


if __name__ == "__main__":
    main()
