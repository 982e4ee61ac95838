"""studies/electric/device.py: the Electric ranking's pretraining moved to an accelerator without
TensorFlow and back, dry-run on the CPU with a micro model."""
import gzip
import json
import random
import textwrap

import numpy as np
import pytest

from training_jax import weights as jax_weights

from studies.electric import cli as electric_cli
from studies.electric.ranking import SHARDS
from studies.rtd_vs_mlm import stages

SENTENCES = 12


def write_sentence_shard(shared, vocab_file, count=SENTENCES, seed=0):
    """Shard 1 of a stand-in shared data folder: one WikiExtractor article whose lines hold plain sentences
    of the tiny vocabulary's words (what plain_wikipedia_sentences picks as held-out sentences)."""
    words = sorted({w for w in vocab_file.read_text().split() if w.isalpha() and w.islower() and len(w) > 2})
    rng = random.Random(seed)
    words = rng.sample(words, 16)  # few enough that each recurs in several contexts (context_spread's figures)
    sentences = [" ".join([rng.choice(words).capitalize(), *rng.sample(words, rng.randint(7, 12))])
                 for _ in range(count)]
    lines = ['<doc id="1" title="Held out">', "Held out"]
    lines += [". ".join(sentences[i:i + 3]) + "." for i in range(0, count, 3)] + ["</doc>"]
    shard = shared / SHARDS.format(1)
    shard.parent.mkdir(parents=True)
    with gzip.open(shard, "wt", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    return shared


@pytest.fixture
def exported(tmp_path):
    """(work dir, shared data, export): a tiny dataset, and a 1-layer micro Electric model exported for
    the device with 2 checkpoints and a held-out evaluation of 2 batches of 4."""
    from tests.helpers import MICRO_MODEL, build_tiny_dataset

    work, export = tmp_path / "work", tmp_path / "export"
    build_tiny_dataset(work, max_seq_length=32, num_shards=2)
    shared = write_sentence_shard(tmp_path / "shared", work / "vocab.txt")
    electric_cli.main([
        "--work-dir", str(work), "--shared-data", str(shared), "--sentences", str(SENTENCES),
        "--model-size", "electra_tiny", "--model", json.dumps({**MICRO_MODEL, "num_layers": 1}),
        "--batch-size", "4", "--steps", "6", "--device-checkpoints", "2",
        "--hparams", json.dumps({"num_eval_steps": 2}), "--device-export", str(export)])
    return work, shared, export


ON_THE_ACCELERATOR = textwrap.dedent('''
    import json, os, pathlib, sys
    sys.modules["tensorflow"] = None  # as on the accelerator machines: any use of TensorFlow fails
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    from studies.electric import cli as electric_cli
    from studies.device_path import pretrain_export as pretrain

    study, out = pathlib.Path(STUDY), OUT
    pretrain.measure = lambda *args: (100.0, 0.5)  # the size must not depend on this CPU's speed
    electric_cli.main(["--device-size", str(study), "--minutes", "0.012"])
    # one piece (pieces resume as the study's do: tests/test_jax_pretraining.py)
    finished = pretrain.main(["--export", str(study), "--model", "electric", "--out", str(study / "runs" / "electric")])
    electric_cli.main(["--device-score", str(study)])
    electric_cli.main(["--device-collect", str(study), "--out", out])
    print("RESULTS" + json.dumps({"study": json.loads((study / "export.json").read_text()), "finished": finished}))
''')


def test_the_whole_electric_device_sequence_dry_runs_on_the_cpu(exported, tmp_path, capsys):
    """export → size → pretrain → score → collect (JAX, TensorFlow unimportable) →
    --device-results here: the weights become a model folder holding exactly what came back, and Scorer's
    ranking of the same sentences equals the accelerator's."""
    from configs.pretraining_config import PretrainingConfig
    from tests.helpers import run_script_under_jax
    from pretrain.loaded_folder import load_model_folder
    from studies.device_path import pretrain_export as pretrain

    work, shared, export = exported
    commands = (export / "COMMANDS.txt").read_text()
    assert "--model electric" in commands and "--arm" not in commands and "--device-size" in commands and "--device-score" in commands
    config = PretrainingConfig.load(export / "config_electric.json")
    assert config.electric_objective and config.mixed_precision == "mixed_bfloat16"
    assert config.train_batch_size == 4 and config.model_config().num_layers == 1
    with np.load(export / "eval.npz") as held_out:
        assert len(held_out["input_ids"]) == config.eval_batch_size * config.num_eval_steps == 8

    out = tmp_path / "OUT"
    script = ON_THE_ACCELERATOR.replace("STUDY", repr(str(export))).replace("OUT", repr(str(out)))
    results = run_script_under_jax(script, stages.REPO, timeout=600)
    arm = results["study"]["models"]["electric"]
    steps = arm["num_train_steps"]
    assert steps == 14 and arm["checkpoint_steps"] == [7, 14]  # sized: (0.9 · 0.72 s - 0.5 s) at 100 steps/s
    assert results["finished"] == "done"
    back = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert back == ["electric/config.json", "electric/metrics.jsonl", "electric/ranking.json",
                    "electric/weights-14.part1of1.npz"]
    assert all((out / name).stat().st_size <= jax_weights.SHARD_BYTES for name in back)
    from pretrain_loop.metrics_file import read_metrics

    splits, run = read_metrics(out / "electric")
    assert run["num_train_steps"] == steps and splits["train"][-1]["step"] == steps
    assert [r["step"] for r in splits["eval"]][-1] == steps
    device_ranking = json.loads((out / "electric" / "ranking.json").read_text())
    assert sorted(device_ranking["steps"], key=int) == ["7", "14"]

    capsys.readouterr()
    electric_cli.main(["--work-dir", str(work), "--shared-data", str(shared), "--device-results", str(out)])
    printed = capsys.readouterr().out
    assert "| 14 (accelerator) |" in printed and "| 14 (here, electric_device_step14) |" in printed
    kept = json.loads((work / "ranking.json").read_text())["device"]
    here, there = kept["rescored"]["14"], device_ranking["steps"]["14"]
    assert kept["run"]["finished"] and kept["run"]["num_train_steps"] == steps
    assert here["max_abs_score_difference"] < 1e-3  # the same float16 weights, JAX there and TensorFlow here
    assert here["replace_pairs"] == there["replace_pairs"] > 0
    assert here["sample_pairs"] == there["sample_pairs"] == SENTENCES
    for key in ("swap", "shuffle", "replace", "sample", "cloze_swap", "cloze_shuffle", "cloze_replace"):
        assert abs(here[key] - there[key]) <= 1 / SENTENCES, key  # a near tie may fall either way
    for key in ("within_token", "between_tokens", "swap_margin", "shuffle_margin", "cloze_swap_margin"):
        assert here[key] == pytest.approx(there[key], rel=1e-3, abs=1e-4)

    folder = work / "models" / "electric_device_step14"
    came_back = jax_weights.read_weights(out / "electric", jax_weights.weights_file(14))
    loaded = load_model_folder(folder)
    assert loaded.step == 14 and sorted(v.path for v in loaded.pretrainer.weights) == sorted(came_back)
    for variable in loaded.pretrainer.weights:
        np.testing.assert_array_equal(variable.numpy(), came_back[variable.path].astype(variable.dtype))


def test_missing_exports_and_results_name_the_file(tmp_path, monkeypatch, capsys):
    """One line and exit 2: an accelerator stage without an export, an import without what comes back."""
    import tensorflow  # noqa: F401  first, so that the stage's without_tensorflow() leaves it to this process

    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")  # the stage defaults it to jax; keep this process's
    with pytest.raises(SystemExit) as raised:
        electric_cli.main(["--device-score", str(tmp_path / "nothing")])
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing/export.json: missing" in err[0] and "studies.electric --device-export" in err[0]

    shared = tmp_path / "shared"
    (shared / SHARDS.format(1)).parent.mkdir(parents=True)
    (shared / SHARDS.format(1)).write_bytes(b"")
    (tmp_path / "OUT" / "electric").mkdir(parents=True)
    with pytest.raises(SystemExit) as raised:
        electric_cli.main(["--work-dir", str(tmp_path / "work"), "--shared-data", str(shared),
                           "--device-results", str(tmp_path / "OUT")])
    assert raised.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "OUT/electric/config.json: missing" in err[0] and "--device-collect" in err[0]


def test_checkpoints_are_evenly_spaced_and_end_at_the_last_step():
    from studies.electric import device as electric_device

    assert electric_device.checkpoint_steps(6000, 6) == [1000, 2000, 3000, 4000, 5000, 6000]
    assert electric_device.checkpoint_steps(14, 2) == [7, 14]
    assert electric_device.checkpoint_steps(10, 3) == [3, 6, 10]
    assert electric_device.checkpoint_steps(1, 3) == [1]


def test_the_jax_trainer_takes_the_models_the_export_lists(tmp_path):
    """--model is checked against export.json (electric for the Electric ranking; electra and mlm for RTD vs MLM),
    and an older export's study.json is checked the same way."""
    from common.errors import InputError
    from studies.device_path import pretrain_export as pretrain

    (tmp_path / "export.json").write_text(json.dumps({"models": {"electric": {}}, "log_every": 1, "eval_every": {}}))
    with pytest.raises(InputError, match=r"--model electra: .*export\.json has no such model; give one of electric"):
        pretrain.open_run(pretrain.parse_args(["--export", str(tmp_path), "--model", "electra", "--out", str(tmp_path)]))
    old = tmp_path / "old"
    old.mkdir()
    (old / "study.json").write_text(json.dumps({"arms": {"electric": {}}, "log_every": 1, "eval_every": {}}))
    with pytest.raises(InputError, match=r"--model electra: .*old/study\.json has no such model; give one of electric"):
        pretrain.open_run(pretrain.parse_args(["--export", str(old), "--model", "electra", "--out", str(tmp_path)]))
    with pytest.raises(InputError, match=r"none/export\.json: missing"):
        pretrain.open_run(pretrain.parse_args(["--export", str(tmp_path / "none"), "--model", "electric",
                                          "--out", str(tmp_path)]))
