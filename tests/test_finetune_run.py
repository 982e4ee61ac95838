"""run_finetuning.py end to end on a tiny pretrained model: RTE from the shared GLUE data (results JSON
with every trial and medians, submission files, fine-tuned model folders that load_finetuned_model
reads back to the same dev accuracy), MNLI's submission files with and without the diagnostic set
(AX.tsv) on a tiny fixture, a short SQuAD 2.0 run, bad input as one line with exit code 2,
and the layer-wise learning-rate factors for L = 12, d = 0.8 in both variants."""
import gzip
import json
import shutil

import numpy as np
import pytest

import run_finetuning
from configs.finetuning_config import FinetuningConfig
from configs.model_config import ModelConfig
from finetune.loop import build_optimizer
from finetune.model import FinetuningModel, make_head
from finetune.pretrained import build_encoder
from finetune.saved import load_finetuned_model
from finetune.registry import get_task
from tests.helpers import MICRO_MODEL
from tests.finetune_fixtures import write_diagnostic, write_mnli
from tests.checkpoint_fixtures import micro_model_folder

QUICK = {"max_train_steps": 4, "iterations_per_loop": 2, "eval_batch_size": 128}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, shared_data, bert_vocab_file):
    """A pretrained-model folder as run_pretraining.py writes it (config.json, vocab.txt, ckpt-N) for a
    1-layer model with BERT's vocabulary (what these runs prove holds for any depth; one layer traces in half
    the time), and the shared GLUE tasks linked under finetuning_data/."""
    root = tmp_path_factory.mktemp("electra_data")
    micro_model_folder(root, bert_vocab_file, step=3, num_layers=1)
    (root / "finetuning_data").mkdir()
    (root / "finetuning_data" / "RTE").symlink_to(shared_data / "glue" / "RTE")
    return root


def run(data_dir, *args, hparams=None):
    return run_finetuning.main(["--model-name", "tiny", "--data-dir", str(data_dir), *args,
                                "--hparams", json.dumps({**QUICK, **(hparams or {})})])


def test_rte_end_to_end_results_submission_and_saved_models(data_dir, capsys):
    run(data_dir, "--task", "rte", "--num-trials", "2", "--do-predict")
    printed = capsys.readouterr().out
    model_dir = data_dir / "models" / "tiny"
    results = json.loads((model_dir / "results" / "rte_results.json").read_text())
    assert results["complete"] and results["trials_done"] == 2 and results["num_train_steps"] == 4
    assert [t["seed"] for t in results["trials"]] == [0, 1]
    accuracies = [t["metrics"]["accuracy"] for t in results["trials"]]
    assert results["summary"]["accuracy"]["median"] == pytest.approx(np.median(accuracies))
    assert results["summary"]["accuracy"]["std"] == pytest.approx(np.std(accuracies))
    assert 40 < results["majority_baseline"]["accuracy"] < 60
    assert results["config"]["learning_rate"] == 3e-4 and results["config"]["num_train_epochs"] == 10.0
    assert "rte      accuracy" in printed and "Results:" in printed

    for trial in (1, 2):
        lines = (model_dir / "test_predictions" / f"trial_{trial}" / "RTE.tsv").read_text().splitlines()
        assert lines[0] == "index\tprediction" and len(lines) == 3001
        assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "not_entailment"}
        assert [line.split("\t")[0] for line in lines[1:4]] == ["0", "1", "2"]

    keras_model, info = load_finetuned_model(model_dir / "finetuning_models" / "rte_model_1")
    assert (info.task, info.label_names, info.is_pair, info.max_seq_length) == (
        "rte", ["entailment", "not_entailment"], True, 128)
    assert info.sp_model is None and info.do_lower_case and info.vocab_file.endswith("vocab.txt")
    # The saved weights give back trial 1's dev accuracy.
    from data.tokenization import load_tokenizer
    from finetune.batches import iterate_batches

    task = get_task("rte")
    dev = task.read(data_dir / "finetuning_data", "dev")
    features = task.featurize(dev, load_tokenizer(vocab_file=info.vocab_file), FinetuningConfig.create({}, "small", ["rte"]))
    logits = np.zeros((len(dev), 2), np.float32)
    for batch in iterate_batches(features["sequences"], {}, 64, 128):
        logits[batch["index"]] = keras_model({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")})
    assert task.score(dev, logits)["accuracy"] == pytest.approx(accuracies[0])


@pytest.mark.parametrize("with_diagnostic", [True, False])
def test_mnli_submission_files_with_and_without_the_diagnostic_set(data_dir, tmp_path, capsys, with_diagnostic):
    """GLUE's layout: AX.tsv beside MNLI-m.tsv and MNLI-mm.tsv; without diagnostic.tsv a note, and the rest."""
    shutil.copytree(data_dir / "models" / "tiny", tmp_path / "models" / "tiny",  # the weights, no outputs
                    ignore=shutil.ignore_patterns("test_predictions", "results", "finetuning_*"))
    write_mnli(tmp_path / "glue_data" / "MNLI")
    if with_diagnostic:
        write_diagnostic(tmp_path / "glue_data" / "diagnostic" / "diagnostic.tsv", 5)
    run(tmp_path, "--task", "mnli", "--do-predict", "--finetuning-data-dir", str(tmp_path),
        hparams={"max_train_steps": 1, "iterations_per_loop": 1, "save_finetuned_models": False})
    printed = capsys.readouterr().out
    folder = tmp_path / "models" / "tiny" / "test_predictions" / "trial_1"
    assert sorted(p.name for p in folder.iterdir()) == ["AX.tsv"] * with_diagnostic + ["MNLI-m.tsv", "MNLI-mm.tsv"]
    assert ("no diagnostic set, so no AX.tsv" in printed) != with_diagnostic
    if with_diagnostic:
        lines = (folder / "AX.tsv").read_text().splitlines()
        assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == list("01234")
        assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "neutral", "contradiction"}
        assert f"wrote {folder / 'AX.tsv'}" in printed


def test_squad_v2_short_run_writes_scores_and_predictions(data_dir, shared_data):
    with gzip.open(shared_data / "squad" / "dev-v2.0.reconstructed.json.gz", "rt", encoding="utf-8") as f:
        article = json.load(f)["data"][0]
    small = {"version": "v2.0", "data": [dict(article, paragraphs=article["paragraphs"][:3])]}
    folder = data_dir / "finetuning_data" / "squad"
    folder.mkdir()
    for name in ("train-v2.0.json", "dev-v2.0.json"):
        (folder / name).write_text(json.dumps(small))
    run(data_dir, "--task", "squad", "--do-predict", hparams={"max_seq_length": 64, "train_batch_size": 8,
                                                                "max_train_steps": 2})
    model_dir = data_dir / "models" / "tiny"
    results = json.loads((model_dir / "results" / "squad_results.json").read_text())
    metrics = results["trials"][0]["metrics"]
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1", "best_f1_thresh"} <= set(metrics)
    ids = {qa["id"] for p in small["data"][0]["paragraphs"] for qa in p["qas"]}
    predictions = json.loads((model_dir / "test_predictions" / "trial_1" / "squad_dev_predictions.json").read_text())
    odds = json.loads((model_dir / "test_predictions" / "trial_1" / "squad_dev_null_odds.json").read_text())
    assert set(predictions) == ids == set(odds)
    assert all(isinstance(text, str) and text for text in predictions.values())


@pytest.mark.parametrize("case, fragment", [
    ("no_model", "no such model folder"),
    ("no_weights", "holds no checkpoint"),
    ("task", "unknown task"),
    ("no_task_dir", "no data folder"),
    ("hparams", "unknown key(s) learning_rat"),
    ("bad_label", "unknown label 'maybe'"),
    ("long", "exceeds the model's 512 positions"),
    ("bad_diagnostic", "diagnostic.tsv: the header lacks the column(s) sentence1, sentence2"),
    ("gradients_env", "ELECTRA_ELEMENTWISE_GRADIENTS='fast' in the environment: use one of by-hand, autodiff"),
])
def test_bad_input_is_one_line_exit_2(data_dir, tmp_path, capsys, monkeypatch, case, fragment):
    args = ["--model-name", "tiny", "--data-dir", str(data_dir), "--task", "rte"]
    if case == "gradients_env":
        monkeypatch.setenv("ELECTRA_ELEMENTWISE_GRADIENTS", "fast")
    if case == "no_model":
        args[1] = "missing"
    elif case == "no_weights":
        (tmp_path / "models" / "empty").mkdir(parents=True)
        shutil.copyfile(data_dir / "models" / "tiny" / "config.json", tmp_path / "models" / "empty" / "config.json")
        shutil.copyfile(data_dir / "models" / "tiny" / "vocab.txt", tmp_path / "models" / "empty" / "vocab.txt")
        args[1], args[3] = "empty", str(tmp_path)
    elif case == "task":
        args[-1] = "rte,glue"
    elif case == "no_task_dir":
        args[-1] = "cola"
    elif case == "hparams":
        args += ["--hparams", '{"learning_rat": 1}']
    elif case == "bad_label":
        (tmp_path / "rte").mkdir()
        (tmp_path / "rte" / "train.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
        (tmp_path / "rte" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
        args += ["--finetuning-data-dir", str(tmp_path)]
    elif case == "long":
        args += ["--hparams", '{"max_seq_length": 1024}']
    elif case == "bad_diagnostic":
        write_mnli(tmp_path / "MNLI")
        (tmp_path / "diagnostic").mkdir()
        (tmp_path / "diagnostic" / "diagnostic.tsv").write_text("index\tpremise\thypothesis\n0\ta\tb\n")
        args[-1] = "mnli"
        args += ["--do-predict", "--finetuning-data-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        run_finetuning.main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err


@pytest.mark.parametrize("variant, top_layer, embeddings", [("original", 0.8 ** 2, 0.8 ** 14),
                                                             ("intended", 0.8, 0.8 ** 13)])
def test_layerwise_factors_for_12_layers(variant, top_layer, embeddings):
    """L = 12, d = 0.8: the head gets 1; as coded, layer i gets d^(13 − i) (top d², embeddings d^14);
    the intended variant one power less."""
    model_config = ModelConfig.from_dict({**MICRO_MODEL, "num_layers": 12, "vocab_size": 64})
    config = FinetuningConfig.create({"layerwise_lr_variant": variant}, "small", ["rte"])
    encoder = build_encoder(model_config)
    model = FinetuningModel(encoder, {"rte": make_head(get_task("rte"), 32, config)})
    optimizer = build_optimizer(config, 100, 12)
    optimizer.build(model.trainable_variables)
    factors = dict(zip(optimizer._variable_paths, optimizer._variable_lr_multipliers))
    assert factors["task_specific/rte/dense/kernel"] == 1.0
    assert factors["electra/encoder/layer_11/attention/self/query/kernel"] == pytest.approx(top_layer)
    assert factors["electra/encoder/layer_0/output/dense/kernel"] == pytest.approx(top_layer * 0.8 ** 11)
    assert factors["electra/embeddings/word_embeddings"] == pytest.approx(embeddings)
    assert factors["electra/embeddings_project/kernel"] == pytest.approx(embeddings)
    assert len({round(v, 12) for v in factors.values()}) == 14  # head, 12 layers, embeddings
