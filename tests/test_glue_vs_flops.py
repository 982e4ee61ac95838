"""python -m studies.device_path.glue_vs_flops: the GPU runs' GLUE scores against their pretraining FLOPs, from what a
time-boxed run (studies.device_path.run) and the two-call plan brought back; the paper's points counted the same way."""
import json

import pytest

from configs import flops
from configs.pretraining_config import PretrainingConfig
from studies.device_path import glue_vs_flops

SMALL = {"model_size": "electra_small", "train_batch_size": 128, "max_seq_length": 128}


def results(task, metric, median, trials=1):
    return {"task": task, "primary_metric": metric, "trials_done": trials,
            "summary": {metric: {"median": median, "mean": median, "n": trials}}}


def write_product_run(folder):
    """What python -m studies.device_path.run --also-mlm brings back, the files the figure reads."""
    folder.mkdir(parents=True)
    per_step = flops.train_flops_per_step(PretrainingConfig.create(SMALL))
    record = {"config": SMALL, "steps": 300, "total_steps": 1300, "total_flops": 1300 * per_step, "device": "gpu X",
              "mlm": {"steps": 1400, "flops": 1300 * per_step}}
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "results.json").write_text(json.dumps({
        "pretrained": {"cola": results("cola", "mcc", 20.0, 3), "mrpc": results("mrpc", "accuracy", 80.0, 3)},
        "mlm": {"cola": results("cola", "mcc", 10.0)}, "control": {"mrpc": results("mrpc", "accuracy", 68.0)}}))
    return per_step


def test_a_runs_points_are_its_mean_task_score_at_its_total_flops(tmp_path):
    per_step = write_product_run(tmp_path / "run2")
    points = glue_vs_flops.main([str(tmp_path / "run2"), "--png", str(tmp_path / "g.png"),
                                 "--table", str(tmp_path / "g.md")])
    electra, mlm, control = points
    assert (electra.model, electra.steps, electra.glue) == ("ELECTRA", 1300, 50.0)  # (20 + 80) / 2, all runs' steps
    assert electra.flops == 1300 * per_step and mlm.glue == 10.0 and control.glue == 68.0
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    table = (tmp_path / "g.md").read_text()
    assert "| run2 | gpu X | ELECTRA | 1,300 |" in table and "cola mcc 20.0 (3), mrpc accuracy 80.0 (3)" in table
    paper = glue_vs_flops.paper_points()
    assert [score for _, score, _ in paper] == [74.1, 79.9] and paper[1][0] == 1_000_000 * per_step
    assert paper[0][0] == pytest.approx(paper[1][0] * 0.0625)


def test_a_folder_that_is_no_run_is_refused_with_the_fix(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        glue_vs_flops.main([str(tmp_path / "empty"), "--png", str(tmp_path / "g.png")])
    assert exit_info.value.code == 2 and not (tmp_path / "g.png").exists()


def test_the_h200_run_gives_the_figure_its_first_points(shared_data, tmp_path):
    folder = shared_data.parent / "gpu_runs" / "2026-11-27-h200"
    points = {p.model: p for p in glue_vs_flops.main([str(folder), "--png", str(tmp_path / "g.png")])}
    electra = points["ELECTRA"]
    assert electra.steps == 11144 and set(electra.scores) == {"cola", "mrpc"}  # the sized steps, not the planned
    assert electra.flops == 11144 * flops.train_flops_per_step(PretrainingConfig.create(SMALL))
    assert electra.glue == pytest.approx((0.0 + 71.8137) / 2, abs=1e-3)
    assert points["MLM at equal FLOPs"].steps == 12025 and points["no pretraining"].flops == 0
