"""storage/model_folder.py: the one reader and writer of pretrained model folders (no model is built here)."""
import pytest

from common.errors import InputError
from configs.pretraining_config import PretrainingConfig
from storage import model_folder


def fake_folder(path, steps=(2, 5), vocab=("vocab.txt",)):
    """A folder with a config, vocabulary files and empty checkpoint files listed in a state file."""
    path.mkdir(parents=True)
    model_folder.write_config(path, PretrainingConfig.create({"model_size": "electra_tiny"}))
    for name in vocab:
        (path / name).write_text("[PAD]\n")
    for step in steps:
        for suffix in (".index", ".data-00000-of-00001"):
            (path / f"ckpt-{step}{suffix}").write_bytes(b"")
    if steps:
        model_folder.write_state(path, f"ckpt-{steps[-1]}")
    return path


def test_folder_or_prefix_resolves_to_one_checkpoint(tmp_path):
    folder = fake_folder(tmp_path / "m")
    assert model_folder.resolve_checkpoint(folder) == str(folder / "ckpt-5")
    assert model_folder.resolve_checkpoint(folder / "ckpt-2") == str(folder / "ckpt-2")
    assert model_folder.checkpoint_step(model_folder.resolve_checkpoint(folder)) == 5
    with pytest.raises(InputError, match=r"^--init-checkpoint .*ckpt-7: no such checkpoint \(expected .*ckpt-7.index\)"):
        model_folder.resolve_checkpoint(folder / "ckpt-7")
    empty = fake_folder(tmp_path / "empty", steps=())
    with pytest.raises(InputError, match="model folder .*: the folder holds no checkpoint"):
        model_folder.resolve_checkpoint(empty, flag="model folder")


def test_one_vocabulary_rule_for_every_reader(tmp_path):
    """vocab.txt wins; else the one SentencePiece model; several models are refused (fine-tuning used to take
    the first in sorted order where export refused them)."""
    from finetune.pretrained import read_model_folder

    assert model_folder.find_vocab(fake_folder(tmp_path / "wp", vocab=("vocab.txt", "a.model"))).name == "vocab.txt"
    assert read_model_folder(fake_folder(tmp_path / "sp", vocab=("sp.model",))).sp_model.name == "sp.model"
    several = fake_folder(tmp_path / "two", vocab=("a.model", "b.model"))
    with pytest.raises(InputError, match=r"2 SentencePiece models \(a.model, b.model\) and no vocab.txt; keep only"):
        read_model_folder(several)
    with pytest.raises(InputError, match="no vocabulary"):
        read_model_folder(fake_folder(tmp_path / "none", vocab=()))


def test_a_linked_checkpoint_is_a_complete_folder_of_its_own(tmp_path):
    source = fake_folder(tmp_path / "run", steps=(2, 5))
    linked = model_folder.link_checkpoint(source, 2, tmp_path / "run_step2")
    assert model_folder.is_complete(linked) and model_folder.resolve_checkpoint(linked) == str(linked / "ckpt-2")
    assert sorted(p.name for p in linked.iterdir()) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                                                        "config.json", "vocab.txt"]
    assert (linked / "ckpt-2.index").stat().st_ino == (source / "ckpt-2.index").stat().st_ino  # hard links
    assert model_folder.read_config(linked) == model_folder.read_config(source)


def test_saved_checkpoints_are_every_index_on_disk_by_step(tmp_path):
    folder = fake_folder(tmp_path / "run", steps=(2, 5, 10))
    (folder / "ckpt-7.data-00000-of-00001").write_bytes(b"")  # no index: not a checkpoint
    model_folder.write_state(folder, "ckpt-5")  # listed or not, each is on disk
    assert model_folder.saved_checkpoints(folder) == [str(folder / f"ckpt-{step}") for step in (2, 5, 10)]
    assert model_folder.saved_checkpoints(tmp_path / "nothing") == []


def micro_pretrainer(seed):
    import numpy as np

    from pretrain.builder import build_pretrainer
    from tests.helpers import MICRO_MODEL

    config = PretrainingConfig.create({"model_size": "electra_tiny", "model_name": "micro",
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}})
    pretrainer = build_pretrainer(config)
    rng = np.random.default_rng(seed)
    for variable in pretrainer.weights:
        variable.assign(variable.numpy() + 0.05 * rng.standard_normal(variable.shape).astype("float32"))
    return config, pretrainer


def test_a_half_precision_checkpoint_written_without_tensorflow_restores_widened(tmp_path):
    """What a JAX run writes (float16 weights, checkpoint_bundle, no TensorFlow): a model folder whose state file
    names its checkpoints, restored into float32 variables through the one restore_weights; a TF run's own
    checkpoints stay float32."""
    import numpy as np
    import tensorflow as tf

    config, pretrainer = micro_pretrainer(seed=1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    folder = tmp_path / "run"
    for step in (3, 6):
        half = {v.path: (v.numpy() + step).astype(np.float16) for v in pretrainer.weights}
        prefix = model_folder.write_weights_checkpoint(folder, step, half, config, vocab)
    assert model_folder.latest_checkpoint(folder) == prefix == str(folder / "ckpt-6")
    state = tf.train.get_checkpoint_state(str(folder))
    assert list(state.all_model_checkpoint_paths) == [str(folder / "ckpt-3"), str(folder / "ckpt-6")]
    assert model_folder.read_config(folder) == config and model_folder.find_vocab(folder).name == "vocab.txt"
    assert {dtype.name for _, dtype in tf.train.load_checkpoint(prefix).get_variable_to_dtype_map().items()} >= {
        "float16"}
    _, fresh = micro_pretrainer(seed=2)
    model_folder.restore_weights(fresh, prefix)
    assert all(v.dtype == "float32" and np.array_equal(v.numpy(), half[v.path].astype(np.float32))
               for v in fresh.weights)
    model_folder.write_weights(pretrainer, tmp_path / "tf" / "ckpt")
    assert not model_folder.holds_half_precision_weights(tmp_path / "tf" / "ckpt")
    assert model_folder.holds_half_precision_weights(prefix)


def test_a_half_precision_checkpoint_of_another_model_or_damaged_is_one_line(tmp_path):
    import numpy as np

    config, pretrainer = micro_pretrainer(seed=1)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    half = {v.path: v.numpy().astype(np.float16) for v in pretrainer.weights}
    half.pop("electra/embeddings/LayerNorm/beta")
    prefix = model_folder.write_weights_checkpoint(tmp_path / "run", 4, half, config, vocab)
    with pytest.raises(InputError, match=r"^--init-checkpoint .*ckpt-4: its weights do not match this model \("
                                         r"missing \['electra/embeddings/LayerNorm/beta'\]\); use the same"):
        model_folder.restore_weights(pretrainer, prefix)
    data = tmp_path / "run" / "ckpt-4.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(InputError, match=rf"^{data}: damaged \(.*\), so --init-checkpoint {prefix} cannot be read; "
                                         f"no complete checkpoint is in {tmp_path / 'run'}"):
        model_folder.restore_weights(pretrainer, prefix)
