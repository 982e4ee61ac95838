"""The study's summary: every finished cell (median ± std over seeds per task), the markdown table, the
score-vs-FLOPs figure and the pretraining curves; rewritten after every fine-tuning run."""
import json

from studies.rtd_vs_mlm.plan import ARMS, CONTROL
from studies.rtd_vs_mlm.stages import TIMINGS, finetuned, results_file
from finetune.registry import get_task
from pretrain_loop.curves import CURVES
from training.curves import training_curves

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


