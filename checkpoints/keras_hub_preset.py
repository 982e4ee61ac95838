"""keras-hub presets: a model's encoder as keras_hub.models.ElectraBackbone + ElectraTokenizer, and back.

A preset folder is what keras-hub's own `save_to_preset` writes: `config.json` (the serialized
ElectraBackbone), `model.weights.h5`, `tokenizer.json` (the serialized ElectraTokenizer),
`assets/tokenizer/vocabulary.txt` and `metadata.json`. The export builds keras-hub's classes with our
sizes, assigns our weights by name (checkpoints/names.py's keras-hub table) and lets keras-hub write the
files; the import loads a preset with `ElectraBackbone.from_preset` and reads its variables by the same
table. keras-hub is a test extra (requirements-test.txt), imported here only when a preset is written or
read.

What keras-hub's ElectraBackbone (0.32) can and cannot hold, checked against its source:
- embedding size ≠ hidden size: its `embeddings_projection` is ours (exact);
- gradient-disentangled embeddings: the discriminator's merged table is written (exact);
- the pooler: keras-hub has a `pooled_dense` ELECTRA does not; it is written freshly initialised
  (seeded), is not part of the sequence output, and is ignored on import;
- GELU: keras-hub hard-codes the tanh approximation in the feed-forward layers, where we (and the
  original ELECTRA and Hugging Face) use the exact erf form; no preset setting changes it, so the export
  writes the weights exactly and says so (`GELU_NOTE`); see docs/checkpoints.md for the measured effect;
- LayerNorm epsilon: fixed at 1e-12 there; another value is refused;
- a SentencePiece vocabulary: ElectraTokenizer is WordPiece only; refused;
- one dropout rate for hidden states and attention probabilities (training only).
Only the main encoder is written (the discriminator, or the MLM-only model's encoder): keras-hub has no
ELECTRA heads. An import therefore gives the encoder, with a fresh discriminator head and generator.
"""
import json
import pathlib

import numpy as np

from checkpoints import names as names_lib
from common.atomic import atomic_output_dir
from configs.loading import read_json_file
from common.errors import InputError, short_reason

KERAS_HUB_PIN = "keras-hub==0.32.0"
CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
TOKENIZER_CONFIG = "tokenizer.json"
VOCABULARY = pathlib.Path("assets", "tokenizer", "vocabulary.txt")
BACKBONE_CLASS = "keras_hub>ElectraBackbone"
TOKENIZER_CLASS = "keras_hub>ElectraTokenizer"
LAYER_NORM_EPSILON = 1e-12  # keras-hub's ElectraBackbone fixes it
POOLER_SEED = 0
# WordPieceTokenizer settings that are BERT's rules (ours); any other value tokenizes differently.
BERT_TOKENIZER_SETTINGS = {"split": True, "split_on_cjk": True, "suffix_indicator": "##", "oov_token": "[UNK]",
                           "special_tokens_in_strings": False}
GELU_NOTE = ("keras-hub's ElectraBackbone computes GELU with the tanh approximation (this model, like the "
             "original ELECTRA, uses the exact erf form), so its outputs differ slightly from ours; for the "
             "exact function run `for layer in backbone.transformer_layers: "
             "layer._feedforward_intermediate_dense.activation = keras.activations.gelu` after loading")


def import_keras_hub(what):
    """The keras_hub module, or an InputError that says how to install it."""
    try:
        import keras_hub
    except ImportError:
        raise InputError(f"{what} needs keras-hub, which is not installed; pip install {KERAS_HUB_PIN} (pinned "
                         "in requirements-test.txt)") from None
    return keras_hub


# ------------------------------------------------------------------------------------------------ export


def export_keras_hub(model, output, overwrite=False):
    """A keras-hub preset of a loaded model folder's main encoder (ElectraBackbone + ElectraTokenizer,
    written by keras-hub's save_to_preset); returns the notes for the user."""
    encoder = model.main_encoder
    check_exportable(model, encoder)
    backbone = build_backbone(encoder, names_lib.export_tensors(model.pretrainer))
    tokenizer = build_tokenizer(model.tokenizer())
    with atomic_output_dir(output, overwrite) as temp:
        save_preset(temp, backbone, tokenizer)
    return export_notes(encoder)


def check_exportable(model, encoder):
    """InputError (one line naming the folder and the fix) for what keras-hub's classes cannot hold."""
    folder = pathlib.Path(model.checkpoint).parent
    if model.is_sentencepiece:
        raise InputError(f"--format keras_hub: {folder} uses the SentencePiece model {model.vocab_file.name} and "
                         "keras-hub's ElectraTokenizer is WordPiece only; use --format hf (its tokenizer.json "
                         "reads SentencePiece models) instead")
    if abs(encoder.layer_norm_epsilon - LAYER_NORM_EPSILON) > 1e-15:
        raise InputError(f"--format keras_hub: {folder} uses LayerNorm epsilon {encoder.layer_norm_epsilon} and "
                         f"keras-hub's ElectraBackbone fixes it at {LAYER_NORM_EPSILON}; use --format hf or "
                         "--format tf1 instead")


def backbone_config(encoder):
    """ElectraBackbone constructor arguments of one of our BertEncoders."""
    return {"vocab_size": encoder.vocab_size, "num_layers": encoder.num_layers, "num_heads": encoder.num_heads,
            "hidden_dim": encoder.hidden_size, "embedding_dim": encoder.embedding_size,
            "intermediate_dim": encoder.intermediate_size, "dropout": encoder.dropout_rate,
            "max_sequence_length": encoder.max_position_embeddings, "num_segments": encoder.type_vocab_size}


def build_backbone(encoder, tensors):
    """A keras_hub.models.ElectraBackbone holding `tensors` (checkpoints.names.export_tensors) of the main
    encoder `encoder`; its pooled_dense gets keras-hub's initialiser with a fixed seed."""
    import keras

    keras_hub = import_keras_hub("--format keras_hub")
    backbone = keras_hub.models.ElectraBackbone(**backbone_config(encoder), dtype="float32")
    variables = {variable.path: variable for variable in backbone.weights}
    for name, array in tensors.items():
        path = names_lib.keras_hub_path(name)
        if path is None:
            if name.startswith(f"{names_lib.DISCRIMINATOR}/"):
                raise RuntimeError(f"no keras-hub name for {name}")  # the table in names.py is incomplete
            continue
        variable = variables.pop(path)
        variable.assign(np.reshape(array, variable.shape))
    pooler = sorted(path for path in variables if path.startswith(names_lib.KERAS_HUB_POOLER))
    if set(variables) != set(pooler):
        raise RuntimeError(f"keras-hub variables left unassigned: {sorted(set(variables) - set(pooler))}")
    initializer = keras.initializers.TruncatedNormal(stddev=encoder.initializer_range, seed=POOLER_SEED)
    for path in pooler:
        variable = variables[path]
        variable.assign(initializer(variable.shape) if path.endswith("/kernel") else np.zeros(variable.shape))
    return backbone


def build_tokenizer(tokenizer):
    """keras_hub.models.ElectraTokenizer with our WordPiece vocabulary (ids as ours) and casing."""
    keras_hub = import_keras_hub("--format keras_hub")
    vocabulary = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    return keras_hub.models.ElectraTokenizer(vocabulary=vocabulary, lowercase=tokenizer.lower_case,
                                             strip_accents=tokenizer.strip_accents)


def exact_gelu(backbone):
    """Makes a loaded ElectraBackbone compute GELU exactly, as ours does (the line GELU_NOTE gives users);
    returns it. Attribute names of keras-hub 0.32's TransformerEncoder."""
    import keras

    for layer in backbone.transformer_layers:
        layer._feedforward_intermediate_dense.activation = keras.activations.gelu
    return backbone


def save_preset(folder, backbone, tokenizer):
    backbone.save_to_preset(str(folder))
    tokenizer.save_to_preset(str(folder))


def export_notes(encoder):
    """One line each: what a keras-hub user should know about the preset."""
    notes = [GELU_NOTE, "pooled_dense is freshly initialised (ELECTRA has no pooler); use sequence_output, or "
                        "fine-tune the pooler with a head"]
    if encoder.attention_dropout != encoder.dropout_rate:
        notes.append(f"keras-hub uses one dropout rate ({encoder.dropout_rate}) for hidden states and attention "
                     f"probabilities; this model's attention dropout {encoder.attention_dropout} is not kept")
    return notes


# ------------------------------------------------------------------------------------------------ import


def is_keras_hub_preset(path):
    """A folder whose config.json is a serialized Keras object (keras-hub's preset format)."""
    config = pathlib.Path(path) / CONFIG
    if not config.is_file():
        return False
    try:
        return "registered_name" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


class KerasHubSource:
    """Reads tensors by TF1 name from a keras-hub ElectraBackbone preset (loaded by keras-hub itself).

    It holds the encoder alone (`encoder_only`): the importer gives the model a fresh discriminator head
    and generator. `hf_config` carries what the tensors do not show, in Hugging Face's field names (the
    importer's common currency); `vocab_file`, `lower_case` and `notes` come from the tokenizer files.
    """

    kind = "keras-hub preset"
    encoder_only = True

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        config = read_json_file(self.folder / CONFIG)
        if config.get("registered_name") != BACKBONE_CLASS:
            raise InputError(f"--source {self.folder}: a keras-hub preset of {config.get('registered_name')}, not "
                             "ElectraBackbone; pass an ELECTRA preset")
        keras_hub = import_keras_hub(f"--source {self.folder} (a keras-hub preset)")
        try:
            backbone = keras_hub.models.ElectraBackbone.from_preset(str(self.folder))
        except Exception as error:  # keras-hub and h5py raise many types for a damaged preset
            raise InputError(f"--source {self.folder}: keras-hub cannot load this preset "
                             f"({short_reason(error)}); save it again with backbone.save_to_preset") from None
        self._arrays = {variable.path: variable for variable in backbone.weights}
        self.hf_config = {"num_attention_heads": backbone.num_heads, "hidden_dropout_prob": backbone.dropout,
                          "attention_probs_dropout_prob": backbone.dropout, "layer_norm_eps": LAYER_NORM_EPSILON}
        self.step = 0
        self.vocab_file, self.lower_case, self.notes = None, None, []
        self._read_tokenizer()

    def _read_tokenizer(self):
        if not (self.folder / TOKENIZER_CONFIG).is_file():
            return
        serialized = read_json_file(self.folder / TOKENIZER_CONFIG)
        if serialized.get("registered_name") != TOKENIZER_CLASS:
            raise InputError(f"{self.folder / TOKENIZER_CONFIG}: a {serialized.get('registered_name')}, not an "
                             "ElectraTokenizer; pass --vocab-file with the model's WordPiece vocabulary")
        config = serialized.get("config", {})
        if (self.folder / VOCABULARY).is_file():
            self.vocab_file = self.folder / VOCABULARY
        self.lower_case = bool(config.get("lowercase", False))
        if bool(config.get("strip_accents", False)) != self.lower_case:
            self.notes.append(f"the preset's tokenizer has lowercase={self.lower_case} and strip_accents="
                              f"{config.get('strip_accents')}; this model folder strips accents exactly when it "
                              "lower-cases (BERT's rule), so accented words may tokenize differently")
        other = {key: config[key] for key, value in BERT_TOKENIZER_SETTINGS.items()
                 if key in config and config[key] != value}
        if other:
            self.notes.append(f"the preset's tokenizer sets {other}; this model folder tokenizes by BERT's rules "
                              f"({BERT_TOKENIZER_SETTINGS})")

    def _path(self, name):
        return names_lib.keras_hub_path(name)

    def has(self, name):
        return self._path(name) in self._arrays

    def shape(self, name):
        path = self._path(name)
        return names_lib.keras_hub_tf1_shape(path, self._arrays[path].shape)

    def get(self, name):
        path = self._path(name)
        value = np.asarray(self._arrays[path].numpy(), dtype=np.float32)
        return np.reshape(value, names_lib.keras_hub_tf1_shape(path, value.shape))

    def unused_keys(self, used_names):
        """Variables no used name reads, the pooler excepted (ELECTRA has none)."""
        used = {self._path(name) for name in used_names}
        return sorted(path for path in self._arrays
                      if path not in used and not path.startswith(names_lib.KERAS_HUB_POOLER))

    def describe(self, name):
        return f"{self.folder}: variable {self._path(name)} (TF1 name {name})"
