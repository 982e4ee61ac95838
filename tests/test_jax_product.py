"""The device path's import (studies.device_path.import_jax) refuses weights that do not match, and weights brought
back in shards read back whole. The path end to end (export, the run under JAX, the import, run_finetuning.py on
the imported folder) is tests/test_jax_run.py's; the product's own (run_pretraining.py under JAX, then
run_finetuning.py on its folder under TensorFlow) is tests/test_run_pretraining_jax.py's."""
import json

import numpy as np
import pytest

from tests.helpers import MICRO_MODEL, build_tiny_dataset


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
    assert study["models"]["micro"]["checkpoint_steps"] == [4, 8]
    return root, study


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
