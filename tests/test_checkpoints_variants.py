"""Round trips of every pretraining variant through the TF1 and Hugging Face exports (micro models).

The import must infer each variant from the tensors alone (shared, untied or gradient-disentangled
generator embeddings; a generator that is the discriminator; MLM-only; no generator network) and give
back the same weights.
"""
import numpy as np
import pytest

from tests.checkpoint_fixtures import model_folder, weights
from tests.model_fixtures import VOCAB_SIZE

SHAPE_FLAGS = ("electra_objective", "untied_generator", "untied_generator_embeddings", "gdes_embeddings",
               "two_tower_generator", "electric_objective")


def import_back(export, model, root, tokenizer, fmt):
    from checkpoints.import_weights import open_source
    from checkpoints.source_model import import_weights

    export(model, root / fmt)
    return import_weights(open_source(root / fmt), root / "models" / f"from_{fmt}", tokenizer,
                          say=lambda _: None)


VARIANTS = {
    "untied_generator_embeddings": {"untied_generator_embeddings": True},
    "mlm_only": {"electra_objective": False},
    "generator_is_discriminator": {"untied_generator": False},
    "electric": {"electric_objective": True},
    "electric_untied_generator_embeddings": {"electric_objective": True, "untied_generator_embeddings": True},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_tf1_round_trip_of_variant(tmp_path, tokenizer, variant):
    from checkpoints.tf1 import export_tf1

    model = model_folder(tmp_path, tokenizer, **VARIANTS[variant])
    (tmp_path / "tf1").mkdir()  # an empty output folder is fine without --overwrite
    config, imported = import_back(export_tf1, model, tmp_path, tokenizer, "tf1")
    original = weights(model.pretrainer)
    assert {k: v.tolist() for k, v in weights(imported).items()} == {k: v.tolist() for k, v in original.items()}
    assert [getattr(config, flag) for flag in SHAPE_FLAGS] == [getattr(model.config, flag) for flag in SHAPE_FLAGS]


def test_electric_tf1_export_without_its_config_is_inferred_from_the_tensors(tmp_path, tokenizer):
    """generator_ltr/ + generator_rtl/ + cloze_predictions/ → electric_objective (the original builds two
    towers for Electric only); the HF export holds the discriminator alone (no Hugging Face class for the
    towers)."""
    from checkpoints.hf import export_hf
    from checkpoints.tf1 import export_tf1
    from checkpoints.import_weights import open_source
    from checkpoints.source_model import import_weights
    from checkpoints.tf1 import CONFIG_COPY

    model = model_folder(tmp_path, tokenizer, electric_objective=True)
    export_tf1(model, tmp_path / "tf1")
    (tmp_path / "tf1" / CONFIG_COPY).unlink()
    config, imported = import_weights(open_source(tmp_path / "tf1"), tmp_path / "models" / "inferred", tokenizer,
                                      say=lambda _: None)
    assert config.electric_objective and config.two_tower_generator
    original, back = weights(model.pretrainer), weights(imported)
    assert set(back) == set(original) and all(np.array_equal(original[k], back[k]) for k in original)
    assert export_hf(model, tmp_path / "hf") == ["discriminator"]


def test_hf_round_trip_of_untied_generator_embeddings(tmp_path, tokenizer):
    from checkpoints.hf import export_hf

    model = model_folder(tmp_path, tokenizer, untied_generator_embeddings=True)
    config, imported = import_back(export_hf, model, tmp_path, tokenizer, "hf")
    assert config.untied_generator_embeddings
    original, back = weights(model.pretrainer), weights(imported)
    assert set(back) == set(original) and all(np.array_equal(original[k], back[k]) for k in original)


@pytest.mark.parametrize("fmt", ["tf1", "hf"])
def test_gdes_exports_each_towers_table_and_imports_back(tmp_path, tokenizer, fmt):
    from checkpoints import hf, tf1
    from checkpoints.names import export_tensors

    model = model_folder(tmp_path, tokenizer, gdes_embeddings=True)
    discriminator = model.pretrainer.discriminator
    shared = discriminator.embeddings.word_embeddings.numpy()
    merged = shared + discriminator.word_embeddings_delta.numpy()
    tensors = export_tensors(model.pretrainer)
    assert np.array_equal(tensors["electra/embeddings/word_embeddings"], merged)
    assert np.array_equal(tensors["generator/embeddings/word_embeddings"], shared)
    export = tf1.export_tf1 if fmt == "tf1" else hf.export_hf
    config, imported = import_back(export, model, tmp_path, tokenizer, fmt)
    assert config.gdes_embeddings
    np.testing.assert_array_equal(imported.generator.embeddings.word_embeddings.numpy(), shared)
    np.testing.assert_allclose(np.asarray(imported.discriminator.merged_word_embeddings()), merged, atol=1e-6)
    original, back = weights(model.pretrainer), weights(imported)
    same = [k for k in original if "word_embeddings" not in k and np.array_equal(original[k], back[k])]
    assert len(same) == len(original) - 2
    if fmt == "hf":  # the discriminator alone: a plain model with the merged table (what fine-tuning reads)
        from checkpoints.import_weights import open_source
        from checkpoints.source_model import import_weights

        config, plain = import_weights(open_source(tmp_path / "hf" / "discriminator"), tmp_path / "models" / "plain",
                                       tokenizer, say=lambda _: None)
        assert not config.gdes_embeddings
        np.testing.assert_array_equal(plain.discriminator.embeddings.word_embeddings.numpy(), merged)


def test_discriminator_only_checkpoint_gets_a_fresh_generator(tmp_path, tokenizer):
    from checkpoints.tf1 import export_tf1

    model = model_folder(tmp_path, tokenizer, uniform_generator=True)  # no generator network
    messages = []
    from checkpoints.import_weights import open_source
    from checkpoints.source_model import import_weights

    export_tf1(model, tmp_path / "tf1")
    (tmp_path / "tf1" / "electra_config.json").unlink()  # as an outside discriminator-only checkpoint
    config, imported = import_weights(open_source(tmp_path / "tf1"), tmp_path / "models" / "back", tokenizer,
                                      say=messages.append)
    assert config.electra_objective and config.untied_generator and not config.uniform_generator
    assert any("no generator" in message for message in messages)
    original, back = weights(model.pretrainer), weights(imported)
    assert all(np.array_equal(original[k], back[k]) for k in original)
    assert any(k.startswith("generator/") for k in back)


def test_finetuning_reads_a_gdes_folder_as_the_discriminator_saw_it(tmp_path, tokenizer):
    """Fine-tuning gets one plain word table: shared + residual, so its encoder computes what pretraining's did."""
    from finetune.pretrained import load_encoder, read_model_folder

    model = model_folder(tmp_path, tokenizer, gdes_embeddings=True)
    discriminator = model.pretrainer.discriminator
    assert np.abs(discriminator.word_embeddings_delta.numpy()).max() > 0.01  # a residual that matters
    encoder = load_encoder(read_model_folder(tmp_path / "models" / "original"))
    assert not encoder.gdes_embeddings
    assert len(encoder.weights) == len(discriminator.weights) - 1  # every weight but the residual
    np.testing.assert_allclose(encoder.embeddings.word_embeddings.numpy(),
                               np.asarray(discriminator.merged_word_embeddings()), atol=1e-6)
    rng = np.random.default_rng(1)
    inputs = {"input_ids": rng.integers(5, VOCAB_SIZE, (2, 12)).astype("int32"),
              "input_mask": np.ones((2, 12), "int32"), "segment_ids": np.zeros((2, 12), "int32")}
    np.testing.assert_allclose(np.asarray(encoder(inputs)), np.asarray(discriminator(inputs)), atol=1e-5)
