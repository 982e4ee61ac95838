"""storage/checkpoint_bundle.py (and common/crc32c.py): TensorFlow's checkpoint files written and read with NumPy
alone, checked against TensorFlow's own writer and reader (installed here; the GPU machine has none)."""
import numpy as np
import pytest

from common.errors import InputError
from storage import checkpoint_bundle as bundle


@pytest.fixture(scope="module")
def micro_pretrainer():
    """A one-layer micro pretrainer with every weight moved off its initial value."""
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from tests.checkpoint_fixtures import randomise
    from tests.helpers import MICRO_MODEL

    config = PretrainingConfig.create({"model_size": "electra_tiny", "model_name": "micro",
                                       "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}})
    pretrainer = build_pretrainer(config)
    randomise(pretrainer, seed=3)
    return config, pretrainer


def weights_of(model):
    return {variable.path: variable.numpy() for variable in model.weights}


def fresh_model(config):
    from pretrain.builder import build_pretrainer

    return build_pretrainer(config)


def object_graph(prefix):
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(str(prefix)).get_tensor(bundle.OBJECT_GRAPH_KEY))
    return graph


def test_crc32c_matches_the_standard_check_value_and_the_byte_loop_on_long_buffers():
    from common import crc32c

    assert crc32c.crc32c(b"123456789") == 0xE3069283  # CRC-32C's published check value
    data = np.random.default_rng(0).integers(0, 256, 1_000_003, dtype=np.uint8)  # many lanes and a tail
    by_bytes = crc32c._scalar_register(data.tobytes(), 0xFFFFFFFF) ^ 0xFFFFFFFF
    assert crc32c.crc32c(data) == by_bytes
    assert crc32c.crc32c(data[500_000:], crc32c.crc32c(data[:500_000])) == by_bytes  # continued


def test_the_model_weights_are_the_bytes_tensorflow_writes_and_restore_into_a_fresh_model(tmp_path,
                                                                                         micro_pretrainer):
    import tensorflow as tf
    from storage.model_folder import restore_weights, write_weights

    config, pretrainer = micro_pretrainer
    write_weights(pretrainer, tmp_path / "tf" / "ckpt")
    ours = bundle.write_model_weights(tmp_path / "ours" / "ckpt", weights_of(pretrainer))
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / "ours" / f"ckpt{suffix}").read_bytes() == (tmp_path / "tf" / f"ckpt{suffix}").read_bytes()
    assert tf.train.list_variables(str(ours)) == tf.train.list_variables(str(tmp_path / "tf" / "ckpt"))
    assert object_graph(ours) == object_graph(tmp_path / "tf" / "ckpt")
    model = fresh_model(config)
    restore_weights(model, str(ours))
    assert all(np.array_equal(variable.numpy(), pretrainer_variable.numpy())
               for variable, pretrainer_variable in zip(model.weights, pretrainer.weights))


def test_sharded_data_files_hold_whole_tensors_and_restore(tmp_path, micro_pretrainer):
    from storage.model_folder import restore_weights

    config, pretrainer = micro_pretrainer
    weights = weights_of(pretrainer)
    prefix = bundle.write_model_weights(tmp_path / "ckpt", weights, max_shard_bytes=600_000)
    files = bundle.data_files(prefix)
    assert len(files) >= 3 and [f.name for f in files][-1] == f"ckpt.data-{len(files) - 1:05d}-of-{len(files):05d}"
    largest = max(value.nbytes for value in weights.values())  # the word embeddings, over the limit: a file alone
    assert all(f.stat().st_size <= max(600_000, largest + 8) for f in files)
    model = fresh_model(config)
    restore_weights(model, str(prefix))
    assert all(np.array_equal(variable.numpy(), weights[variable.path]) for variable in model.weights)
    assert all(np.array_equal(value, weights[path]) for path, value in bundle.read_model_weights(prefix).items())


def test_every_dtype_and_a_many_block_index_are_the_bytes_tensorflow_saves(tmp_path):
    """tf.raw_ops.SaveV2 of the same tensors in the same order: index (over 256 KiB, so several table blocks)
    and data byte for byte; TensorFlow's reader and ours read each other's."""
    import ml_dtypes
    import tensorflow as tf

    rng = np.random.default_rng(1)
    tensors = {f"layer_{i:04d}/{'x' * 80}/value": rng.standard_normal(3).astype(np.float32) for i in range(3000)}
    tensors.update({"half": rng.standard_normal((2, 3)).astype(np.float16),
                    "brain": rng.standard_normal(5).astype(ml_dtypes.bfloat16), "int32": np.arange(4, dtype=np.int32),
                    "int64": np.array(7, np.int64), "seed": np.array([1, 2 ** 32 - 1], np.uint32), "text": b"hello"})
    tf.raw_ops.SaveV2(prefix=str(tmp_path / "tf" / "ckpt"), tensor_names=list(tensors),
                      shape_and_slices=[""] * len(tensors), tensors=[tf.constant(v) for v in tensors.values()])
    bundle.write_bundle(tmp_path / "ours" / "ckpt", tensors)
    index = (tmp_path / "ours" / "ckpt.index").read_bytes()
    assert len(index) > 262144 and index == (tmp_path / "tf" / "ckpt.index").read_bytes()
    assert (tmp_path / "ours" / "ckpt.data-00000-of-00001").read_bytes() == \
        (tmp_path / "tf" / "ckpt.data-00000-of-00001").read_bytes()
    theirs = bundle.read_bundle(tmp_path / "tf" / "ckpt")
    reader = tf.train.load_checkpoint(str(tmp_path / "ours" / "ckpt"))
    for key, value in tensors.items():
        if isinstance(value, bytes):
            assert theirs[key] == value == reader.get_tensor(key)
        else:
            assert theirs[key].dtype == value.dtype and np.array_equal(theirs[key], value)
            assert np.array_equal(reader.get_tensor(key), value)
    assert bundle.list_bundle(tmp_path / "tf" / "ckpt")["seed"] == ("uint32", (2,))


def test_our_reader_reads_what_tensorflow_wrote_for_a_model(tmp_path, micro_pretrainer):
    from storage.model_folder import write_weights

    _, pretrainer = micro_pretrainer
    write_weights(pretrainer, tmp_path / "ckpt")
    read = bundle.read_model_weights(tmp_path / "ckpt")
    assert list(read) == sorted(weights_of(pretrainer), key=bundle.weight_key)
    assert all(np.array_equal(read[path], value) for path, value in weights_of(pretrainer).items())
    assert set(bundle.model_weight_dtypes(tmp_path / "ckpt").values()) == {"float32"}


def damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[:len(data) // 2]))
    else:
        data[len(data) // 2] ^= 0x40
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("suffix,how", [(".data-00000-of-00001", "truncate"), (".data-00000-of-00001", "flip"),
                                        (".index", "flip"), (".index", "truncate")])
def test_a_damaged_file_is_one_line_naming_it(tmp_path, suffix, how):
    values = {"a": np.arange(1000, dtype=np.float32), "b": np.ones((10, 10), np.float16)}
    prefix = bundle.write_model_weights(tmp_path / "ckpt", values)
    damage(tmp_path / f"ckpt{suffix}", how)
    with pytest.raises(InputError, match=rf"^{tmp_path / 'ckpt'}{suffix}: damaged \(.*\); copy the checkpoint's "
                                         "files here again$"):
        bundle.read_model_weights(prefix)


def test_a_missing_data_file_names_it(tmp_path):
    prefix = bundle.write_model_weights(tmp_path / "ckpt", {"a": np.zeros(3, np.float32)})
    (tmp_path / "ckpt.data-00000-of-00001").unlink()
    with pytest.raises(InputError, match=r"ckpt.data-00000-of-00001: cannot be read"):
        bundle.read_model_weights(prefix)
