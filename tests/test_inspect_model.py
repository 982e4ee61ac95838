"""python -m inference.inspect_model on a tiny trained model folder, and the curves PNG a pretraining run ends with.

One 4-step run (micro towers, 32-token examples, the last of 2 shards held out) serves every test.
"""
import contextlib
import io
import json
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import run_pretraining
from data import tfrecords
from tests.helpers import MICRO_MODEL, build_tiny_dataset
from inference import inspect_model as inspector_cli

MODEL = "inspected"
SENTENCES = ["the interpreter reads a line of input and executes it .",
             "names are introduced by name binding operations ."]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(data dir, the run's stdout lines) of a 4-step run with a held-out shard."""
    data_dir = tmp_path_factory.mktemp("inspect_data")
    build_tiny_dataset(data_dir, max_seq_length=32, num_shards=2, max_documents=40)
    # 1 layer: what the inspector shows does not depend on the model's depth
    hparams = {"model_size": "electra_tiny", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
               "train_batch_size": 8, "eval_batch_size": 8, "num_train_steps": 4, "num_warmup_steps": 2,
               "iterations_per_loop": 2, "save_checkpoints_steps": 4, "do_eval": True, "num_eval_steps": 2}
    stream = io.StringIO()
    with contextlib.redirect_stdout(stream):
        run_pretraining.main(["--model-name", MODEL, "--data-dir", str(data_dir), "--hparams", json.dumps(hparams)])
    return data_dir, stream.getvalue().strip().splitlines()


def inspect(data_dir, *args, stdout=None):
    return inspector_cli.main(["--model-name", MODEL, "--data-dir", str(data_dir), *args],
                              stdout=stdout or io.StringIO())


def test_a_run_ends_by_drawing_its_curves_beside_its_logs(trained):
    data_dir, lines = trained
    png = data_dir / "models" / MODEL / "logs" / "curves.png"
    assert lines[-1] == ("Curves (losses, generator accuracy, discriminator AUC/precision/recall; training and "
                         f"held-out): {png}")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert not list(png.parent.glob("*.tmp*"))


def test_detection_masks_as_pretraining_does_and_repeats_with_its_seed(trained):
    data_dir, _ = trained
    first = inspect(data_dir, "--json", "--seed", "7", *SENTENCES)
    assert inspect(data_dir, "--json", "--seed", "7", *SENTENCES) == first
    assert inspect(data_dir, "--json", "--seed", "8", *SENTENCES)["texts"] != first["texts"]

    # The first text's masked positions are those the pretrainer's own masking draws from the same seed.
    folder = inspector_cli.Inspector(data_dir / "models" / MODEL)
    entry = first["texts"][0]
    batch = folder.inputs(folder.encode(SENTENCES[0]))
    masked = folder.pretrainer.mask(batch, keras.random.SeedGenerator(7))
    weights = np.asarray(masked["masked_lm_weights"])[0]
    expected = sorted({int(p) for p, w in zip(np.asarray(masked["masked_lm_positions"])[0], weights) if w})
    assert [s["position"] for s in entry["samples"]] == expected
    assert first["step"] == 4 and first["mode"] == "replaced_token_detection"

    for entry in first["texts"]:
        tokens = entry["tokens"]
        assert tokens[0]["token"] == "[CLS]" and tokens[-1]["token"] == "[SEP]"
        assert all(0.0 <= t["p_replaced"] <= 1.0 for t in tokens)
        for t in tokens:  # replaced ⇔ chosen and the sample differs from the original
            assert t["replaced"] == (t["chosen"] and t["token"] != t["original"])
        by_position = {t["position"]: t for t in tokens}
        for s in entry["samples"]:
            assert by_position[s["position"]]["token"] == s["sample"] and s["input"] in ("[MASK]", "kept")
            assert s["replaced"] == (s["sample"] != s["original"])
        assert entry["summary"]["replaced"] == sum(t["replaced"] for t in tokens)


def test_plain_text_colour_only_on_a_terminal_without_no_color(trained, monkeypatch):
    data_dir, _ = trained

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    plain, terminal, no_color = io.StringIO(), Terminal(), Terminal()
    inspect(data_dir, SENTENCES[0], stdout=plain)
    monkeypatch.delenv("NO_COLOR", raising=False)
    inspect(data_dir, SENTENCES[0], stdout=terminal)
    monkeypatch.setenv("NO_COLOR", "1")
    inspect(data_dir, SENTENCES[0], stdout=no_color)
    text = plain.getvalue()
    assert "\033" not in text and "\033" not in no_color.getvalue() and "\033[" in terminal.getvalue()
    assert no_color.getvalue() == text
    assert "[1] the interpreter reads a line of input and executes it ." in text
    assert "the discriminator's P(replaced) for every token (* = truly replaced):" in text
    assert "[CLS] " in text and "real: mean P" in text


def test_fill_mask_gives_the_generators_top_k_at_each_mask(trained):
    data_dir, _ = trained
    document = inspect(data_dir, "--json", "--fill-mask", "--top-k", "3", "the [MASK] reads a line of [MASK] .")
    masks = document["texts"][0]["masks"]
    assert [m["position"] for m in masks] == [2, 8]
    for mask in masks:
        p = [c["p"] for c in mask["candidates"]]
        assert len(p) == 3 and p == sorted(p, reverse=True) and 0 < sum(p) <= 1.0
    out = io.StringIO()
    inspect(data_dir, "--fill-mask", "the [MASK] reads a line of [MASK] .", stdout=out)
    assert "[MASK] 1 (token 2): " in out.getvalue() and "[MASK] 2 (token 8): " in out.getvalue()


def test_held_out_sentences_come_from_the_held_out_shard(trained):
    data_dir, _ = trained
    document = inspect(data_dir, "--json", "--held-out", "2")
    texts = document["texts"]
    assert [t["source"] for t in texts] == ["held-out sentence 1", "held-out sentence 2"]
    dataset_dir = data_dir / "pretrain_tfrecords"
    metadata = tfrecords.load_metadata(dataset_dir)
    held_out = tfrecords.pretraining_dataset(dataset_dir, 64, files=tfrecords.shard_files(dataset_dir, metadata)[-1:],
                                             training=False, metadata=metadata)
    examples = [" ".join(map(str, ids)) for batch in held_out for ids in batch["input_ids"].numpy()]
    folder = inspector_cli.Inspector(data_dir / "models" / MODEL)
    for text in texts:  # each sentence's ids are a run of ids in one held-out example
        ids = " ".join(str(i) for i in folder.encode(text["text"]))
        assert any(f" {ids} " in f" {example} " for example in examples), text["text"]


@pytest.mark.parametrize("case, args, fragment", [
    ("unknown model", ["--model-name", "nothing_here", "x"], "--model-name nothing_here: no model folder"),
    ("empty text", [""], "argument 1 is empty"),
    ("no [MASK]", ["--fill-mask", "a text without a mask"], "argument 1 has no [MASK]; --fill-mask needs one"),
    ("stray [MASK]", ["a [MASK] here"], "argument 1 contains [MASK]; add --fill-mask"),
    ("nothing", [], "nothing to inspect"),
    ("missing file", ["--file", "/no/such/file.txt"], "--file /no/such/file.txt: no such file"),
])
def test_bad_input_is_one_line_and_exit_2(trained, capsys, case, args, fragment):
    data_dir, _ = trained
    argv = ["--data-dir", str(data_dir), *args]
    if "--model-name" not in args:
        argv = ["--model-name", MODEL, *argv]
    with pytest.raises(SystemExit) as exit_info:
        inspector_cli.main(argv, stdout=io.StringIO())
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err


def test_a_text_longer_than_the_model_reads_is_truncated_with_a_note(trained, capsys, tmp_path):
    data_dir, _ = trained
    path = tmp_path / "texts.txt"
    path.write_text("\n" + " ".join(["line"] * 40) + "\n\n", encoding="utf-8")
    document = inspect(data_dir, "--json", "--file", str(path))
    entry = document["texts"][0]
    assert entry["source"] == f"{path} line 2" and entry["truncated"] and len(entry["tokens"]) == 32
    assert capsys.readouterr().err.strip() == (
        f"note: {path} line 2 is 40 tokens long but {MODEL} reads 32 ([CLS] and [SEP] included), so it is "
        "truncated to its first 30 tokens")


@pytest.mark.parametrize("module", ["inference.inspect_model", "inference.score"])
def test_the_commands_answer_by_their_names(module):
    """python -m inference.inspect_model / inference.score (their old aliases under training/ are gone)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=root, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m {module} ")
