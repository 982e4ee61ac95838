"""Fine-tuning under JAX (training_jax.finetune) against run_finetuning.py's TensorFlow trainer.

On a tiny dropout-free model and an RTE-format fixture written here: the task arrays survive their round
trip (features, labels, scores); from the same encoder and head weights and the same seed (hence the same
batch order) the JAX step and the TensorFlow step give the same losses over 50 updates and the same dev
score; the CLI runs end to end with TensorFlow unimportable and writes TrialRunner's results file;
bad weights are one line and exit code 2; nothing under training_jax/ (nor the backend-neutral half of
finetune/) imports TensorFlow.
"""
import ast
import json
import pathlib
import shutil
import textwrap

import numpy as np
import pytest

from configs.finetuning_config import FinetuningConfig
from configs.pretraining_config import PretrainingConfig
from common.errors import InputError
from tests.finetune_fixtures import RecordingReporter
from tests.helpers import MICRO_MODEL, start_script_under_jax, write_corpus, write_rte, write_vocab

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# A learning rate at which the tiny encoder learns the fixture's cue within 50 updates (the dev score then
# says something); much higher and the two backends' rounding grows with the loss's jumps.
HPARAMS = {"max_train_steps": 50, "iterations_per_loop": 1, "learning_rate": 1e-3, "layerwise_lr_decay": 0.0,
           "train_batch_size": 8, "eval_batch_size": 16, "head_dropout": 0.0, "save_finetuned_models": False}
# Dropout off: the two backends draw different random masks, so only a dropout-free model can agree. One layer:
# the equalities do not depend on the depth, and each side compiles and trains in half the time.
MODEL = {**MICRO_MODEL, "num_layers": 1, "dropout": 0.0, "attention_dropout": 0.0}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny pretrained model folder (config, vocabulary, checkpoint), its weights as .npz, an RTE fixture,
    its task arrays, and run_finetuning's TensorFlow trainer run on it with every loss recorded."""
    import keras
    import tensorflow as tf

    from data.tokenization import load_tokenizer
    from studies.device_path import task_arrays as arrays
    from finetune.pretrained import read_model_folder
    from finetune.registry import get_task
    from finetune.tf_trainer import TFTrainer
    from finetune.trials import TrialRunner, prepare_tasks
    from pretrain.builder import build_pretrainer
    from storage.model_folder import model_trackable

    root = tmp_path_factory.mktemp("jax_finetune")
    corpus = write_corpus(root / "corpus", max_documents=40)
    vocab = write_vocab(corpus, root / "vocab.txt", num_words=600)
    text = " ".join(p.read_text() for p in sorted(corpus.glob("*.txt")))
    sentences = [" ".join(s.split()[:10]) for s in text.replace("\n", " ").split(". ") if len(s.split()) >= 6]
    write_rte(root / "glue" / "rte", sentences, {"train": 160, "dev": 48}, seed=0)

    folder = root / "models" / "tiny"
    folder.mkdir(parents=True)
    vocab_size = len(vocab.read_text().splitlines())
    config = PretrainingConfig.create({"model_size": "electra_tiny", "model_hparam_overrides": MODEL,
                                       "model_name": "tiny", "vocab_size": vocab_size})
    config.save(folder / "config.json")
    shutil.copyfile(vocab, folder / "vocab.txt")
    keras.utils.set_random_seed(0)  # one encoder every run
    pretrainer = build_pretrainer(config)
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model_trackable(pretrainer)), str(folder),
                               max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=1)
    weights = {v.path: np.asarray(v.numpy()) for v in pretrainer.weights}  # generator/... too: ignored
    np.savez(root / "weights.npz", **weights)
    np.savez(root / "weights16.npz", **{k: v.astype(np.float16) if v.dtype == np.float32 else v
                                        for k, v in weights.items()})

    pretrained = read_model_folder(folder)
    ft_config = FinetuningConfig.create(HPARAMS, pretrained.recipe_size, ["rte"])
    tokenizer = load_tokenizer(vocab_file=vocab)
    task_data = prepare_tasks([get_task("rte")], root / "glue", tokenizer, ft_config, say=lambda _: None)
    arrays.main(["--tasks", "rte", "--finetuning-data-dir", str(root / "glue"), "--model-folder", str(folder),
                 "--out", str(root / "tasks")])  # the export the accelerator gets

    class HeadSavingTrainer(TFTrainer):
        """run_finetuning's trainer; keeps the head's initial weights for the JAX side."""

        def __init__(self, model, *args):
            np.savez(root / "head.npz", **{v.path: np.asarray(v.numpy()) for v in model.heads["rte"].weights})
            super().__init__(model, *args)

        def predict(self, task, features):
            outputs = super().predict(task, features)
            np.save(root / "tf_dev_outputs.npy", outputs)
            return outputs

    losses = []
    runner = TrialRunner(pretrained, ft_config, task_data, root / "tf_out", trainer_class=HeadSavingTrainer,
                         reporter_factory=lambda trial: RecordingReporter(losses), say=lambda _: None)
    trials = runner.run()
    return {"root": root, "task_data": task_data, "config": ft_config, "tf_losses": losses,
            "tf_dev": trials["rte"][0]["metrics"]["accuracy"], "pretrained": pretrained}


def test_task_arrays_round_trip_features_labels_and_scores(setup):
    from studies.device_path.task_arrays import load_task_data

    original, = setup["task_data"]
    loaded, = load_task_data(setup["root"] / "tasks")
    assert loaded.task is original.task and loaded.baseline == original.baseline
    for before, after in [(original.train, loaded.train), *zip(original.evals.values(), loaded.evals.values())]:
        assert after["count"] == before["count"]
        for name, sequences in before["sequences"].items():
            assert all(np.array_equal(a, b) for a, b in zip(sequences, after["sequences"][name]))
            assert after["sequences"][name][0].dtype == np.int32
        for name, values in before["scalars"].items():
            np.testing.assert_array_equal(after["scalars"][name], values)
    dev_before, dev_after = original.evals[""], loaded.evals[""]
    assert [(e.guid, e.label) for e in dev_after["examples"]] == [(e.guid, e.label) for e in dev_before["examples"]]
    outputs = np.random.default_rng(0).standard_normal((dev_before["count"], 2))
    task = original.task
    assert task.evaluate(dev_after, outputs, setup["config"]) == task.evaluate(dev_before, outputs, setup["config"])


def test_unfinished_or_mismatched_exports_are_refused(setup, tmp_path):
    from studies.device_path.task_arrays import load_task_data, save_task_data
    from finetune.registry import get_task
    from finetune.trials import TaskData

    with pytest.raises(InputError, match="tasks.json: missing"):
        load_task_data(tmp_path)
    shutil.copytree(setup["root"] / "tasks", tmp_path / "tasks")
    with pytest.raises(InputError, match="no task 'sst'"):
        load_task_data(tmp_path / "tasks", ["sst"])
    shutil.copyfile(tmp_path / "tasks" / "rte.npz", tmp_path / "rte_first.npz")
    save_task_data(setup["task_data"], tmp_path / "tasks")  # a second export; its index, the first's file
    shutil.copyfile(tmp_path / "rte_first.npz", tmp_path / "tasks" / "rte.npz")
    with pytest.raises(InputError, match="another export's"):
        load_task_data(tmp_path / "tasks")
    squad = TaskData(get_task("squad"), None, {}, {}, {})
    with pytest.raises(InputError, match="not supported on the JAX path yet"):
        save_task_data([squad], tmp_path / "squad")


def test_the_recipe_of_an_exported_task_and_its_checks(setup):
    import dataclasses

    from studies.device_path.task_arrays import task_config, updates_per_trial

    tasks, pretraining = setup["root"] / "tasks", PretrainingConfig.load(setup["root"] / "models/tiny/config.json")
    config = task_config(tasks, "rte", pretraining, {"train_batch_size": 8})
    assert (config.learning_rate, config.num_train_epochs, config.max_seq_length) == (3e-4, 10.0, 128)
    assert updates_per_trial(tasks, pretraining) == {"rte": 160 * 10 // 32}  # the recipe's batch of 32
    with pytest.raises(InputError, match="rte was featurised with max_seq_length 128, --hparams asks for 64"):
        task_config(tasks, "rte", pretraining, {"max_seq_length": 64})
    with pytest.raises(InputError, match="vocabulary of .* entries, the model has 99"):
        task_config(tasks, "rte", dataclasses.replace(pretraining, vocab_size=99))


def test_padding_to_a_multiple_changes_predictions_only_by_rounding(setup):
    """pad_to_multiple adds masked positions: the dev logits move by float rounding, no more."""
    import dataclasses

    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import load_encoder
    from finetune.tf_trainer import TFTrainer

    data, = setup["task_data"]
    config = setup["config"]
    outputs = {}
    for multiple in (0, 32):
        padded = dataclasses.replace(config, pad_to_multiple=multiple)
        encoder = load_encoder(setup["pretrained"])
        model = FinetuningModel(encoder, {"rte": make_head(data.task, encoder.hidden_size, padded)})
        for variable in model.heads["rte"].weights:
            variable.assign(np.full(variable.shape, 0.05, np.float32))
        from finetune.loop import build_optimizer
        trainer = TFTrainer(model, [data.task], build_optimizer(padded, 10, 2), padded)
        outputs[multiple] = trainer.predict(data.task, data.evals[""])
    np.testing.assert_allclose(outputs[32], outputs[0], atol=1e-5)
    from finetune.loop import task_batches
    lengths = {b["input_ids"].shape[1] for b in task_batches(data.task, data.evals[""],
                                                              dataclasses.replace(config, pad_to_multiple=32))}
    assert lengths <= {32, 64, 96, 128}


def test_bad_weights_are_one_clear_error(setup, tmp_path):
    from finetune.pretrained import build_encoder
    from training_jax.arrays import read_weights
    from studies.device_path.finetune import assign_by_path

    encoder = build_encoder(setup["pretrained"].model_config)
    with pytest.raises(InputError, match="no such weights file"):
        read_weights([tmp_path / "missing.npz"])
    generator_only = tmp_path / "generator.npz"
    weights = np.load(setup["root"] / "weights.npz")
    np.savez(generator_only, **{k: weights[k] for k in weights.files if k.startswith("generator/")})
    with pytest.raises(InputError, match="generator.npz: no electra/"):
        assign_by_path(encoder, read_weights([generator_only]), [generator_only])
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, **{k: weights[k][..., :3] if k == "electra/embeddings/word_embeddings" else weights[k]
                       for k in weights.files})
    with pytest.raises(InputError, match=r"wrong.npz: electra/embeddings/word_embeddings has shape .* wants"):
        assign_by_path(encoder, read_weights([wrong]), [wrong])


def test_no_tensorflow_import_in_training_jax_or_the_neutral_finetune_modules():
    sources = sorted((REPO_ROOT / "training_jax").glob("*.py")) + [
        REPO_ROOT / "finetune" / name for name in ("loop.py", "trials.py", "batches.py", "bad_rows.py", "losses.py")]
    sources += [REPO_ROOT / "studies" / "device_path" / name
                for name in ("task_arrays.py", "finetune.py", "members.py")]
    offenders = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n == "tensorflow" or n.startswith("tensorflow.") for n in names):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not offenders, offenders


PARITY_SCRIPT = textwrap.dedent('''
    import json, pathlib, sys
    sys.modules["tensorflow"] = None  # the accelerator machines have none
    import numpy as np
    from configs.finetuning_config import FinetuningConfig
    from configs.pretraining_config import PretrainingConfig
    from studies.device_path.task_arrays import load_task_data
    from finetune.trials import TrialRunner
    from tests.finetune_fixtures import RecordingReporter
    from studies.device_path.finetune import encoder_loader, pretrained_record
    from training_jax.finetune import JaxTrainer

    root = pathlib.Path(ROOT)
    head = dict(np.load(root / "head.npz"))

    class HeadLoadingTrainer(JaxTrainer):
        """The TensorFlow run's initial head, so both sides start from the same weights."""
        def __init__(self, model, *args):
            for variable in model.heads["rte"].weights:
                variable.assign(head[variable.path])
            super().__init__(model, *args)

        def predict(self, task, features):
            outputs = super().predict(task, features)
            np.save(root / "jax_dev_outputs.npy", outputs)
            return outputs

    pretraining = PretrainingConfig.load(root / "models" / "tiny" / "config.json")
    config = FinetuningConfig.create({**HPARAMS, "pad_to_multiple": 32}, "small", ["rte"])
    losses = []
    runner = TrialRunner(pretrained_record(root / "models" / "tiny" / "config.json", pretraining,
                                           [root / "weights.npz"]),
                         config, load_task_data(root / "tasks"), root / "jax_out", trainer_class=HeadLoadingTrainer,
                         load_encoder=encoder_loader(pretraining, [root / "weights.npz"]),
                         reporter_factory=lambda trial: RecordingReporter(losses), say=lambda _: None)
    trials = runner.run()
    print("RESULTS" + json.dumps({"losses": losses, "dev": trials["rte"][0]["metrics"]["accuracy"],
                                  "tensorflow": sys.modules["tensorflow"] is not None}))
''')


def test_jax_step_matches_the_tensorflow_step(setup, jax_side):
    """Same weights, same batches (one seed), no dropout: the same 50 losses and the same dev score."""
    results = jax_side["parity"]
    (tf_losses, tf_rates), (jax_losses, jax_rates) = np.array(setup["tf_losses"]).T, np.array(results["losses"]).T
    assert len(tf_losses) == len(jax_losses) == 50
    np.testing.assert_allclose(jax_rates, tf_rates, rtol=1e-6)  # the schedule, read from each one's state
    difference = np.abs(tf_losses - jax_losses).max()
    print(f"max |loss difference| over 50 updates {difference:.2e}; dev accuracy TF {setup['tf_dev']:.2f}, "
          f"JAX {results['dev']:.2f}; losses {tf_losses[0]:.4f} → {tf_losses[-1]:.4f}")
    assert difference < 1e-3
    assert tf_losses[-10:].mean() < tf_losses[:10].mean()  # it trained
    outputs = {side: np.load(setup["root"] / f"{side}_dev_outputs.npy") for side in ("tf", "jax")}
    print(f"max |dev logit difference| {np.abs(outputs['tf'] - outputs['jax']).max():.2e}")
    np.testing.assert_allclose(outputs["jax"], outputs["tf"], atol=1e-3)
    assert results["dev"] == setup["tf_dev"] > 75  # and it learned the cue
    assert results["tensorflow"] is False


CLI_SCRIPT = textwrap.dedent('''
    import contextlib, io, json, runpy, sys
    sys.modules["tensorflow"] = None  # the accelerator machines have none
    from studies.device_path import finetune

    def run(*args):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                finetune.main(list(args))
                return 0, stderr.getvalue()
            except SystemExit as exit:
                return exit.code, stderr.getvalue()

    common = ["--tasks-dir", ROOT + "/tasks", "--config", ROOT + "/models/tiny/config.json", "--out", ROOT + "/cli"]
    first = run(*common, "--weights", ROOT + "/weights16.npz", "--seeds", "2", "--hparams", HPARAMS)
    again = run(*common, "--weights", ROOT + "/weights16.npz", "--seeds", "2", "--hparams", HPARAMS)
    missing = run(*common, "--weights", ROOT + "/missing.npz")
    control = run("--tasks-dir", ROOT + "/tasks", "--config", ROOT + "/models/tiny/config.json",
                  "--out", ROOT + "/control", "--weights", "none", "--hparams", HPARAMS)
    print("RESULTS" + json.dumps({"first": first, "again": again, "missing": missing, "control": control}))
''')


@pytest.fixture(scope="module")
def jax_side(setup):
    """{"parity": PARITY_SCRIPT's results, "cli": CLI_SCRIPT's}: the two scripts one after the other in one process
    under JAX (one start-up of ~5 s less), the parity first, in a process that has done nothing else yet."""
    hparams = json.dumps({"max_train_steps": 6, "iterations_per_loop": 3, "train_batch_size": 8})  # the recipe
    scripts = [PARITY_SCRIPT.replace("ROOT", repr(str(setup["root"]))).replace("HPARAMS", repr(HPARAMS)),
               CLI_SCRIPT.replace("ROOT", repr(str(setup["root"]))).replace("HPARAMS", repr(hparams))]
    both = "".join(f"exec({script!r}, {{'__name__': '__main__'}})\n" for script in scripts)
    process = start_script_under_jax(both, REPO_ROOT)
    stdout, stderr = process.communicate(timeout=600)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULTS")]
    assert process.returncode == 0 and len(lines) == 2, stderr[-3000:]
    return dict(zip(("parity", "cli"), (json.loads(line[len("RESULTS"):]) for line in lines)))


def test_cli_end_to_end_without_tensorflow(setup, jax_side):
    results = jax_side["cli"]
    assert results["first"][0] == 0 and results["control"][0] == 0
    root = setup["root"]
    written = json.loads((root / "cli" / "rte_results.json").read_text())
    assert written["complete"] and written["trials_done"] == 2 and written["num_train_steps"] == 6
    assert written["primary_metric"] == "accuracy" and [t["seed"] for t in written["trials"]] == [0, 1]
    assert 0 <= written["summary"]["accuracy"]["median"] <= 100
    assert written["config"]["pad_to_multiple"] == 32 and written["config"]["learning_rate"] == 3e-4
    assert written["config"]["num_train_epochs"] == 10 and not written["config"]["save_finetuned_models"]
    assert written["checkpoint"].endswith("weights16.npz")
    assert written["majority_baseline"] == setup["task_data"][0].baseline
    control = json.loads((root / "control" / "rte_results.json").read_text())
    assert control["complete"] and control["checkpoint"].startswith("none (random initialisation")
    # Run again: the complete task is skipped (its results not set aside as a rerun's would be).
    assert results["again"][0] == 0 and sorted(p.name for p in (root / "cli").iterdir()) == [
        ".jax_cache", "rte_results.json"]
    code, stderr = results["missing"]
    assert code == 2 and stderr.count("\n") == 1 and "missing.npz: no such weights file" in stderr


def test_a_task_cut_off_between_trials_resumes_after_its_finished_trials(tmp_path):
    """TrialRunner.run(resume=True), as training_jax.finetune calls it: a results file of the same config
    keeps its trials and only the rest run; another config starts over (the old file set aside)."""
    import types

    from configs.finetuning_config import FinetuningConfig
    from finetune.registry import get_task
    from finetune.trials import TaskData, TrialRunner

    class CountingRunner(TrialRunner):
        def __init__(self, config, stop_at=None):
            data = TaskData(task=get_task("rte"), train={"count": 64}, evals={}, tests={}, baseline={})
            pretrained = types.SimpleNamespace(folder=tmp_path, checkpoint="none")
            super().__init__(pretrained, config, [data], tmp_path, say=lambda _: None, results_dir=tmp_path)
            self.ran, self.stop_at = [], stop_at

        def run_trial(self, trial):
            if trial == self.stop_at:
                raise KeyboardInterrupt  # the machine taken back mid-run
            self.ran.append(trial)
            return {"rte": {"trial": trial + 1, "seed": trial, "metrics": {"accuracy": 50.0 + trial}}}

    config = FinetuningConfig.create({"num_trials": 3}, "small", ["rte"])
    with pytest.raises(KeyboardInterrupt):
        CountingRunner(config, stop_at=2).run(resume=True)
    first = json.loads((tmp_path / "rte_results.json").read_text())
    assert first["trials_done"] == 2 and not first["complete"]
    again = CountingRunner(config)
    trials = again.run(resume=True)
    assert again.ran == [2] and [t["seed"] for t in trials["rte"]] == [0, 1, 2]
    done = json.loads((tmp_path / "rte_results.json").read_text())
    assert done["complete"] and done["summary"]["accuracy"]["median"] == 51.0
    other = CountingRunner(FinetuningConfig.create({"num_trials": 3, "learning_rate": 1e-4}, "small", ["rte"]))
    other.run(resume=True)
    assert other.ran == [0, 1, 2] and len(list(tmp_path.glob("rte_results.json*"))) == 2  # the old one kept
