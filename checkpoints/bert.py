"""google-research/bert checkpoints: a model folder's main encoder as a BERT drop-in (bert/… names,
bert_config.json, vocab.txt), written in TF1's name-based format (checkpoints.tf1). Export only: a BERT
checkpoint holds no ELECTRA heads to import.
"""
import json
import shutil

from checkpoints import names as names_lib
from checkpoints.tf1 import write_tf1_checkpoint
from common.atomic import atomic_output_dir
from common.errors import InputError

BERT_CHECKPOINT = "bert_model.ckpt"  # google-research/bert's release name
BERT_LAYER_NORM_EPSILON = 1e-12  # BERT fixes it


def bert_config(encoder):
    """google-research/bert's bert_config.json of one encoder (its LayerNorm epsilon is fixed at 1e-12)."""
    return {"attention_probs_dropout_prob": encoder.attention_dropout, "hidden_act": "gelu",
            "hidden_dropout_prob": encoder.dropout_rate, "hidden_size": encoder.hidden_size,
            "initializer_range": encoder.initializer_range, "intermediate_size": encoder.intermediate_size,
            "max_position_embeddings": encoder.max_position_embeddings,
            "num_attention_heads": encoder.num_heads, "num_hidden_layers": encoder.num_layers,
            "type_vocab_size": encoder.type_vocab_size, "vocab_size": encoder.vocab_size}


def export_bert(model, output, overwrite=False):
    """bert/… names, bert_config.json and vocab.txt of a loaded model folder
    (pretrain.loaded_folder.ModelFolder); only when embedding size = hidden size. Returns the tensor count."""
    encoder = model.main_encoder
    if encoder.embedding_size != encoder.hidden_size:
        raise InputError(
            f"--format bert: this model's embeddings are {encoder.embedding_size} wide and its hidden size is "
            f"{encoder.hidden_size}, and BERT has no place for the projection that follows the embedding "
            "LayerNorm (it cannot be folded into BERT's embeddings); use --format tf1 or --format hf instead")
    if model.is_sentencepiece:
        raise InputError(f"--format bert: BERT checkpoints carry a WordPiece vocab.txt and this model uses the "
                         f"SentencePiece model {model.vocab_file.name}; use --format tf1 or --format hf instead")
    if abs(encoder.layer_norm_epsilon - BERT_LAYER_NORM_EPSILON) > 1e-15:
        raise InputError(f"--format bert: BERT fixes the LayerNorm epsilon at 1e-12 and this model uses "
                         f"{encoder.layer_norm_epsilon}; use --format tf1 or --format hf instead")
    tensors = names_lib.bert_tensors(names_lib.export_tensors(model.pretrainer))
    with atomic_output_dir(output, overwrite) as temp:
        write_tf1_checkpoint(temp, BERT_CHECKPOINT, tensors, model.step)
        (temp / "bert_config.json").write_text(json.dumps(bert_config(encoder), indent=2, sort_keys=True) + "\n",
                                               encoding="utf-8")
        shutil.copyfile(model.vocab_file, temp / "vocab.txt")
    return len(tensors)
