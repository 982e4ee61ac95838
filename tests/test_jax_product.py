"""The JAX path as a product, with no study: studies.device_path.export here, training_jax.pretrain under JAX
without TensorFlow (its --out a model folder TensorFlow's readers take as it is), studies.device_path.import_jax back
here (a copy and a check), then run_finetuning.py on the imported folder."""
import json
import pathlib

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, build_tiny_dataset, run_script_under_jax, write_rte

REPO = pathlib.Path(__file__).resolve().parents[1]

PRETRAIN = '''
import sys
sys.modules["tensorflow"] = None  # as on a GPU machine without TensorFlow: any use of it fails
from studies.device_path import pretrain_export as pretrain
outcome = pretrain.main(["--export", EXPORT, "--model", "micro", "--out", RUNS])
print("RESULTS" + __import__("json").dumps({"outcome": outcome}))
'''


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from studies.device_path import export

    root = tmp_path_factory.mktemp("jax_product")
    build_tiny_dataset(root / "data", max_seq_length=32, num_shards=2)
    hparams = {"model_size": "electra_small", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1},
               "train_batch_size": 4, "eval_batch_size": 4, "num_eval_steps": 2, "num_train_steps": 8,
               "num_warmup_steps": 2, "learning_rate": 1e-3, "do_eval": True}
    study = export.main(["--data-dir", str(root / "data"), "--model-name", "micro", "--hparams", json.dumps(hparams),
                         "--checkpoints", "2", "--out", str(root / "export")])
    return root, study


def test_export_train_import_then_finetune_with_tensorflow(exported):
    import run_finetuning
    from studies.device_path import import_jax
    from pretrain.loaded_folder import load_model_folder
    from storage.checkpoint_bundle import read_model_weights

    root, study = exported
    assert study["models"]["micro"]["checkpoint_steps"] == [4, 8]
    runs = root / "data" / "models" / "micro_run"  # the run's --out is a model folder: it can sit among them
    script = PRETRAIN.replace("EXPORT", repr(str(root / "export"))).replace("RUNS", repr(str(runs)))
    assert run_script_under_jax(script, REPO)["outcome"] == "done"
    assert {"config.json", "vocab.txt", "checkpoint", "ckpt-4.index", "ckpt-8.index"} <= {p.name
                                                                                           for p in runs.iterdir()}
    trained = read_model_weights(runs / "ckpt-8")
    assert {value.dtype.name for value in trained.values()} == {"float16"}  # --weights-dtype's default
    as_it_is = load_model_folder(runs)  # no import step: TensorFlow's readers take the run's folder
    assert as_it_is.checkpoint.endswith("ckpt-8") and as_it_is.config.num_train_steps == 8

    folder = import_jax.main(["--export", str(root / "export"), "--weights", str(runs),
                              "--data-dir", str(root / "data"), "--model-name", "micro_jax"])
    for name in ("ckpt-8.index", "ckpt-8.data-00000-of-00001"):  # a copy
        assert (folder / name).read_bytes() == (runs / name).read_bytes()
    loaded = load_model_folder(folder)
    assert loaded.config.num_train_steps == 8 and loaded.checkpoint.endswith("ckpt-8")
    for variable, unimported in zip(loaded.pretrainer.weights, as_it_is.pretrainer.weights):
        # exactly what JAX trained, widened from float16
        np.testing.assert_array_equal(variable.numpy(), trained[variable.path].astype(variable.dtype))
        np.testing.assert_array_equal(variable.numpy(), unimported.numpy())

    text = (root / "data" / "corpus" / "part0.txt").read_text().replace("\n", " ")
    sentences = [" ".join(s.split()[:10]) for s in text.split(". ") if len(s.split()) >= 6]
    write_rte(root / "glue" / "rte", sentences, {"train": 24, "dev": 8}, seed=0)
    run_finetuning.main(["--data-dir", str(root / "data"), "--model-name", "micro_jax", "--task", "rte",
                         "--finetuning-data-dir", str(root / "glue"),
                         "--hparams", json.dumps({"max_train_steps": 2, "save_finetuned_models": False})])
    results = json.loads((folder / "results" / "rte_results.json").read_text())
    assert results["complete"] and results["checkpoint"].endswith("ckpt-8")


def test_import_refuses_what_does_not_match(exported, tmp_path, capsys):
    from studies.device_path import import_jax
    from common.errors import InputError
    from storage.checkpoint_bundle import write_model_weights

    root, _ = exported
    with pytest.raises(InputError, match="export.json: missing"):
        import_jax.read_export(tmp_path)
    with pytest.raises(InputError, match="not named weights-<step>.npz"):
        import_jax.weights_step(tmp_path / "final.npz")
    assert import_jax.weights_step(tmp_path / "weights-12.part1of2.npz") == 12
    np.savez(tmp_path / "weights-3.npz", **{"not/a/weight": np.zeros(2)})
    with pytest.raises(SystemExit) as stopped:
        import_jax.main(["--export", str(root / "export"), "--weights", str(tmp_path / "weights-3.npz"),
                         "--data-dir", str(tmp_path / "data"), "--model-name", "wrong"])
    assert stopped.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith(f"error: {tmp_path / 'weights-3.npz'}: its weights do not match the config's model")
    assert not (tmp_path / "data" / "models" / "wrong").exists()  # nothing half-written
    other = write_model_weights(tmp_path / "other" / "ckpt-3", {"not/a/weight": np.zeros(2, np.float16)})
    with pytest.raises(SystemExit):
        import_jax.main(["--export", str(root / "export"), "--weights", str(other), "--data-dir",
                         str(tmp_path / "data"), "--model-name", "wrong"])
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith(f"error: --weights {other}: its weights do not match this model (missing ")
    assert not (tmp_path / "data" / "models" / "wrong").exists()


def test_weights_in_shards_read_back_whole(tmp_path):
    """What a device call can bring back (files of at most 16 MiB), read back whole."""
    from training_jax import weights as jax_weights

    values = {f"layer_{i}/kernel": np.full((64, 64), i, np.float16) for i in range(5)}  # 8 KiB each
    jax_weights.write_shards(values, tmp_path, "weights-9.npz", max_bytes=20_000)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"weights-9.part{k}of3.npz" for k in (1, 2, 3)]
    whole = jax_weights.read_weights(tmp_path, "weights-9.npz")
    assert sorted(whole) == sorted(values) and all(np.array_equal(whole[k], values[k]) for k in values)
    (tmp_path / "weights-9.part2of3.npz").unlink()
    with pytest.raises(Exception, match="2 of the 3 shards"):
        jax_weights.read_weights(tmp_path, "weights-9.npz")
    assert jax_weights.read_weights(tmp_path, "weights-1.npz") is None
