"""studies/tf_vs_jax_curves: the TensorFlow run's TensorBoard logs against the JAX run's metrics.jsonl."""
import json

import pytest
import tensorflow as tf

from studies import tf_vs_jax_curves
from pretrain_loop.metrics_file import METRICS_FILE


def write_tf_logs(model_dir, split, records):
    writer = tf.summary.create_file_writer(str(model_dir / "logs" / split))
    with writer.as_default():
        for step, values in records:
            for name, value in values.items():
                tf.summary.scalar(name, value, step=step)
    writer.close()


def write_jax_run(run_dir, train, held_out, config):
    run_dir.mkdir(parents=True)
    lines = [{"split": "train", "step": s, **v} for s, v in train] + \
        [{"split": "eval", "step": s, **v} for s, v in held_out] + [{"split": "run", "config": config}]
    (run_dir / METRICS_FILE).write_text("\n".join(json.dumps(line) for line in lines) + "\n")


@pytest.fixture
def two_runs(tmp_path):
    tf_dir, jax_dir = tmp_path / "tf", tmp_path / "jax"
    # TensorFlow logs a window every 50 steps, JAX every 100: spans of 100 cover the same steps. TensorFlow
    # stopped at 350, half-way through the span that JAX logged to 400.
    write_tf_logs(tf_dir, "train", [(s, {"masked_lm_loss": s / 10, "disc_auc": 0.5}) for s in range(50, 351, 50)])
    write_tf_logs(tf_dir, "eval", [(200, {"masked_lm_loss": 7.0, "disc_auc": 0.6})])
    (tf_dir / "config.json").write_text(json.dumps({"learning_rate": 5e-4}))
    write_jax_run(jax_dir, [(s, {"masked_lm_loss": s / 20, "disc_auc": 0.7}) for s in (100, 200, 300, 400)],
                  [(s, {"masked_lm_loss": 8.0, "disc_auc": 0.65}) for s in (100, 200)], {"learning_rate": 5e-4})
    return tf_dir, jax_dir


def test_spans_average_the_windows_that_end_inside_them():
    means = tf_vs_jax_curves.span_means([(50, 1.0), (100, 3.0), (150, 5.0), (200, 7.0), (210, 9.0)], 100)
    assert means == {100: (2.0, 1.0), 200: (6.0, 1.0), 300: (9.0, 0.0)}


def test_the_comparison_pairs_equal_spans_and_shared_evaluations(two_runs):
    tf_dir, jax_dir = two_runs
    runs = {"TensorFlow": tf_vs_jax_curves.read_tf_run(tf_dir), "JAX": tf_vs_jax_curves.read_jax_run(jax_dir)[0]}
    rows = tf_vs_jax_curves.comparison(runs, 100)
    training = [r for r in rows if r["kind"] == "training"]
    assert [r["step"] for r in training] == [100, 200, 300]  # not 400: TensorFlow logged only half of it
    tf_mean, tf_spread = training[1]["masked_lm_loss"]["TensorFlow"]
    assert tf_mean == pytest.approx(17.5) and tf_spread == pytest.approx(2.5)  # windows 150 and 200
    assert training[1]["masked_lm_loss"]["JAX"] == (10.0, 0.0)
    held_out = [r for r in rows if r["kind"] == "held-out"]
    assert [r["step"] for r in held_out] == [200]  # TensorFlow evaluated only there
    assert held_out[0]["disc_auc"]["TensorFlow"][0] == pytest.approx(0.6)
    assert held_out[0]["disc_auc"]["JAX"][0] == pytest.approx(0.65)
    text = tf_vs_jax_curves.table(rows, 100)
    assert "| training, steps 101–200 | 200 | 17.500 / 10.000 (±2.500) |" in text
    assert "| held-out | 200 | 7.000 / 8.000 |" in text


def test_the_script_writes_the_figure_and_refuses_a_folder_without_logs(two_runs, tmp_path, capsys):
    tf_dir, jax_dir = two_runs
    out = tmp_path / "curves.png"
    tf_vs_jax_curves.main(["--tf-model-dir", str(tf_dir), "--jax-run", str(jax_dir), "--out", str(out),
                           "--every", "100"])
    assert out.stat().st_size > 0
    assert "configs differ" not in capsys.readouterr().out
    with pytest.raises(SystemExit) as stopped:
        tf_vs_jax_curves.main(["--tf-model-dir", str(tmp_path / "nowhere"), "--jax-run", str(jax_dir),
                               "--out", str(out)])
    assert stopped.value.code == 2
    assert "no logs/train" in capsys.readouterr().err
