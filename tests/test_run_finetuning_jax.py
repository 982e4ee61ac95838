"""run_finetuning.py under KERAS_BACKEND=jax with TensorFlow unimportable (as on a GPU machine): the same command
reads a model folder's TensorFlow-format checkpoint and the task files, tokenizes in Python, trains with the JAX
step in blocks of K updates over length buckets (its programs compiled ahead), and writes the results file, the
fine-tuned model folders and TensorBoard logs that TensorFlow then reads; killed with SIGKILL after its first
trial, the same command continues after it. Bad input gets the TensorFlow run's one line and exit code 2. The
real-data tier fine-tunes the shared GLUE MRPC files with BERT's vocabulary."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import JAX_QUICK_XLA_FLAGS, MICRO_MODEL, run_each_under_jax, write_corpus, write_rte, write_vocab

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
LAUNCH = ('import sys, runpy; sys.modules["tensorflow"] = None; sys.argv = ["run_finetuning.py"] + sys.argv[1:]; '
          'runpy.run_path("run_finetuning.py", run_name="__main__")')
SHARED = os.environ.get("ELECTRA_SHARED_DATA")


def write_model_folder(folder, vocab_file):
    """A pretrained model folder as a JAX run writes it (checkpoint_bundle, no TensorFlow): a 1-layer micro
    encoder's random weights as ckpt-1, its config and vocabulary."""
    from configs.pretraining_config import PretrainingConfig
    from finetune.pretrained import build_encoder
    from storage import model_folder

    vocab_size = sum(1 for _ in open(vocab_file, encoding="utf-8"))
    config = PretrainingConfig.create({"model_size": "electra_small", "vocab_size": vocab_size,
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}})
    encoder = build_encoder(config.model_config())
    weights = {variable.path: np.asarray(variable.numpy()) for variable in encoder.weights}
    model_folder.write_weights_checkpoint(folder, 1, weights, config, vocab_file)
    return config


def command_args(data_dir, model, tasks_dir, task, *flags, steps=4, trials=1):
    return ["--data-dir", str(data_dir), "--model-name", model, "--task", task, "--finetuning-data-dir",
            str(tasks_dir), "--num-trials", str(trials),
            "--hparams", json.dumps({"max_train_steps": steps, "train_batch_size": 8}), *flags]


def launch(data_dir, model, tasks_dir, task, log, *flags, steps=4, trials=1):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
               XLA_FLAGS=JAX_QUICK_XLA_FLAGS)
    with open(log, "w") as output:
        return subprocess.Popen(
            [sys.executable, "-c", LAUNCH, *command_args(data_dir, model, tasks_dir, task, *flags, steps=steps,
                                                         trials=trials)],
            cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)


# Several commands in one process (TensorFlow unimportable, as LAUNCH): each runs run_finetuning.py as __main__ with
# its own argv, its stdout and stderr (the file descriptors, so everything written) in its own log, and its exit
# status recorded; the last command's SystemExit ends the process, so that its status is the process's own.


def finished(process, log):
    process.wait(timeout=600)
    return process.returncode, pathlib.Path(log).read_text()


def trials_done(results_file):
    try:
        return json.loads(results_file.read_text()).get("trials_done", 0)
    except (OSError, ValueError):  # not there yet, or being replaced
        return 0


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("finetune_jax")
    corpus = write_corpus(root / "corpus")
    write_vocab(corpus, root / "vocab.txt")
    write_model_folder(root / "data" / "models" / "micro", root / "vocab.txt")
    text = " ".join(path.read_text() for path in sorted(corpus.glob("*.txt"))).replace("\n", " ")
    sentences = [" ".join(s.split()[:12]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(root / "glue" / "rte", sentences, {"train": 48, "dev": 8}, seed=0)
    return root


def test_the_command_finetunes_without_tensorflow_and_continues_after_kill_9(folders):
    root = folders
    model_dir = root / "data" / "models" / "micro"
    results_file = model_dir / "results" / "rte_results.json"
    speed = ["--length-buckets", "--bucket-lengths", "32", "--steps-per-dispatch", "2"]
    first = launch(root / "data", "micro", root / "glue", "rte", root / "killed.log", *speed, steps=400, trials=2)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and first.poll() is None and trials_done(results_file) < 1:
            time.sleep(0.05)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed = (root / "killed.log").read_text()
    assert trials_done(results_file) == 1, killed[-3000:]  # killed during the second trial's 400 updates
    first_trial = json.loads(results_file.read_text())["trials"][0]

    code, output = finished(launch(root / "data", "micro", root / "glue", "rte", root / "resumed.log", *speed,
                                   steps=400, trials=2), root / "resumed.log")
    assert code == 0, output[-3000:]
    assert "Under JAX: float32; length buckets 32; 2 update(s) per dispatch" in output
    assert "resuming after 1 finished trial(s)" in output and "rte trial 1:" not in output
    results = json.loads(results_file.read_text())
    assert results["complete"] and results["trials_done"] == 2 and results["trials"][0] == first_trial
    assert results["jax_settings"]["length_buckets"] == [32, 128] and results["checkpoint"].endswith("ckpt-1")

    # TensorFlow (this process) reads what the JAX run wrote: the fine-tuned model and its TensorBoard logs
    import tensorflow as tf
    from finetune.saved import load_finetuned_model

    model, info = load_finetuned_model(model_dir / "finetuning_models" / "rte_model_2")
    assert info.task == "rte" and len(model.weights) > 10
    logs = model_dir / "finetuning_logs" / "rte_trial_2"
    tags = {value.tag for path in (logs / "train").iterdir() for event in tf.compat.v1.train.summary_iterator(str(path))
            for value in event.summary.value}
    assert {"loss", "learning_rate"} <= tags


def test_each_task_on_its_own_in_one_command(folders, tmp_path):
    """--each-task: RTE and WNLI (the same layout, labels 1/0) each with its own encoder, recipe and results file,
    in one process, where the multitask run would have one encoder for both."""
    root = folders
    wnli = tmp_path / "glue" / "wnli"
    wnli.mkdir(parents=True)
    for split in ("train", "dev"):
        text = (root / "glue" / "rte" / f"{split}.tsv").read_text()
        (wnli / f"{split}.tsv").write_text(text.replace("\tnot_entailment\n", "\t0\n").replace("\tentailment\n", "\t1\n"))
    (tmp_path / "glue" / "rte").symlink_to(root / "glue" / "rte")
    code, output = finished(launch(root / "data", "micro", tmp_path / "glue", "rte,wnli", tmp_path / "each.log",
                                   "--each-task", "--length-buckets", "--steps-per-dispatch", "2"), tmp_path / "each.log")
    assert code == 0, output[-3000:]
    results = root / "data" / "models" / "micro" / "results"
    for task in ("rte", "wnli"):
        recorded = json.loads((results / f"{task}_results.json").read_text())
        assert recorded["complete"] and recorded["tasks_trained_together"] == [task], recorded["tasks_trained_together"]
    assert output.count("Fine-tuning micro") == 2  # two runs of trials, each naming its one task


def test_bad_input_gets_one_line_and_exit_code_2(folders, tmp_path):
    import shutil

    root = folders
    models = root / "data" / "models"
    # a config that does not match the checkpoint (wider than the weights), and a checkpoint cut short
    shutil.copytree(models / "micro", models / "mismatch", ignore=shutil.ignore_patterns("results", "finetuning_*"))
    config = json.loads((models / "mismatch" / "config.json").read_text())
    config["model_hparam_overrides"]["hidden_size"] = 48
    (models / "mismatch" / "config.json").write_text(json.dumps(config))
    shutil.copytree(models / "micro", models / "damaged", ignore=shutil.ignore_patterns("results", "finetuning_*"))
    data_file = next((models / "damaged").glob("ckpt-1.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:1000])
    cases = {"missing task folder": ("micro", ["--task", "mrpc"], "mrpc"),
             "a flag of the studies' arrays command only": ("micro", ["--task", "rte", "--vmap-models"],
                                                          "unrecognized arguments"),
             "config against checkpoint": ("mismatch", ["--task", "rte"], "do not match this model"),
             "damaged checkpoint": ("damaged", ["--task", "rte"], "ckpt-1.data-00000-of-00001: damaged"),
             "no such model": ("none", ["--task", "rte"], "no such model folder"),
             "TensorFlow's skip_padding": ("micro", ["--task", "rte", "--hparams", '{"skip_padding": true}'],
                                           "skip_padding: TensorFlow's option")}
    # the six commands in one process (each a process of its own cost ~6 s of start-up), each with its own log
    # and exit status; the last one's status is the process's
    commands = [(str(tmp_path / f"bad{number}.log"),
                 command_args(root / "data", model, root / "glue", flags[flags.index("--task") + 1], *flags[2:]))
                for number, (model, flags, _) in enumerate(cases.values())]
    codes = run_each_under_jax("run_finetuning.py", commands, REPO_ROOT)
    for (label, (_, _, expected)), (log, _), code in zip(cases.items(), commands, codes):
        output = pathlib.Path(log).read_text()
        last = output.strip().splitlines()[-1]
        print(f"{label}: {last}")
        assert code == 2 and expected in last and "Traceback" not in output, (label, output[-2000:])


@pytest.mark.skipif(not SHARED, reason="ELECTRA_SHARED_DATA is unset (the real-data tier)")
def test_mrpc_of_the_shared_glue_files_finetunes_under_jax(tmp_path):
    glue = pathlib.Path(SHARED) / "glue"
    vocab = pathlib.Path(SHARED) / "vocab" / "bert-base-uncased-vocab.txt"
    write_model_folder(tmp_path / "data" / "models" / "bert_vocab", vocab)
    code, output = finished(launch(tmp_path / "data", "bert_vocab", glue, "mrpc", tmp_path / "mrpc.log", steps=2),
                            tmp_path / "mrpc.log")
    assert code == 0, output[-3000:]
    results = json.loads((tmp_path / "data" / "models" / "bert_vocab" / "results" / "mrpc_results.json").read_text())
    assert results["complete"] and {"accuracy", "f1"} <= set(results["trials"][0]["metrics"])
    assert "mrpc: featurized (train 7336" in output  # both orders of each of the 3,668 pairs, as the original
