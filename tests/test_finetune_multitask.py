"""Several tasks fine-tuned together, as the original (run_finetuning.py FinetuningModel,
finetune/preprocessing.py): batches that mix the tasks' examples, each row's loss from its own task's
head, the step count from all tasks' examples together; the per_task option keeps the earlier batching
(every batch one task's) unchanged; a two-task run end to end writes a results file per task; and
malformed rows stop the run by default or, with --skip-bad-rows, are skipped and reported per file (GLUE
TSV rows, MRQA lines, CoNLL sentences)."""
import json
import pathlib
import shutil

import numpy as np
import pytest

from common.errors import InputError
from configs.finetuning_config import FinetuningConfig
from finetune import batches as batches_lib
from finetune.bad_rows import BadRows
from finetune.loop import BaseTrainer, MixedTasks, count_steps, task_batches
from finetune.registry import get_task
from tests.finetune_fixtures import (COUNTS, TASKS, config_for, mixed_losses, step_config, synthetic_features,
                                     tiny_model)
from tests.helpers import MICRO_MODEL, run_script_under_jax, write_corpus, write_vocab

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


class RecordingTrainer(BaseTrainer):
    """BaseTrainer with a step that only records what it was given."""

    def __init__(self, tasks, config):
        self.config, self.tasks, self.seen = config, {t.name: t for t in tasks}, []

    def step(self, task, batch):
        self.seen.append((task, batch))
        return 0.0

    def current_learning_rate(self):
        return 0.0


# ------------------------------------------------------------------------------------ mixed batches
def test_mixed_batches_hold_several_tasks_and_every_example_once_per_epoch():
    features = synthetic_features()
    config = config_for(length_bucketing=True)  # each batch padded to its longest row; never sorted
    assert config.multitask_batches == "mixed"  # the original's, by default
    trainer = RecordingTrainer(TASKS, config)
    rng = np.random.default_rng(3)
    for epoch in range(2):
        stream = list(trainer.epoch_batches(features, rng))
        assert len(stream) == -(-sum(COUNTS.values()) // 8)  # ceil(71 / 8): the last batch is smaller
        assert all(isinstance(task, MixedTasks) and [t.name for t in task.tasks] == list(COUNTS)
                   for task, _ in stream)
        seen = sorted((int(t), int(i)) for _, b in stream for t, i in zip(b["task_id"], b["index"]))
        assert seen == [(t, i) for t, count in enumerate(COUNTS.values()) for i in range(count)]
        holding = [len(set(b["task_id"].tolist())) for _, b in stream]
        assert sum(n >= 2 for n in holding) >= len(stream) - 1 and max(holding) == 3
        for _, batch in stream:
            lengths = [len(features[list(COUNTS)[t]]["sequences"]["input_ids"][i])
                       for t, i in zip(batch["task_id"], batch["index"])]
            assert batch["input_ids"].shape[1] == max(lengths)  # padded to its longest row
            np.testing.assert_array_equal(batch["input_mask"].sum(1), lengths)
            for row, (t, i) in enumerate(zip(batch["task_id"], batch["index"])):
                name = list(COUNTS)[t]
                ids = features[name]["sequences"]["input_ids"][i]
                np.testing.assert_array_equal(batch["input_ids"][row, :len(ids)], ids)
                assert not batch["input_ids"][row, len(ids):].any()
                # Each task's own inputs: its values on its rows, zeros on the others'.
                for other in ("rte", "sts"):
                    expected = features[other]["scalars"]["labels"][i] if other == name else 0
                    assert batch[f"{other}/labels"][row] == expected
                tags = batch["chunk/tag_ids"][row]
                if name == "chunk":
                    np.testing.assert_array_equal(tags[:len(ids)], features["chunk"]["sequences"]["tag_ids"][i])
                else:
                    assert not tags.any() and not batch["chunk/tag_mask"][row].any()
            assert batch["rte/labels"].dtype == np.int32 and batch["sts/labels"].dtype == np.float32
    fixed = RecordingTrainer(TASKS, config_for())  # the default: the original's fixed batches
    assert {b["input_ids"].shape[1] for _, b in fixed.epoch_batches(features, rng)} == {128}


def test_mixed_loss_takes_each_rows_loss_from_its_own_tasks_head():
    """By hand on 4 rows (rte, sts, chunk, rte): the original's sum(stack(losses) * one_hot(task_id))."""
    from finetune.losses import mixed_loss

    rng = np.random.default_rng(0)
    task_id = np.array([0, 1, 2, 0], np.int32)
    rte_logits = rng.standard_normal((4, 2)).astype(np.float32)
    sts_out = rng.uniform(0, 1, (4, 1)).astype(np.float32)
    chunk_logits = rng.standard_normal((4, 5, 45)).astype(np.float32)
    batch = {"task_id": task_id, "input_ids": np.ones((4, 5), np.int32),
             "rte/labels": np.array([1, 0, 0, 0], np.int32), "sts/labels": np.array([0, 0.6, 0, 0], np.float32),
             "chunk/tag_ids": np.array([[0] * 5, [0] * 5, [0, 3, 0, 7, 0], [0] * 5], np.int32),
             "chunk/tag_mask": np.array([[0] * 5, [0] * 5, [0, 1, 0, 1, 0], [0] * 5], np.int32)}
    batch["rte/labels"][3] = 1

    def log_softmax(x):
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    expected = [-log_softmax(rte_logits[0])[1], (sts_out[1, 0] - 0.6) ** 2,
                -log_softmax(chunk_logits[2, 1])[3] - log_softmax(chunk_logits[2, 3])[7],
                -log_softmax(rte_logits[3])[1]]
    outputs = {"rte": rte_logits, "sts": sts_out, "chunk": chunk_logits}
    assert float(mixed_loss(TASKS, outputs, batch)) == pytest.approx(sum(expected), rel=1e-5)
    assert float(mixed_loss(TASKS, outputs, batch, reduction="mean")) == pytest.approx(np.mean(expected), rel=1e-5)


def test_a_mixed_step_is_the_sum_of_each_tasks_loss_on_its_rows_and_trains_every_head():
    """Through the model (dropout off): the mixed batch's loss equals the per-task losses of its rows
    summed, each computed alone; one TensorFlow update moves every head and the encoder."""
    from finetune.losses import task_loss
    from finetune.tf_trainer import TFTrainer
    from finetune.loop import build_optimizer

    config = config_for(head_dropout=0.0, max_seq_length=64, learning_rate=1e-2, layerwise_lr_decay=0.0,
                        warmup_proportion=0.0)
    model = tiny_model(TASKS, config)
    trainer = TFTrainer(model, TASKS, build_optimizer(config, 10, 1), config)
    features = synthetic_features(1)
    mixed, batch = next((mixed, batch) for mixed, batch in trainer.epoch_batches(features, np.random.default_rng(0))
                        if len(set(batch["task_id"].tolist())) == 3)
    inputs = {key: value for key, value in batch.items() if key != "index"}
    together = float(trainer.batch_loss(mixed, inputs))
    alone = 0.0
    for number, task in enumerate(TASKS):
        rows = batch["task_id"] == number
        view = {key: value[rows] for key, value in batches_lib.task_view(inputs, task.name).items()}
        view.pop("task_id")
        alone += float(task_loss(task, model(view, task_name=task.name, training=True), view))
    assert together == pytest.approx(alone, rel=1e-4)
    before = {v.path: np.array(v.numpy()) for v in model.trainable_variables}
    trainer.step(mixed, batch)
    moved = {v.path for v in model.trainable_variables if not np.array_equal(v.numpy(), before[v.path])}
    for name in COUNTS:
        assert any(path.startswith(f"task_specific/{name}/") for path in moved), name
    assert any(path.startswith("electra/") for path in moved)


JAX_STEPS = """
import json
import numpy as np
from finetune.loop import build_optimizer
from tests.finetune_fixtures import TASKS, mixed_losses, tiny_model, step_config
from training_jax.finetune import JaxTrainer

config = step_config()
model = tiny_model(TASKS, config)
with np.load(sys.argv[1]) as weights:
    for variable in model.weights:
        variable.assign(weights[variable.path])
trainer = JaxTrainer(model, TASKS, build_optimizer(config, 10, 1), config)
print("RESULTS" + json.dumps(mixed_losses(trainer)))
"""


def test_the_jax_trainer_takes_the_same_mixed_steps(tmp_path):
    """JaxTrainer (training_jax.finetune) shares BaseTrainer's mixed batches and loss: from the same
    weights its first mixed updates give TensorFlow's losses (its CLI fine-tunes one task per run, where
    both modes are the same; a caller of TrialRunner with several tasks gets mixed batches there too)."""
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer

    config = step_config()
    model = tiny_model(TASKS, config)
    np.savez(tmp_path / "weights.npz", **{v.path: np.asarray(v.numpy()) for v in model.weights})
    tf_losses = mixed_losses(TFTrainer(model, TASKS, build_optimizer(config, 10, 1), config))
    script = JAX_STEPS.replace("sys.argv[1]", repr(str(tmp_path / "weights.npz")))
    jax_losses = run_script_under_jax(script, REPO_ROOT)
    assert len(tf_losses) == 4 and len(set(tf_losses)) == 4
    np.testing.assert_allclose(jax_losses, tf_losses, rtol=2e-4)


# ------------------------------------------------------------------------------------ per_task
def previous_epoch(tasks, train_features, config, rng):
    """The batching of BaseTrainer.train before mixed batches (commit 858ac49), verbatim but for the
    names: every batch one task's, the tasks' batches shuffled together."""
    batches = {name: task_batches(tasks[name], features, config, rng, training=True)
               for name, features in train_features.items()}
    counts = {name: -(-features["count"] // config.train_batch_size) for name, features in train_features.items()}
    order = [name for name, count in counts.items() for _ in range(count)]
    for name in (order[i] for i in rng.permutation(len(order))):
        yield name, next(batches[name])


def test_per_task_batches_and_a_single_task_are_as_before():
    features = synthetic_features()
    by_name = {t.name: t for t in TASKS}

    def previous(config, features, steps):
        rng, stream = np.random.default_rng(5), []
        while len(stream) < steps:
            stream += list(previous_epoch(by_name, features, config, rng))
        return stream[:steps]

    for config, chosen in ((config_for(multitask_batches="per_task"), features),
                           (config_for(), {"sts": features["sts"]})):  # one task: mixed is per task
        trainer = RecordingTrainer(TASKS, config)
        trainer.train(chosen, 25, seed=5)  # more than an epoch
        expected = previous(config, chosen, 25)
        assert len(trainer.seen) == 25
        for (task, batch), (name, old) in zip(trainer.seen, expected):
            assert task.name == name and not isinstance(task, MixedTasks) and batch.keys() == old.keys()
            for key in old:
                np.testing.assert_array_equal(batch[key], old[key])
    with pytest.raises(InputError, match="multitask_batches 'interleaved'"):
        config_for(multitask_batches="interleaved")


def test_step_count_is_the_originals_from_all_tasks_together():
    """finetune/preprocessing.py: all tasks' features padded to whole batches, int(batches × epochs)."""
    config = FinetuningConfig.create({"train_batch_size": 32, "num_train_epochs": 10.0}, "small", ["rte"])
    assert count_steps([2490], config) == 78 * 10  # int(2490 × 10 / 32) would be 778
    assert count_steps([37, 23, 11], config_for(num_train_epochs=2.5)) == int(9 * 2.5)
    assert count_steps([37, 23], config_for(max_train_steps=5)) == 5


# ------------------------------------------------------------------------------------ end to end
def write_glue(folder, task, sentences, count, seed, bad_lines=()):
    """RTE's or MRPC's layout with `count` rows (the label follows a cue a model can learn); rows whose
    number is in `bad_lines` lose a column."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", count), ("dev", count // 2)):
        if task == "rte":
            lines = ["index\tsentence1\tsentence2\tlabel"]
            labels = ("entailment", "not_entailment")
        else:
            lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
            labels = ("0", "1")
        for number in range(n):
            a, b = (sentences[k] for k in rng.choice(len(sentences), 2, replace=False))
            label = labels[number % 2]
            cells = ([str(number), a, b, label] if task == "rte" else [label, str(number), str(number + 1), a, b])
            if split == "train" and len(lines) + 1 in bad_lines:
                cells = cells[:-1]
            lines.append("\t".join(cells))
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A tiny pretrained model folder (config.json, vocab.txt, a checkpoint; one layer, which traces fastest: what
    the tests check holds for any depth) and RTE and MRPC fixtures."""
    import tensorflow as tf

    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage.model_folder import model_trackable

    root = tmp_path_factory.mktemp("multitask")
    corpus = write_corpus(root / "corpus", max_documents=20)
    vocab = write_vocab(corpus, root / "vocab.txt", num_words=400)
    text = " ".join(p.read_text() for p in sorted(corpus.glob("*.txt"))).replace("\n", " ")
    sentences = [" ".join(s.split()[:8]) for s in text.split(". ") if len(s.split()) >= 5]
    folder = root / "models" / "tiny"
    folder.mkdir(parents=True)
    config = PretrainingConfig.create({"model_size": "electra_tiny",
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
                                       "model_name": "tiny", "vocab_size": len(vocab.read_text().splitlines())})
    config.save(folder / "config.json")
    shutil.copyfile(vocab, folder / "vocab.txt")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model_trackable(build_pretrainer(config))), str(folder),
                               max_to_keep=1, checkpoint_name="ckpt").save(checkpoint_number=1)
    write_glue(root / "finetuning_data" / "rte", "rte", sentences, 24, seed=0)
    write_glue(root / "finetuning_data" / "mrpc", "mrpc", sentences, 16, seed=1, bad_lines=(3, 9))
    return root


def run(data_dir, *args, hparams=None):
    import run_finetuning

    return run_finetuning.main(["--model-name", "tiny", "--data-dir", str(data_dir), "--task", "rte,mrpc", *args,
                                "--hparams", json.dumps({"num_train_epochs": 1.0, "train_batch_size": 8,
                                                         "save_finetuned_models": False, **(hparams or {})})])


def test_two_glue_tasks_end_to_end_write_a_results_file_each(data_dir, capsys):
    """MRPC's train.tsv has two malformed rows: --skip-bad-rows reports them; the 24 RTE rows and the
    14 good MRPC rows, doubled (double_unordered), make 52 training features: 7 mixed batches of 8."""
    trials = run(data_dir, "--skip-bad-rows")
    printed = capsys.readouterr().out
    mrpc_train = data_dir / "finetuning_data" / "mrpc" / "train.tsv"
    assert f"skipped 2 malformed rows of {mrpc_train}: lines 3, 9" in printed
    assert "on rte+mrpc (mixed batches): 7 steps per trial" in printed
    results = data_dir / "models" / "tiny" / "results"
    for name, metric in (("rte", "accuracy"), ("mrpc", "f1")):
        written = json.loads((results / f"{name}_results.json").read_text())
        assert written["task"] == name and written["complete"] and written["num_train_steps"] == 7
        assert written["tasks_trained_together"] == ["rte", "mrpc"]
        assert written["config"]["multitask_batches"] == "mixed" and written["config"]["skip_bad_rows"]
        assert metric in written["trials"][0]["metrics"] and trials[name][0]["metrics"] == written["trials"][0]["metrics"]
    assert sorted(p.name for p in results.glob("*_results.json")) == ["mrpc_results.json", "rte_results.json"]


def test_a_malformed_row_stops_the_run_by_default(data_dir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run(data_dir)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    mrpc_train = data_dir / "finetuning_data" / "mrpc" / "train.tsv"
    assert len(err) == 1 and err[0].startswith(f"error: {mrpc_train}: line 3 has 4 tab-separated columns"), err
    assert "--skip-bad-rows" in err[0]


# ------------------------------------------------------------------------------------ skipping bad rows
def test_skipping_bad_glue_rows_counts_them_per_file_and_reports_once(tmp_path):
    from finetune.trials import prepare_tasks
    from tests.finetune_fixtures import _CharTokenizer

    folder = tmp_path / "rte"
    folder.mkdir()
    good = "{}\ta\tb\tentailment"
    rows = ["index\tsentence1\tsentence2\tlabel", good.format(0), "1\ta\tb", good.format(2), "3\ta\tb\tmaybe",
            good.format(4), "5\ta\tb\tentailment\textra", good.format(6)]
    (folder / "train.tsv").write_text("\n".join(rows) + "\n")
    (folder / "dev.tsv").write_text("\n".join(rows[:2]) + "\n")
    task = get_task("rte")
    with pytest.raises(InputError, match="train.tsv: line 3 has 3 tab-separated columns"):
        task.read(tmp_path, "train")
    skipping = BadRows(skip=True)
    assert [e.guid for e in task.read(tmp_path, "train", bad_rows=skipping)] == ["0", "2", "4", "6"]
    notes = []
    skipping.report(notes.append)
    skipping.report(notes.append)  # once
    assert notes == [f"skipped 3 malformed rows of {folder / 'train.tsv'}: lines 3, 5, 7"]
    notes.clear()
    config = FinetuningConfig.create({"skip_bad_rows": True}, "small", ["rte"])
    data, = prepare_tasks([task], tmp_path, _CharTokenizer(), config, say=notes.append)
    assert data.train["count"] == 4 and data.evals[""]["count"] == 1
    assert notes[0] == f"skipped 3 malformed rows of {folder / 'train.tsv'}: lines 3, 5, 7"
    assert len([n for n in notes if n.startswith("skipped")]) == 1  # dev.tsv is clean: no line for it


def test_skipping_bad_mrqa_lines_and_conll_sentences(tmp_path):
    from finetune.mrqa.reader import read_mrqa
    from finetune.tagging.reader import read_conll
    from finetune.tagging.spans import LABEL_NAMES

    context = "Denver won the game in Santa Clara."
    qa = {"qid": "q1", "question": "Who won?", "answers": ["Denver"],
          "detected_answers": [{"text": "Denver", "char_spans": [[0, 5]]}]}
    lines = [{"header": {"dataset": "X", "split": "dev"}}, {"context": context, "qas": [qa]},
             '{"context": "x", "qas": [}', {"context": context, "qas": [dict(qa, qid="q2", detected_answers=[
                 {"text": "x", "char_spans": [[50, 60]]}])]},
             {"context": context, "qas": [dict(qa, qid="q1")]}, {"context": context, "qas": [dict(qa, qid="q3")]}]
    path = tmp_path / "dev.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    with pytest.raises(InputError, match="line 3: malformed JSON"):
        read_mrqa(path)
    skipping = BadRows(skip=True)
    assert [e.qas_id for e in read_mrqa(path, bad_rows=skipping)] == ["q1", "q3"]
    notes = []
    skipping.report(notes.append)
    assert notes == [f"skipped 3 malformed lines of {path}: lines 3, 4, 5"]

    conll = tmp_path / "train.txt"
    conll.write_text("He PRP B-NP\nran VBD B-VP\n\nShe PRP B-NP\nsat VBD\nhere RB B-ADVP\n\n"
                     "It PRP B-NP\nwas VBD B-XX\n\nWe PRP B-NP\nwon VBD B-VP\n")
    known = set(LABEL_NAMES)
    with pytest.raises(InputError, match="line 5 has 2 fields"):
        read_conll(conll, known, True, "fix")
    skipping = BadRows(skip=True)
    sentences = read_conll(conll, known, True, "fix", bad_rows=skipping)
    assert [(s.guid, s.words) for s in sentences] == [("0", ("He", "ran")), ("3", ("We", "won"))]
    notes = []
    skipping.report(notes.append)
    assert notes == [f"skipped 2 malformed sentences of {conll}: lines 5, 9"]
