"""run_finetuning.py under JAX on every local device: 8 virtual CPU devices fine-tune what 1 device fine-tunes at the
same global batch (training_jax.finetune's JaxTrainer over data_parallel's mesh): the same logged training losses and
the same dev predictions within float32 rounding, with single updates on two tasks in mixed batches (RTE and a SQuAD
task: both head kinds) and with blocks of K updates over length buckets (their programs compiled ahead), dropout on.
The command records the devices in its results file, and a batch that does not split over --devices is one line and
exit code 2. Everything runs in one child process (XLA_FLAGS=--xla_force_host_platform_device_count=8, TensorFlow
unimportable, as on a GPU machine)."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.helpers import JAX_QUICK_XLA_FLAGS, LEAN_KERAS

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
HPARAMS = {"max_train_steps": 6, "train_batch_size": 8, "eval_batch_size": 12, "iterations_per_loop": 1}
WAYS = {"single": ["--no-length-buckets", "--steps-per-dispatch", "1"],
        "blocks": ["--length-buckets", "--bucket-lengths", "32", "--steps-per-dispatch", "2", "--compile-ahead"]}

SCRIPT = LEAN_KERAS + textwrap.dedent('''
    import contextlib, io, json, pathlib, sys
    sys.modules["tensorflow"] = None
    import jax
    import keras
    import numpy as np
    import run_finetuning
    from finetune.trials import prepare_tasks
    from tests.helpers import write_corpus, write_micro_model_folder, write_rte, write_vocab
    from training_jax.finetune import product_runner

    root, hparams, ways = pathlib.Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    corpus = write_corpus(root / "corpus")
    keras.utils.set_random_seed(0)  # the same pretrained weights every time: the figures printed repeat
    write_micro_model_folder(root / "data" / "models" / "micro", write_vocab(corpus, root / "vocab.txt"))
    text = " ".join(path.read_text() for path in sorted(corpus.glob("*.txt"))).replace("\\n", " ")
    sentences = [" ".join(s.split()[:12]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(root / "glue" / "rte", sentences, {"train": 40, "dev": 12}, seed=0)

    def write_squad(folder, questions):
        """SQuAD 1.1 files of `questions` per split: each asks for the last three words of a sentence of its context."""
        folder.mkdir(parents=True)
        for split, count in questions.items():
            paragraphs = []
            for n in range(count):
                chosen = sentences[3 * n:3 * n + 3]
                context, asked = ". ".join(chosen) + ".", chosen[n % 3].split()
                answer = " ".join(asked[-3:])
                paragraphs.append({"context": context, "qas": [{"id": f"{split}{n}", "question": " ".join(asked[:4]),
                                   "answers": [{"text": answer, "answer_start": context.index(answer)}]}]})
            data = {"version": "1.1", "data": [{"title": "micro", "paragraphs": paragraphs}]}
            (folder / f"{split}.json").write_text(json.dumps(data))

    write_squad(root / "glue" / "squadv1", {"train": 16, "dev": 6})

    def command_for(task):
        return ["--data-dir", str(root / "data"), "--model-name", "micro", "--task", task, "--finetuning-data-dir",
                str(root / "glue"), "--hparams", hparams]

    command = command_for("rte")
    results = {"local_devices": len(jax.local_devices())}

    class Recorder:  # a trial's reporter: the training losses and learning rates as logged
        train_writer, eval_writer = "train", "eval"

        def __init__(self):
            self.logged = []

        def scalars(self, writer, step, values):
            if writer == "train":
                self.logged.append([step, values["loss"], values["learning_rate"]])

        def close(self):
            pass

    def fine_tune(devices, flags, task="rte", count_all_reduces=False):
        """One trial as run_finetuning.py trains it: its logged losses, dev predictions (each task's, every output
        flattened), where its weights live."""
        args = run_finetuning.parse_args(command_for(task) + ["--devices", str(devices), *flags])
        pretrained, ((tasks, config),), data_root = run_finetuning.prepare(args)
        task_data = prepare_tasks(tasks, data_root, pretrained.tokenizer(), config, say=lambda *line: None)
        recorder = Recorder()
        with contextlib.redirect_stdout(io.StringIO()):
            runner = product_runner(args, pretrained, config, task_data, reporter_factory=lambda trial: recorder)
            started = runner.start_trial(0)
            started.trainer.train(*runner.train_arguments(started))
            predictions = [np.concatenate([np.ravel(leaf) for leaf in jax.tree.leaves(
                started.trainer.predict(task, data.evals[""]))]) for task, data in zip(tasks, task_data)]
        weight = started.model.trainable_variables[0].value
        return {"losses": recorder.logged, "predictions": np.concatenate(predictions).tolist(),
                "weight_devices": len(weight.sharding.device_set), "jax_settings": runner.jax_settings(),
                "all_reduces": all_reduces(started.trainer, tasks[0], task_data[0].train, config)
                if count_all_reduces else None}

    def all_reduces(trainer, task, features, config):
        """The all-reduces in the compiled single update (over several devices: the gradients' and loss's sums)."""
        from finetune.batches import grow_rows
        from finetune.loop import model_inputs, task_batches

        batches = task_batches(task, features, config, np.random.default_rng(0), training=True)
        batch = grow_rows(model_inputs(next(batches)), config.train_batch_size)
        inputs = trainer.on_devices(batch, rows_axis=0)
        compiled = trainer._train_fn(task).lower(trainer.state, inputs, trainer._schedule_steps).compile()
        return compiled.as_text().count("all-reduce(")

    # Single updates on RTE and a SQuAD task in mixed batches (the multitask step, both head kinds), and RTE alone in
    # blocks over buckets; the command below runs RTE alone in single updates over every device
    compared = {"multitask": (ways["single"], "rte,squadv1"), "blocks": (ways["blocks"], "rte")}
    for way, (flags, task) in compared.items():
        for devices in (1, 8):  # the update's all-reduces counted once (a compile of its own)
            results[f"{way}{devices}"] = fine_tune(devices, flags, task, count_all_reduces=way == "blocks")

    def command_line(*flags):  # run_finetuning.py as typed: its exit code, output and error output
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run_finetuning.main(command + list(flags))
                code = 0
            except SystemExit as stop:
                code = stop.code
        return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

    results["command"] = command_line(*ways["single"])  # every local device: the default
    saved = json.loads((root / "data" / "models" / "micro" / "results" / "rte_results.json").read_text())
    results["recorded"] = saved["jax_settings"]
    results["odd"] = command_line("--devices", "3")
    print("RESULTS" + json.dumps(results))
''')


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune_devices")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
               XLA_FLAGS=f"{JAX_QUICK_XLA_FLAGS} --xla_force_host_platform_device_count=8")
    completed = subprocess.run([sys.executable, "-c", SCRIPT, str(root), json.dumps(HPARAMS), json.dumps(WAYS)],
                               cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS")]
    assert completed.returncode == 0 and lines, completed.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS"):])


@pytest.mark.parametrize("way", ["multitask", "blocks"])
def test_eight_devices_fine_tune_what_one_device_fine_tunes(runs, way):
    one, eight = runs[f"{way}1"], runs[f"{way}8"]
    assert runs["local_devices"] == 8
    assert one["weight_devices"] == 1 and eight["weight_devices"] == 8  # the 8-device run did run over the mesh
    assert one["jax_settings"]["devices"] == 1 and eight["jax_settings"]["devices"] == 8
    if way == "blocks":  # the batch's rows split, the gradients summed
        assert one["all_reduces"] == 0 and eight["all_reduces"] >= 1
    losses_one, losses_eight = np.array(one["losses"]), np.array(eight["losses"])
    assert losses_one.shape == losses_eight.shape and len(losses_one) >= 3  # every step or every block logged
    np.testing.assert_array_equal(losses_eight[:, 0], losses_one[:, 0])  # the same steps
    loss_gap = np.abs(losses_eight[:, 1] - losses_one[:, 1]).max()
    predictions_one, predictions_eight = np.array(one["predictions"]), np.array(eight["predictions"])
    assert predictions_one.shape == predictions_eight.shape
    assert predictions_one.size > 24 if way == "multitask" else predictions_one.size == 24  # RTE's 12 x 2, SQuAD's
    prediction_gap = np.abs(predictions_eight - predictions_one).max()
    print(f"{way}: 8 devices vs 1: max |loss difference| {loss_gap:.1e} (losses {losses_one[:, 1].min():.2f} to "
          f"{losses_one[:, 1].max():.2f}), max |dev logit difference| {prediction_gap:.1e}")
    np.testing.assert_allclose(losses_eight[:, 1], losses_one[:, 1], rtol=1e-5, atol=1e-6)  # the global batch's
    np.testing.assert_allclose(losses_eight[:, 2], losses_one[:, 2], rtol=1e-6)
    np.testing.assert_allclose(predictions_eight, predictions_one, rtol=1e-4, atol=1e-5)
    assert np.ptp(losses_one[:, 1]) > 1e-3 and np.ptp(predictions_one) > 1e-3  # training moved: it can fail


def test_the_command_uses_every_device_logs_and_records_them(runs):
    command = runs["command"]
    assert command["code"] in (0, None), command["err"][-2000:]
    assert "Under JAX: device 8 x cpu" in command["out"] and "data parallel" in command["out"]
    assert runs["recorded"]["devices"] == 8 and "data parallel" in runs["recorded"]["device"]
    assert runs["recorded"]["steps_per_dispatch"] == 1 and runs["recorded"]["length_buckets"] is None


def test_a_batch_that_does_not_split_over_the_devices_is_one_line_and_exit_2(runs):
    odd = runs["odd"]
    assert odd["code"] == 2
    lines = odd["err"].strip().splitlines()
    assert len(lines) == 1 and "train_batch_size 8 does not split evenly over 3 devices" in lines[0], odd["err"]


def test_under_tensorflow_devices_is_refused_with_one_line(monkeypatch, capsys, tmp_path):
    """As the other flags of fine-tuning under JAX: refused before anything is read or imported."""
    import run_finetuning

    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    with pytest.raises(SystemExit) as stop:
        run_finetuning.main(["--data-dir", str(tmp_path), "--model-name", "none", "--task", "rte", "--devices", "2"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1
    assert lines[0] == "error: --devices: a flag of fine-tuning under JAX; run with KERAS_BACKEND=jax or leave it out"
