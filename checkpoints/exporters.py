"""Exports of a pretrained model folder: TF1-named ELECTRA, BERT drop-in, Hugging Face, keras-hub.

Each takes a storage.model_folder.ModelFolder and writes one output folder atomically.
"""
import json
import shutil

from checkpoints import hf as hf_lib
from checkpoints import names as names_lib
from common.atomic import atomic_output_dir
from checkpoints.tf1 import CONFIG_COPY, write_tf1_checkpoint
from common.errors import InputError
from data.tokenization import load_tokenizer
from storage import model_folder

TF1_CHECKPOINT = "model.ckpt-{step}"  # what the original's TPUEstimator wrote
BERT_CHECKPOINT = "bert_model.ckpt"  # google-research/bert's release name


def main_encoder(pretrainer):
    """The encoder named "electra": the discriminator, or the MLM-only model."""
    return pretrainer.discriminator if pretrainer.discriminator is not None else pretrainer.generator


def _tokenizer(model):
    if model.is_sentencepiece:
        return load_tokenizer(spm_model=model.vocab_file, lower_case=model.config.do_lower_case)
    return load_tokenizer(vocab_file=model.vocab_file, lower_case=model.config.do_lower_case)


def export_tf1(model, output, overwrite=False):
    """The original's names for discriminator and generator, global_step, the vocabulary and our config."""
    tensors = names_lib.export_tensors(model.pretrainer)
    with atomic_output_dir(output, overwrite) as temp:
        write_tf1_checkpoint(temp, TF1_CHECKPOINT.format(step=model.step), tensors, model.step)
        model_folder.copy_vocab(temp, model.vocab_file)  # named as in a model folder: the import finds it there
        model.config.save(temp / CONFIG_COPY)
    return len(tensors)


def bert_config(encoder):
    """google-research/bert's bert_config.json of one encoder (its LayerNorm epsilon is fixed at 1e-12)."""
    return {"attention_probs_dropout_prob": encoder.attention_dropout, "hidden_act": "gelu",
            "hidden_dropout_prob": encoder.dropout_rate, "hidden_size": encoder.hidden_size,
            "initializer_range": encoder.initializer_range, "intermediate_size": encoder.intermediate_size,
            "max_position_embeddings": encoder.max_position_embeddings,
            "num_attention_heads": encoder.num_heads, "num_hidden_layers": encoder.num_layers,
            "type_vocab_size": encoder.type_vocab_size, "vocab_size": encoder.vocab_size}


def export_bert(model, output, overwrite=False):
    """bert/… names, bert_config.json and vocab.txt; only when embedding size = hidden size."""
    encoder = main_encoder(model.pretrainer)
    if encoder.embedding_size != encoder.hidden_size:
        raise InputError(
            f"--format bert: this model's embeddings are {encoder.embedding_size} wide and its hidden size is "
            f"{encoder.hidden_size}, and BERT has no place for the projection that follows the embedding "
            "LayerNorm (it cannot be folded into BERT's embeddings); use --format tf1 or --format hf instead")
    if model.is_sentencepiece:
        raise InputError(f"--format bert: BERT checkpoints carry a WordPiece vocab.txt and this model uses the "
                         f"SentencePiece model {model.vocab_file.name}; use --format tf1 or --format hf instead")
    if abs(encoder.layer_norm_epsilon - 1e-12) > 1e-15:
        raise InputError(f"--format bert: BERT fixes the LayerNorm epsilon at 1e-12 and this model uses "
                         f"{encoder.layer_norm_epsilon}; use --format tf1 or --format hf instead")
    tensors = names_lib.bert_tensors(names_lib.export_tensors(model.pretrainer))
    with atomic_output_dir(output, overwrite) as temp:
        write_tf1_checkpoint(temp, BERT_CHECKPOINT, tensors, model.step)
        (temp / "bert_config.json").write_text(json.dumps(bert_config(encoder), indent=2, sort_keys=True) + "\n",
                                               encoding="utf-8")
        shutil.copyfile(model.vocab_file, temp / "vocab.txt")
    return len(tensors)


def export_hf(model, output, overwrite=False):
    """<output>/discriminator (ElectraForPreTraining) and <output>/generator (ElectraForMaskedLM)."""
    pretrainer = model.pretrainer
    encoders = {"discriminator": pretrainer.discriminator, "generator": pretrainer.generator}
    pad_id = _tokenizer(model).special_ids.pad
    models = names_lib.hf_models(names_lib.export_tensors(pretrainer))
    with atomic_output_dir(output, overwrite) as temp:
        for tower, tensors in models.items():
            config = hf_lib.hf_config(encoders[tower], hf_lib.ARCHITECTURES[tower], pad_id)
            hf_lib.write_hf_folder(temp / tower, tensors, config, model.vocab_file, model.config.do_lower_case)
    return sorted(models)


def export_keras_hub(model, output, overwrite=False):
    """A keras-hub preset of the main encoder (ElectraBackbone + ElectraTokenizer, written by keras-hub's
    save_to_preset); returns the notes for the user (checkpoints/keras_hub_preset.py)."""
    from checkpoints import keras_hub_preset

    encoder = main_encoder(model.pretrainer)
    keras_hub_preset.check_exportable(model, encoder)
    backbone = keras_hub_preset.build_backbone(encoder, names_lib.export_tensors(model.pretrainer))
    tokenizer = keras_hub_preset.build_tokenizer(_tokenizer(model))
    with atomic_output_dir(output, overwrite) as temp:
        keras_hub_preset.save_preset(temp, backbone, tokenizer)
    return keras_hub_preset.export_notes(encoder)
