"""The paper's central comparison at small scale: replaced-token detection vs masked LM at equal compute.

    python -m bench.rtd_vs_mlm --work-dir runs/rtd_vs_mlm          # hours on 2 cores; stop and rerun freely

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

Pretraining and fine-tuning on an accelerator without TensorFlow (JAX only; bench/rtd_vs_mlm_device.py):
  --device-export DIR    stage 1, then each arm's resolved config, the examples and the fine-tuning tasks as
                         arrays into DIR, and the accelerator's commands (printed, and in DIR/COMMANDS.txt):
                         --device-size DIR, training_jax.pretrain per arm, --device-finetune DIR,
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
import dataclasses
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time


from common import atomic
from bench import flops
from configs.pretraining_config import PretrainingConfig
from common.errors import InputError, exit_on_input_error
from finetune.registry import get_task
from training.curves import CURVES, training_curves  # noqa: F401 (bench scripts and tests import them from here)

REPO = pathlib.Path(__file__).resolve().parents[1]

ARMS = ("electra", "mlm")
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
        config = self.arm_config(arm)
        return flops.train_flops_per_sequence(config) * config.train_batch_size

    def steps(self, arm):
        """ELECTRA's steps as given; MLM's scaled to the same FLOPs, a multiple of the budget count."""
        if arm == "electra":
            return self.electra_steps
        ratio = self.flops_per_step("electra") / self.flops_per_step("mlm")
        return max(1, round(self.electra_steps * ratio / self.budgets)) * self.budgets

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
        ratio = self.flops_per_step("electra") / self.flops_per_step(arm)
        return [max(1, round(step * ratio)) for step in extras]


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


TIMINGS = "timings.json"


def run(command, log_file, stage):
    """A stage's subprocess, its output appended to log_file; a failure stops the study (rerun continues).

    Its wall-clock seconds are added to <work>/timings.json under `stage`."""
    log(" ".join(str(c) for c in command))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO))
    start = time.monotonic()
    with open(log_file, "a") as out:
        status = subprocess.run([sys.executable, *map(str, command)], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT).returncode
    if status:
        raise SystemExit(f"stopped: {command[0]} exited with {status}; see {log_file}, fix it and run the study "
                         "again (finished stages are kept)")
    seconds = time.monotonic() - start
    add_timing(pathlib.Path(log_file).parent, stage, seconds)
    log(f"{stage}: {seconds / 60:.1f} min")


def add_timing(work_dir, stage, seconds):
    """Locked, because the arms may run as separate processes at once (--pretrain-only, --finetune-ready)."""
    path = work_dir / TIMINGS
    with open(work_dir / (TIMINGS + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        timings = json.loads(path.read_text()) if path.is_file() else {}
        timings[stage] = round(timings.get(stage, 0.0) + seconds, 1)
        atomic.write_json(path, timings)


def build_dataset(plan):
    if (plan.data_dir / "pretrain_tfrecords" / "metadata.json").is_file():
        return
    run(["build_pretraining_dataset.py", "--corpus-dir", plan.shared_data / "corpus" / "enwiki_wikiextractor",
         "--corpus-format", "wikiextractor", "--vocab-file",
         plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt", "--data-dir", plan.data_dir,
         "--max-seq-length", "128", "--num-processes", "2", "--overwrite"], plan.work_dir / "build.log", "dataset")


def pretraining_hparams(plan, arm):
    """The arm's run_pretraining.py --hparams: the study's settings, its step count, warmup 10%."""
    steps = plan.steps(arm)
    return {**plan.arm_hparams(arm), "num_train_steps": steps,
            "num_warmup_steps": max(1, steps // 10), "save_checkpoints_steps": steps // plan.budgets,
            "eval_every_steps": steps // plan.budgets,
            "extra_checkpoint_steps": plan.extra_checkpoint_steps(arm)}


def pretrain(plan, arm):
    folder = plan.data_dir / "models" / arm
    if all((folder / f"ckpt-{s}.index").is_file() for s in plan.checkpoint_steps(arm)):
        return
    run(["run_pretraining.py", "--model-name", arm, "--data-dir", plan.data_dir, "--hparams",
         json.dumps(pretraining_hparams(plan, arm))], plan.work_dir / f"pretrain_{arm}.log", f"pretrain {arm}")


def budget_folder(plan, arm, step):
    """A model folder holding just checkpoint `step` of the arm's run (hard links), for run_finetuning.py."""
    source = plan.data_dir / "models" / arm
    folder = plan.data_dir / "models" / f"{arm}_step{step}"
    if (folder / "checkpoint").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "vocab.txt"):
        shutil.copyfile(source / name, folder / name)
    for path in source.glob(f"ckpt-{step}.*"):
        target = folder / path.name
        if not target.exists():
            os.link(path, target)
    temp = folder / "checkpoint.tmp"
    temp.write_text(f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n')
    temp.replace(folder / "checkpoint")  # last: marks the folder complete
    return folder


def control_folder(plan):
    """A model folder with the study's discriminator at random initialisation (keras seed 0)."""
    folder = plan.data_dir / "models" / CONTROL
    if (folder / "checkpoint").is_file():
        return folder
    import keras

    from checkpoints.model_folder import write_model_folder
    from pretrain.builder import build_pretrainer

    keras.utils.set_random_seed(0)
    config = PretrainingConfig.create({**plan.arm_hparams("electra"), "model_name": CONTROL,
                                       "data_dir": str(plan.data_dir)})
    write_model_folder(folder, config, build_pretrainer(config),
                       plan.shared_data / "vocab" / "bert-base-uncased-vocab.txt", step=0, overwrite=True)
    return folder


def ready_budgets(plan):
    """[(arm, step)] of the budget checkpoints pretraining has saved so far, the last budget first (when time
    runs out, the most-trained checkpoints are the ones measured)."""
    ready = []
    for budget in reversed(range(len(plan.checkpoint_steps("electra")))):
        for arm in ARMS:
            step = plan.checkpoint_steps(arm)[budget]
            if (plan.data_dir / "models" / arm / f"ckpt-{step}.index").is_file():
                ready.append((arm, step))
    return ready


def results_file(folder, task):
    return folder / "results" / f"{task}_results.json"


def finetuned(folder, task):
    path = results_file(folder, task)
    return path.is_file() and json.loads(path.read_text()).get("complete", False)


def finetune(plan, folder, task, log_name):
    if finetuned(folder, task):
        return
    hparams = {"save_finetuned_models": False}
    if plan.finetune_max_steps:
        hparams["max_train_steps"] = plan.finetune_max_steps
    run(["run_finetuning.py", "--model-name", folder.name, "--data-dir", plan.data_dir, "--task", task,
         "--finetuning-data-dir", plan.shared_data / "glue", "--num-trials", plan.seeds,
         "--hparams", json.dumps(hparams)], plan.work_dir / f"finetune_{log_name}.log",
        f"finetune {folder.name} {task}")


def collect(plan):
    """Every finished cell: {arm: [{step, flops, scores: {task: median}, baselines, average}]}."""
    summary = {"plan": {"electra_steps": plan.steps("electra"), "mlm_steps": plan.steps("mlm"),
                        "checkpoint_steps": {arm: plan.checkpoint_steps(arm) for arm in ARMS},
                        "flops_per_step": {arm: plan.flops_per_step(arm) for arm in ARMS},
                        "tasks": plan.tasks, "seeds": plan.seeds, "model": plan.model,
                        "pretraining": plan.pretraining,
                        "finetune_max_steps": plan.finetune_max_steps},
               "arms": {}}
    for arm in ARMS:
        summary["arms"][arm] = [
            {"step": step, "flops": step * plan.flops_per_step(arm),
             **finished_scores(plan, plan.data_dir / "models" / f"{arm}_step{step}")}
            for step in plan.checkpoint_steps(arm)]
    summary["control"] = {"step": 0, "flops": 0, **finished_scores(plan, plan.data_dir / "models" / CONTROL)}
    return summary


def finished_scores(plan, folder):
    """{scores, std, majority_baseline: {task: value}, average and seed_averages (when every task is done)}
    of a folder. seed_averages[k] is the average over tasks of the trials with the k-th seed: their range
    is how far the average moves with the fine-tuning seed, the error bar of the figure."""
    scores, baselines, spread, by_seed = {}, {}, {}, {}
    for task in plan.tasks:
        if finetuned(folder, task):
            result = json.loads(results_file(folder, task).read_text())
            metric = result["primary_metric"]
            scores[task] = result["summary"][metric]["median"]
            spread[task] = result["summary"][metric]["std"]
            baselines[task] = result["majority_baseline"].get(metric)
            by_seed[task] = {trial["seed"]: trial["metrics"][metric] for trial in result["trials"]}
    row = {"scores": scores, "std": spread, "majority_baseline": baselines}
    if len(scores) == len(plan.tasks):
        row["average"] = sum(scores.values()) / len(scores)
        seeds = sorted(set.intersection(*(set(values) for values in by_seed.values())))
        row["seed_averages"] = [sum(by_seed[task][seed] for task in plan.tasks) / len(plan.tasks) for seed in seeds]
    return row


def markdown(summary, tasks):
    headings = [f"{get_task(t).glue_name} ({get_task(t).primary_metric})" for t in tasks]
    lines = ["| objective | step | pretraining FLOPs | " + " | ".join(headings) + " | average |",
             "|---" * (len(tasks) + 4) + "|"]
    baseline_row = None
    labelled = [("ELECTRA (RTD)" if arm == "electra" else "MLM only", row)
                for arm, rows in summary["arms"].items() for row in rows]
    if "control" in summary:
        labelled.append(("no pretraining", summary["control"]))
    for label, row in labelled:
        cells = [f"{row['scores'][t]:.1f} ± {row['std'][t]:.1f}" if t in row["scores"] else "…" for t in tasks]
        average = f"{row['average']:.1f}" if "average" in row else "…"
        lines.append(f"| {label} | {row['step']} | {row['flops']:.2e} | " + " | ".join(cells) + f" | {average} |")
        if len(row["majority_baseline"]) == len(tasks):
            baseline_row = row["majority_baseline"]
    if baseline_row:
        values = [baseline_row[t] or 0.0 for t in tasks]
        lines.append("| majority class | | | " + " | ".join(f"{v:.1f}" for v in values)
                     + f" | {sum(values) / len(values):.1f} |")
    lines += ["", "Cells: median ± standard deviation over the fine-tuning seeds."]
    stages = stage_minutes(summary.get("wall_clock_seconds", {}))
    if stages:
        lines += ["", "| stage | wall-clock (min) |", "|---|---|"]
        lines += [f"| {stage} | {minutes:.1f} |" for stage, minutes in stages.items()]
    return "\n".join(lines) + "\n"


def stage_minutes(seconds):
    """{stage: minutes} with the fine-tuning runs added up per arm ("finetune electra": every cell)."""
    totals = {}
    for stage, value in sorted(seconds.items()):
        key = " ".join(stage.split(" ")[:2]).split("_step")[0] if stage.startswith("finetune") else stage
        totals[key] = totals.get(key, 0.0) + value / 60
    return totals


def figures(plan, summary):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"electra": "ELECTRA (replaced-token detection)", "mlm": "MLM only (BERT objective)"}
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, rows in summary["arms"].items():
        done = [r for r in rows if "average" in r]
        if done:
            averages = [r["average"] for r in done]
            spread = [[a - min(r["seed_averages"]) for a, r in zip(averages, done)],
                      [max(r["seed_averages"]) - a for a, r in zip(averages, done)]]
            ax.errorbar([r["flops"] for r in done], averages, yerr=spread, marker="o", capsize=4,
                        label=labels[arm])
    if "average" in summary.get("control", {}):
        ax.axhline(summary["control"]["average"], color="gray", linestyle="--", label="no pretraining")
    baselines = [r["majority_baseline"] for rows in summary["arms"].values() for r in rows
                 if len(r["majority_baseline"]) == len(plan.tasks)]
    if baselines:
        majority = sum(v or 0.0 for v in baselines[0].values()) / len(plan.tasks)
        ax.axhline(majority, color="black", linestyle=":", label="majority class")
    ax.set_title("points: average of the tasks' medians over seeds; bars: range of the per-seed averages",
                 fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("pretraining FLOPs")
    ax.set_ylabel(f"average dev score ({', '.join(plan.tasks)})")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(plan.work_dir / "dev_score_vs_flops.png", dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    for arm in ARMS:
        curves = training_curves(plan.data_dir / "models" / arm)
        for ax, name in zip(axes.flat, CURVES):
            if curves[name]:
                steps, values = zip(*curves[name])
                ax.plot(steps, values, label=labels[arm])
            ax.set_title(name)
            ax.set_xlabel("step")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plan.work_dir / "pretraining_curves.png", dpi=120)
    plt.close(fig)


def write_summary(plan):
    summary = collect(plan)
    timings = plan.work_dir / TIMINGS
    summary["wall_clock_seconds"] = json.loads(timings.read_text()) if timings.is_file() else {}
    (plan.work_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (plan.work_dir / "summary.md").write_text(markdown(summary, plan.tasks))
    figures(plan, summary)


@exit_on_input_error
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, default=None, help="the study's folder (required but "
                        "for the accelerator's stages --device-size, --device-finetune and --device-collect)")
    parser.add_argument("--shared-data", type=pathlib.Path,
                        default=pathlib.Path(os.environ.get("ELECTRA_SHARED_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--electra-steps", type=int, default=1500, help="the ELECTRA run's steps (batch 64)")
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
                             help="--device-size: the pretraining time of both arms (default 17, two pieces); "
                                  "--device-finetune: this piece's limit (default 8.5); --device-export: the "
                                  "pretraining minutes its printed commands plan for")
    accelerator.add_argument("--out", type=pathlib.Path, default=None, help="--device-collect: where to copy")
    args = parser.parse_args(argv)
    if args.device_size or args.device_finetune or args.device_collect:
        from bench import rtd_vs_mlm_device as device

        if args.device_size:
            device.size_on_device(args.device_size, args.minutes or 2 * device.PIECE_MINUTES)
        elif args.device_finetune:
            device.finetune_on_device(args.device_finetune, args.minutes or device.PIECE_MINUTES)
        else:
            if args.out is None:
                raise InputError("--device-collect: give --out (on the accelerator, $OUT)")
            device.collect_from_device(args.device_collect, args.out)
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
        from bench.rtd_vs_mlm_device import export_for_device

        export_for_device(plan, args.device_export.resolve(), minutes=args.minutes, shown_as=args.device_export)
        return
    if args.pretrain_only:
        pretrain(plan, args.pretrain_only)
        log(f"{args.pretrain_only} pretrained to {plan.steps(args.pretrain_only)} steps")
        return
    if args.device_results:
        from bench.rtd_vs_mlm_device import import_device_finetuning, import_device_run

        for arm in ARMS:
            import_device_run(plan, arm, args.device_results.resolve())
        import_device_finetuning(plan, args.device_results.resolve())
    else:
        for arm in ARMS:
            pretrain(plan, arm)
    for budget in range(len(plan.checkpoint_steps("electra"))):
        for arm in ARMS:
            step = plan.checkpoint_steps(arm)[budget]
            model_folder = plan.data_dir / "models" / f"{arm}_step{step}"
            if all(finetuned(model_folder, task) for task in plan.tasks):
                continue  # fine-tuned already (here, or on the accelerator)
            if args.device_results and not (model_folder / "checkpoint").is_file():
                log(f"{arm} step {step}: no weights came back and no results; its fine-tuning is left to the "
                    "accelerator (--device-finetune)")
                continue
            folder = budget_folder(plan, arm, step)
            for task in plan.tasks:
                finetune(plan, folder, task, arm)
                write_summary(plan)
    for task in plan.tasks:
        finetune(plan, control_folder(plan), task, CONTROL)
        write_summary(plan)
    write_summary(plan)
    log(f"done: {plan.work_dir / 'summary.md'}")


if __name__ == "__main__":
    main()
