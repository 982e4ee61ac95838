"""run_pretraining.py end to end on a tiny dataset: bad input stops before anything is written, a run
writes its model folder (config, vocabulary, checkpoints, TensorBoard scalars, eval results), a run
killed with SIGKILL resumes from its last complete checkpoint, --init-checkpoint starts from weights."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import run_pretraining
from configs.pretraining_config import PretrainingConfig
from pretrain.builder import build_pretrainer
from tests.conftest import REPO_ROOT
from tests.helpers import MICRO_MODEL, build_tiny_dataset
from storage import model_folder

# 1 layer: what these runs prove (folders, resume, locks, checkpoints) does not depend on the model's depth
FAST = {"model_size": "electra_tiny", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "train_batch_size": 8,
        "eval_batch_size": 8, "num_warmup_steps": 10, "iterations_per_loop": 10}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("electra_data")
    build_tiny_dataset(folder, max_seq_length=32, num_shards=2, max_documents=40)
    return folder


def hparams(**extra):
    return json.dumps({**FAST, **extra})


def cli(data_dir, *args, model="electra_tiny"):
    return ["--model-name", model, "--data-dir", str(data_dir), *args]


@pytest.mark.parametrize("case, fragment", [
    ("no_metadata", "no metadata.json"),
    ("seq_length", "max_seq_length=32 but --hparams says 64"),
    ("vocab", "vocab_size"),
    ("unknown_model", "is not a model size"),
    ("malformed", "malformed JSON"),
    ("unknown_key", "unknown key(s) learning_rat"),
    ("batch", "not divisible"),
    ("gradients_env", "ELECTRA_ELEMENTWISE_GRADIENTS='fast' in the environment: use one of by-hand, autodiff"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(data_dir, tmp_path, capsys, monkeypatch, case, fragment):
    """Each mistake stops with one line on stderr and exit code 2, before a model folder exists."""
    args = {
        "no_metadata": cli(tmp_path, "--hparams", hparams()),
        "seq_length": cli(data_dir, "--hparams", hparams(max_seq_length=64), model="bad_seq"),
        "vocab": cli(data_dir, "--hparams", hparams(vocab_size=30522), model="bad_vocab"),
        "unknown_model": cli(data_dir, model="my_model"),
        "malformed": cli(data_dir, "--hparams", '{"learning_rate": ', model="bad_json"),
        "unknown_key": cli(data_dir, "--hparams", '{"learning_rat": 1}', model="bad_key"),
        "batch": cli(data_dir, "--hparams", hparams(train_batch_size=9, gradient_accumulation_steps=2),
                     model="bad_batch"),
        "gradients_env": cli(data_dir, "--hparams", hparams(), model="bad_env"),
    }[case]
    if case == "gradients_env":
        monkeypatch.setenv("ELECTRA_ELEMENTWISE_GRADIENTS", "fast")
    if case == "no_metadata":
        (tmp_path / "pretrain_tfrecords").mkdir()
    before = sorted(p.name for p in (data_dir / "models").glob("*")) if (data_dir / "models").exists() else []
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    after = sorted(p.name for p in (data_dir / "models").glob("*")) if (data_dir / "models").exists() else []
    assert after == before
    assert not (tmp_path / "models").exists()


def scalar_tags(folder):
    tags = set()
    for path in pathlib.Path(folder).glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    return tags


def run_cli(data_dir, *args, model="electra_tiny"):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", PYTHONPATH=str(REPO_ROOT))
    env.pop("TF_CONFIG", None)
    return subprocess.Popen([sys.executable, "run_pretraining.py", *cli(data_dir, *args, model=model)],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def saved_steps(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return [] if state is None else [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def test_sigkill_mid_training_resumes_from_the_last_saved_step(data_dir, capsys):
    """kill -9 while training: the restart resumes at the last listed checkpoint (complete, restorable)
    with step, weights and optimizer state, and finishes; the model folder holds everything promised.
    A second run started on the folder while the first writes stops at once (exit 2, naming the first);
    the lock the killed run held does not block the restart. Only the killed run needs its own process:
    the refused run and the restart run in this one."""
    model_dir = data_dir / "models" / "killed"
    first = run_cli(data_dir, "--hparams", hparams(num_train_steps=100000, save_checkpoints_steps=20,
                                                   keep_checkpoint_max=3, model_size="electra_tiny"),
                    model="killed")
    try:
        deadline = time.monotonic() + 300  # a shared, loaded machine can take minutes to save twice
        while time.monotonic() < deadline and len(saved_steps(model_dir)) < 2 and first.poll() is None:
            time.sleep(0.2)
        capsys.readouterr()
        with pytest.raises(SystemExit) as refused:  # one writer per folder: the second stops at once
            run_pretraining.main(cli(data_dir, "--hparams", hparams(num_train_steps=100000,
                                                                    model_size="electra_tiny"), model="killed"))
        assert refused.value.code == 2
        refusal = capsys.readouterr().err
        assert f"{model_dir}: another run is pretraining here (pid {first.pid}, `run_pretraining.py" in refusal
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    listed = saved_steps(model_dir)
    assert len(listed) >= 2, first.stdout.read()[-2000:]
    last = max(listed)
    for step in listed:  # every listed checkpoint is complete
        assert (model_dir / f"ckpt-{step}.index").is_file()
    run_pretraining.main(cli(data_dir, "--hparams", hparams(num_train_steps=last + 20, save_checkpoints_steps=20,
                                                            keep_checkpoint_max=3, model_size="electra_tiny",
                                                            do_eval=True, num_eval_steps=3), model="killed"))
    output = capsys.readouterr().out
    assert f"Resuming from {model_dir / f'ckpt-{last}'} at step {last}." in output
    assert f"step {last + 10}/{last + 20}" in output  # it continued from there, not from 0
    assert max(saved_steps(model_dir)) == last + 20
    assert len(saved_steps(model_dir)) <= 3  # keep_checkpoint_max
    saved = json.loads((model_dir / "config.json").read_text())
    assert saved["vocab_size"] == json.loads((data_dir / "pretrain_tfrecords" / "metadata.json").read_text())[
        "vocab"]["size"]
    assert (model_dir / "vocab.txt").read_bytes() == (data_dir / "vocab.txt").read_bytes()
    assert {"learning_rate", "total_loss", "disc_auc", "masked_lm_loss"} <= scalar_tags(model_dir / "logs" / "train")
    assert {"disc_auc", "masked_lm_accuracy"} <= scalar_tags(model_dir / "logs" / "eval")
    results = json.loads((model_dir / "eval_results.json").read_text())
    assert results["step"] == last + 20 and 0.0 <= results["disc_auc"] <= 1.0
    # metrics.jsonl: the killed run's lines after its last checkpoint dropped, logged again by the resumed one
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    train_steps = [r["step"] for r in records if r["split"] == "train"]
    assert train_steps == sorted(set(train_steps)) and train_steps[-2:] == [last + 10, last + 20]
    assert records[-1]["split"] == "run" and records[-1]["num_train_steps"] == last + 20
    assert records[-1]["checkpoint_steps"] == saved_steps(model_dir)


# 8 steps saved at 4 and 8, evaluated: the source of the tests below, and the plain run the extra checkpoint
# steps are compared with (one run serves both).
SOURCE = {**FAST, "num_train_steps": 8, "iterations_per_loop": 4, "save_checkpoints_steps": 4,
          "keep_checkpoint_max": 0, "do_eval": True, "num_eval_steps": 2, "mixed_precision": "float32"}


@pytest.fixture(scope="module")
def source(data_dir):
    """A model folder trained 8 steps (ckpt-4, ckpt-8), which the tests below only read or copy."""
    run_pretraining.main(cli(data_dir, "--hparams", json.dumps(SOURCE), model="source"))
    return data_dir / "models" / "source"


def test_init_checkpoint_starts_from_weights_with_a_fresh_optimizer(data_dir, source, capsys):
    """A new model from another's checkpoint: same weights at step 0, then it trains and saves."""
    capsys.readouterr()
    # learning_rate 0: the derived run must end with exactly the source's weights.
    run_pretraining.main(cli(data_dir, "--hparams", hparams(num_train_steps=10, learning_rate=0.0),
                             "--init-checkpoint", str(source), model="derived"))
    out = capsys.readouterr().out
    assert f"Starting from the weights of {source / 'ckpt-8'} with a fresh optimizer." in out
    derived = data_dir / "models" / "derived"
    assert saved_steps(derived) == [10]
    derived_reader = tf.train.load_checkpoint(str(derived / "ckpt-10"))
    source_reader = tf.train.load_checkpoint(str(source / "ckpt-8"))
    assert int(derived_reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 10
    model_keys = [k for k in source_reader.get_variable_to_shape_map()
                  if k.startswith("model/weights_by_path/") and "seed" not in k]
    assert len(model_keys) > 20
    for key in model_keys:
        assert (derived_reader.get_tensor(key) == source_reader.get_tensor(key)).all(), key


def test_a_weights_only_folder_trains_in_place_with_a_fresh_optimizer(data_dir, source, capsys):
    """An imported model folder holds weights but no optimizer: run_pretraining.py --model-name <it>
    starts from its weights at step 0 instead of failing to resume an optimizer that is not there."""
    imported = data_dir / "models" / "imported"
    config = PretrainingConfig.load(source / "config.json")
    pretrainer = build_pretrainer(config)
    model_folder.restore_weights(pretrainer, str(source / "ckpt-8"))
    model_folder.write_model_folder(imported, config, pretrainer, source / "vocab.txt")  # what an import writes
    reader = tf.train.load_checkpoint(str(source / "ckpt-8"))
    weights = {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
               if k.startswith("model/weights_by_path/") and "seed" not in k}
    assert not model_folder.holds_optimizer_state(str(imported / "ckpt-0"))
    capsys.readouterr()

    run_pretraining.main(cli(data_dir, "--hparams", hparams(num_train_steps=4, learning_rate=0.0,
                                                            save_checkpoints_steps=4), model="imported"))
    out = capsys.readouterr().out
    assert "holds weights only (an imported model): training starts from them with a fresh optimizer" in out
    assert max(saved_steps(imported)) == 4
    trained = tf.train.load_checkpoint(str(imported / "ckpt-4"))
    assert int(trained.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE")) == 4
    assert len(weights) > 20
    for key, value in weights.items():  # learning rate 0: the imported weights went through unchanged
        assert (trained.get_tensor(key) == value).all(), key


def test_resuming_on_a_dataset_with_another_vocabulary_is_refused(data_dir, source, capsys):
    """Same size, different tokens: the model's own vocabulary copy must win, untouched, exit 2."""
    shutil.copytree(source, data_dir / "models" / "vocab_guard")  # a trained folder (ckpt-4, ckpt-8) of its own
    assert saved_steps(data_dir / "models" / "vocab_guard") == [4, 8]
    copy = data_dir / "models" / "vocab_guard" / "vocab.txt"
    tokens = copy.read_text().split("\n")
    tokens[10], tokens[11] = tokens[11], tokens[10]  # as if trained with another vocabulary of this size
    copy.write_text("\n".join(tokens))
    before = copy.read_bytes()
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, "--hparams", hparams(num_train_steps=20, model_size="electra_tiny"),
                                 model="vocab_guard"))
    assert exit_info.value.code == 2
    assert "another vocabulary" in capsys.readouterr().err
    assert copy.read_bytes() == before
    assert saved_steps(data_dir / "models" / "vocab_guard") == [4, 8]


def test_the_config_seed_names_the_initial_weights():
    """Two builds of one config start from the same weights (so two runs differ only where their settings
    do); another seed starts elsewhere."""
    import numpy as np

    from training.loop import build

    def initial_weights(seed):
        config = PretrainingConfig.create({
            "model_size": "electra_tiny", "vocab_size": 50, "max_seq_length": 16, "seed": seed,
            "model_hparam_overrides": FAST["model_hparam_overrides"]})
        pretrainer, _ = build(config, tf.distribute.get_strategy())
        return [np.array(v) for v in pretrainer.trainable_variables]

    first, again, other = initial_weights(0), initial_weights(0), initial_weights(1)
    assert len(first) > 20 and all(np.array_equal(a, b) for a, b in zip(first, again))
    random_kernels = [i for i, w in enumerate(first) if w.ndim == 2]
    assert random_kernels and not any(np.array_equal(first[i], other[i]) for i in random_kernels)


def eval_steps(model_dir):
    steps = set()
    for path in pathlib.Path(model_dir, "logs", "eval").glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            if any(value.tag == "disc_auc" for value in event.summary.value):
                steps.add(event.step)
    return steps


def test_extra_checkpoint_steps_save_and_evaluate_there_without_changing_the_run(data_dir, source, capsys):
    """A study's budget between two regular checkpoints (extra_checkpoint_steps) is saved and evaluated at
    exactly that step, and the run's trajectory is the same as without it (the source run): the final weights
    are equal."""
    capsys.readouterr()
    run_pretraining.main(cli(data_dir, "--hparams", json.dumps({**SOURCE, "extra_checkpoint_steps": [3]}),
                             model="extra"))
    out = capsys.readouterr().out
    assert f"Saved checkpoint {data_dir / 'models' / 'extra' / 'ckpt-3'}" in out
    assert saved_steps(data_dir / "models" / "extra") == [3, 4, 8]
    assert saved_steps(source) == [4, 8]
    assert eval_steps(data_dir / "models" / "extra") == {3, 4, 8}
    assert PretrainingConfig.load(data_dir / "models" / "extra" / "config.json").extra_checkpoint_steps == (3,)
    assert PretrainingConfig.load(source / "config.json").extra_checkpoint_steps == ()
    plain = tf.train.load_checkpoint(str(source / "ckpt-8"))
    extra = tf.train.load_checkpoint(str(data_dir / "models" / "extra" / "ckpt-8"))
    names = [name for name in plain.get_variable_to_shape_map() if name.startswith("model/")]
    assert names
    for name in names:
        assert (plain.get_tensor(name) == extra.get_tensor(name)).all(), name


@pytest.mark.parametrize("precision, expected", [("float32", "1"), ("mixed_bfloat16", None)])
def test_prepare_turns_on_onednn_on_an_avx2_cpu_for_float32(data_dir, monkeypatch, precision, expected):
    """Where TensorFlow leaves oneDNN off (no VNNI/AMX), prepare() turns it on once the config says
    float32, before anything imports TensorFlow; never for mixed_bfloat16 (tests/test_cpu_features.py)."""
    from tests.helpers import ZEN3
    from training import cpu_features

    monkeypatch.setattr(cpu_features, "read_cpu_features", lambda **_: cpu_features.parse_cpuinfo(ZEN3))
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    run_pretraining.prepare(run_pretraining.parse_args([
        "--model-name", "onednn_check", "--data-dir", str(data_dir),
        "--hparams", hparams(mixed_precision=precision)]))
    assert os.environ.get("TF_ENABLE_ONEDNN_OPTS") == expected


@pytest.mark.parametrize("fuse", [True, False])
def test_prepare_asks_for_xla_elementwise_fusion_only_when_the_config_does(data_dir, monkeypatch, fuse):
    """xla_fuse_elementwise sets TensorFlow's XLA flags in prepare(), before TensorFlow would read them (this
    test process has read them already, so the call is recorded, not made: tests/test_xla_fusion.py runs it)."""
    from training import xla_fusion

    calls = []
    monkeypatch.setattr(xla_fusion, "fuse_elementwise_with_xla", lambda: calls.append("fused"))
    run_pretraining.prepare(run_pretraining.parse_args([
        "--model-name", "fusion_check", "--data-dir", str(data_dir),
        "--hparams", hparams(xla_fuse_elementwise=fuse)]))
    assert calls == (["fused"] if fuse else [])
