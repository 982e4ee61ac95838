"""The matmul_dtype option (model/matmul.py): "float32" (the default) is the code before the option bit for bit;
"bfloat16" gives a micro encoder's outputs within bfloat16 rounding of float32's, changes no weight or its name (a
checkpoint written under either setting restores under the other), does nothing under mixed_bfloat16, and works
the same under JAX; the fine-tuning and pretraining configs take it and refuse other values in one line."""
import json
import pathlib
import textwrap

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BF16_ROUNDOFF = 2.0 ** -8  # bfloat16 keeps 8 significant bits: one rounding is off by at most this, relatively
MICRO = dict(vocab_size=60, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, embedding_size=16,
             max_position_embeddings=32)  # embedding_size 16: the embeddings projection is a Dense too


def micro_batch(seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((4, 16), "int32")
    mask[1, 7:] = 0
    return {"input_ids": rng.integers(4, 60, (4, 16)).astype("int32"), "input_mask": mask,
            "segment_ids": np.zeros((4, 16), "int32")}


def micro_model(seed=0, dtype=None, matmul_dtype="float32"):
    """A micro encoder and discriminator head, set to `matmul_dtype`."""
    from model.encoder import BertEncoder
    from model.heads import DiscriminatorHead
    from model.matmul import set_matmul_dtype

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(**MICRO, matmul_dtype=matmul_dtype, dtype=dtype)
    head = DiscriminatorHead(MICRO["hidden_size"], dtype=dtype)
    set_matmul_dtype(head, matmul_dtype)
    return encoder, head


def outputs(encoder, head, batch, **call):
    sequence = encoder(batch, **call)
    return (ops.convert_to_numpy(ops.cast(sequence, "float32")),
            ops.convert_to_numpy(ops.cast(head(sequence), "float32")))


def test_default_dense_is_keras_dense_bit_for_bit():
    from model.matmul import Dense

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 24)).astype("float32")
    ours = Dense(40, activation="gelu", name="dense")
    theirs = keras.layers.Dense(40, activation="gelu", name="dense")
    ours.build(x.shape)
    theirs.build(x.shape)
    for mine, other in zip(ours.weights, theirs.weights):
        other.assign(mine)
    np.testing.assert_array_equal(ops.convert_to_numpy(ours(x)), ops.convert_to_numpy(theirs(x)))
    assert ours.get_config()["matmul_dtype"] == "float32"
    assert Dense.from_config({**ours.get_config(), "matmul_dtype": "bfloat16"}).matmul_dtype == "bfloat16"


@pytest.mark.parametrize("training", [False, True])
def test_float32_is_the_code_before_the_option_bit_for_bit(monkeypatch, training):
    """The default's outputs equal those of the same weights with every Dense running keras' own call (the code
    before the option), and setting bfloat16 then float32 back on a built model returns to them exactly."""
    from model import elementwise_gradients, matmul

    # keras' own GELU in training too: the hand-written gradient's forward rounds differently (its own test)
    monkeypatch.setenv(elementwise_gradients.ENV, "autodiff")
    encoder, head = micro_model()
    batch = micro_batch()
    call = dict(training=training, use_fused_attention=False)
    seeds = [ops.convert_to_numpy(v) for v in encoder.non_trainable_variables]  # the dropout layers' seed states

    def run():
        for variable, value in zip(encoder.non_trainable_variables, seeds):  # training: the same dropout masks
            variable.assign(value)
        return outputs(encoder, head, batch, **call)

    default = run()
    with monkeypatch.context() as patch:
        patch.setattr(matmul.Dense, "call", keras.layers.Dense.call)
        before = run()
    matmul.set_matmul_dtype(encoder, "bfloat16")
    matmul.set_matmul_dtype(encoder, "float32")
    toggled = run()
    for ours, reference in ((default, before), (default, toggled)):
        for a, b in zip(ours, reference):
            np.testing.assert_array_equal(a, b)


def test_bfloat16_operands_stay_within_bfloat16_rounding_of_float32():
    """The sequence output is LayerNorm's (unit scale): each product's operands are rounded once to bfloat16, in
    two layers' six products and the embeddings projection, so 8 unit roundoffs bound its difference (measured
    about 3-4 on three seeds, under TensorFlow and JAX); the logits within 8 unit roundoffs of their largest
    (measured about 1.5)."""
    from model.matmul import set_matmul_dtype

    encoder, head = micro_model()
    batch = micro_batch()
    sequence, logits = outputs(encoder, head, batch)
    # per layer the attention (Q/K/V in one product) and its 3 Dense, the attention output and FFN in and out; + 1:
    # the embeddings projection
    assert set_matmul_dtype(encoder, "bfloat16") == 7 * MICRO["num_layers"] + 1
    set_matmul_dtype(head, "bfloat16")
    sequence_bf16, logits_bf16 = outputs(encoder, head, batch)
    assert sequence_bf16.dtype == logits_bf16.dtype == np.float32
    assert np.abs(sequence_bf16 - sequence).max() > 0  # the option does change the arithmetic
    np.testing.assert_allclose(sequence_bf16, sequence, rtol=0, atol=8 * BF16_ROUNDOFF)
    np.testing.assert_allclose(logits_bf16, logits, rtol=0, atol=8 * BF16_ROUNDOFF * np.abs(logits).max())


def test_config_round_trip_and_mixed_bfloat16_ignores_the_option():
    from model.encoder import BertEncoder

    encoder, _ = micro_model(matmul_dtype="bfloat16")
    config = encoder.get_config()
    assert config["matmul_dtype"] == "bfloat16"
    clone = BertEncoder.from_config(config)
    assert clone.transformer_layers[1].intermediate_dense.matmul_dtype == "bfloat16"
    assert clone.transformer_layers[0].attention_self.key.matmul_dtype == "bfloat16"
    assert micro_model()[0].get_config()["matmul_dtype"] == "float32"
    batch = micro_batch()
    plain = outputs(*micro_model(dtype="mixed_bfloat16"), batch)
    option = outputs(*micro_model(dtype="mixed_bfloat16", matmul_dtype="bfloat16"), batch)
    for a, b in zip(plain, option):  # its matmuls already take bfloat16 operands: nothing changes
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="matmul_dtype 'float16' is not one of float32, bfloat16"):
        BertEncoder(**MICRO, matmul_dtype="float16")


@pytest.mark.parametrize("saved, loaded", [("bfloat16", "float32"), ("float32", "bfloat16")])
def test_a_checkpoint_written_under_one_setting_restores_under_the_other(tmp_path, saved, loaded):
    from finetune.pretrained import restore_by_path
    from storage.model_folder import write_weights

    writer, _ = micro_model(seed=0, matmul_dtype=saved)
    writer(micro_batch())
    write_weights(writer, tmp_path / "ckpt")
    reader, _ = micro_model(seed=5, matmul_dtype=loaded)
    reader(micro_batch())
    assert [v.path for v in reader.weights] == [v.path for v in writer.weights]
    restore_by_path(reader, str(tmp_path / "ckpt"))
    for a, b in zip(reader.weights, writer.weights):
        np.testing.assert_array_equal(ops.convert_to_numpy(a), ops.convert_to_numpy(b))
    assert reader.get_config()["matmul_dtype"] == loaded


def test_the_finetuning_config_takes_it_and_refuses_other_values():
    from common.errors import InputError
    from configs.finetuning_config import FinetuningConfig

    assert FinetuningConfig.create({}).matmul_dtype == "float32"
    assert FinetuningConfig.create('{"matmul_dtype": "bfloat16"}').matmul_dtype == "bfloat16"
    with pytest.raises(InputError) as error:
        FinetuningConfig.create({"matmul_dtype": "bf16"})
    assert str(error.value) == "fine-tuning config: matmul_dtype 'bf16' is not one of float32, bfloat16"


JAX_SCRIPT = textwrap.dedent('''
    import json
    import keras
    import numpy as np
    from keras import ops
    from model.encoder import BertEncoder
    from model.heads import DiscriminatorHead
    from model.matmul import set_matmul_dtype

    keras.utils.set_random_seed(0)
    encoder, head = BertEncoder(**json.loads(MICRO)), DiscriminatorHead(32)
    rng = np.random.default_rng(0)
    mask = np.ones((4, 16), "int32")
    mask[1, 7:] = 0
    batch = {"input_ids": rng.integers(4, 60, (4, 16)).astype("int32"), "input_mask": mask,
             "segment_ids": np.zeros((4, 16), "int32")}

    def outputs():
        sequence = encoder(batch)
        return ops.convert_to_numpy(sequence), ops.convert_to_numpy(head(sequence))

    sequence, logits = outputs()
    for model in (encoder, head):
        set_matmul_dtype(model, "bfloat16")
    sequence_bf16, logits_bf16 = outputs()
    for model in (encoder, head):
        set_matmul_dtype(model, "float32")
    again = outputs()
    print("RESULTS" + json.dumps({
        "dtype": str(sequence_bf16.dtype),
        "sequence": float(np.abs(sequence_bf16 - sequence).max()),
        "logits": float(np.abs(logits_bf16 - logits).max()), "largest_logit": float(np.abs(logits).max()),
        "back_to_float32_equal": bool(np.array_equal(again[0], sequence) and np.array_equal(again[1], logits))}))
''')


def test_under_jax_too():
    results = run_script_under_jax(f"MICRO = {json.dumps(json.dumps(MICRO))}\n" + JAX_SCRIPT, REPO_ROOT)
    assert results["dtype"] == "float32" and results["back_to_float32_equal"]
    assert 0 < results["sequence"] <= 8 * BF16_ROUNDOFF
    assert results["logits"] <= 8 * BF16_ROUNDOFF * results["largest_logit"]


def test_pretraining_takes_it_too():
    """PretrainingConfig.matmul_dtype reaches every dense layer, attention and the generator's vocabulary matmul
    of the pretrainer; its losses stay within bfloat16 rounding of float32's (the MLM loss is a log-softmax over
    logits each off by a few roundoffs: 1% is ample, measured under 0.01%); a bad value is one line."""
    from common.errors import InputError
    from model.matmul import matmul_dtype_of
    from tests.model_fixtures import NO_DROPOUT, fixed_masking, tiny_batch, tiny_config, tiny_pretrainer

    reference = tiny_pretrainer(**NO_DROPOUT)
    option = tiny_pretrainer(**NO_DROPOUT, matmul_dtype="bfloat16")
    assert matmul_dtype_of(reference) == "float32" and option.generator_head.matmul_dtype == "bfloat16"
    assert all(layer.matmul_dtype == "bfloat16" for layer in option._flatten_layers() if hasattr(layer, "matmul_dtype"))
    assert [v.path for v in option.weights] == [v.path for v in reference.weights]
    option.set_weights(reference.get_weights())
    batch = tiny_batch()
    masked = fixed_masking(batch)
    sampled = np.array([[5, 7], [9, 55], [11, 12], [10, 21]], "int32")
    expected, got = (model.compute_losses(batch, masked_inputs=masked, sampled_ids=sampled)
                     for model in (reference, option))
    for name in ("mlm", "disc"):
        value, want = float(getattr(got, name).loss), float(getattr(expected, name).loss)
        assert value != want and value == pytest.approx(want, rel=0.01), name
    with pytest.raises(InputError, match="pretraining config: matmul_dtype 'fp16' is not one of float32, bfloat16"):
        tiny_config(matmul_dtype="fp16")
