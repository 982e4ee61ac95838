"""The model a weight source describes (a TF1Source, HFSource or KerasHubSource, each in its format's
module), and the import that writes it as one of our model folders.

The model's shape is read from the tensors (vocabulary, embedding and hidden sizes, layers, FFN width, the
generator tower, which embeddings are shared) and checked against the config given with `hparams` or
found beside the checkpoint; what tensors cannot show (attention heads, dropout) comes from that config,
the Hugging Face config.json, or the original's rule (heads = hidden / 64). Every weight is then read by
its TF1 name (checkpoints.names) into a freshly built pretrainer, and the folder is written as
run_pretraining.py writes it, without an optimizer. Which format a --source is, the command
(checkpoints.import_weights) decides.
"""
import dataclasses
import json
import math
import pathlib
from typing import Optional

from checkpoints import names as names_lib
from checkpoints import tf1 as tf1_lib
from storage.model_folder import find_vocab, write_model_folder
from configs import loading
from configs.model_config import ModelConfig, available_model_sizes, read_model_size
from configs.pretraining_config import PretrainingConfig
from common.errors import InputError

QUERY = "encoder/layer_{}/attention/self/query/kernel"
INTERMEDIATE = "encoder/layer_0/intermediate/dense/kernel"
# PretrainingConfig fields that the dataset decides when pretraining continues (not shape overrides).
DATASET_FIELDS = ("model_name", "data_dir", "vocab_size", "cls_token_id", "sep_token_id", "mask_token_id",
                  "do_lower_case", "max_seq_length", "max_predictions_per_seq")
HF_MODEL_FIELDS = {"num_heads": "num_attention_heads", "dropout": "hidden_dropout_prob",
                   "attention_dropout": "attention_probs_dropout_prob", "initializer_range": "initializer_range",
                   "layer_norm_epsilon": "layer_norm_eps"}


@dataclasses.dataclass(frozen=True)
class Tower:
    hidden_size: int
    num_layers: int
    intermediate_size: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the tensors say about the model."""
    vocab_size: int
    embedding_size: int
    max_position_embeddings: int
    type_vocab_size: int
    discriminator: Tower
    generator: Optional[Tower]  # None: no generator tower of its own
    generator_embedding_size: Optional[int]  # untied generator embeddings only
    electra_objective: bool
    untied_generator: bool
    untied_generator_embeddings: bool
    gdes_embeddings: bool
    fresh_generator: bool  # a discriminator-only checkpoint: the generator starts from scratch
    fresh_discriminator_head: bool = False  # an encoder alone (a keras-hub backbone): the head starts fresh
    two_tower_generator: bool = False  # Electric's generator_ltr/ + generator_rtl/ + cloze_predictions/


def _require(source, name):
    if not source.has(name):
        raise InputError(f"{source.describe(name)} is missing; the checkpoint is incomplete or not an ELECTRA "
                         "pretraining checkpoint")
    return source.shape(name)


def _tower(source, scope):
    hidden = _require(source, f"{scope}/{QUERY.format(0)}")[1]
    intermediate = _require(source, f"{scope}/{INTERMEDIATE}")[1]
    layers = 0
    while source.has(f"{scope}/{QUERY.format(layers)}"):
        layers += 1
    return Tower(hidden, layers, intermediate)


def read_layout(source):
    """The Layout of a TF1Source or HFSource (InputError on a missing tensor or a mix)."""
    vocab_size, embedding_size = _require(source, names_lib.WORD_EMBEDDINGS)
    positions = _require(source, "electra/embeddings/position_embeddings")[0]
    types = _require(source, "electra/embeddings/token_type_embeddings")[0]
    discriminator = _tower(source, names_lib.DISCRIMINATOR)
    encoder_only = getattr(source, "encoder_only", False)
    has_discriminator_head = encoder_only or source.has(f"{names_lib.DISCRIMINATOR_HEAD}/dense/kernel")
    two_tower = source.has(f"{names_lib.GENERATOR_LTR}/{QUERY.format(0)}")
    generator_scope = names_lib.GENERATOR_LTR if two_tower else names_lib.GENERATOR
    head = names_lib.CLOZE_HEAD if two_tower else names_lib.GENERATOR_HEAD
    has_generator_head = source.has(f"{head}/output_bias")
    if not has_discriminator_head and not has_generator_head:
        _require(source, f"{names_lib.DISCRIMINATOR_HEAD}/dense/kernel")
    generator = None
    if source.has(f"{generator_scope}/{QUERY.format(0)}"):
        generator = _tower(source, generator_scope)
        _require(source, f"{head}/output_bias")
    if two_tower and _tower(source, names_lib.GENERATOR_RTL) != generator:
        raise InputError(f"{source.describe(names_lib.GENERATOR_RTL + '/' + QUERY.format(0))}: the right-to-left "
                         "tower differs in size from the left-to-right one; Electric's two towers are the same size")
    own = [source.has(f"{generator_scope}/embeddings/{suffix}") for suffix in names_lib.EMBEDDING_SUFFIXES]
    gdes = own == [True] + [False] * (len(own) - 1)
    untied_embeddings = all(own)
    if any(own) and not (gdes or untied_embeddings):
        missing = [s for s, present in zip(names_lib.EMBEDDING_SUFFIXES, own) if not present]
        _require(source, f"{generator_scope}/embeddings/{missing[0]}")
    generator_embedding_size = None
    if untied_embeddings:
        generator_embedding_size = source.shape(f"{generator_scope}/embeddings/word_embeddings")[1]
    fresh = has_discriminator_head and generator is None and not has_generator_head
    return Layout(vocab_size, embedding_size, positions, types, discriminator, generator,
                  generator_embedding_size, electra_objective=has_discriminator_head,
                  untied_generator=generator is not None or fresh or not has_discriminator_head,
                  untied_generator_embeddings=untied_embeddings, gdes_embeddings=gdes, fresh_generator=fresh,
                  fresh_discriminator_head=encoder_only, two_tower_generator=two_tower)


# ------------------------------------------------------------------------------------------------ config


def _size_model(name):
    return dataclasses.asdict(ModelConfig.from_dict(read_model_size(name).get("model", {}), name))


def _generator_fraction(layout):
    return layout.generator.hidden_size / layout.discriminator.hidden_size if layout.generator else None


def choose_model_size(layout, num_heads=None):
    """The size file whose encoder matches the tensors (and generator width, to tell Small from Small++);
    else electra_small, with the differences as model_hparam_overrides."""
    wanted = {"hidden_size": layout.discriminator.hidden_size, "num_layers": layout.discriminator.num_layers,
              "intermediate_size": layout.discriminator.intermediate_size,
              "embedding_size": layout.embedding_size}
    if num_heads is not None:
        wanted["num_heads"] = num_heads
    fraction = _generator_fraction(layout)
    matches = [name for name in available_model_sizes()
               if all(_size_model(name)[key] == value for key, value in wanted.items())]
    for name in matches:
        size_fraction = read_model_size(name).get("pretraining", {}).get(
            "generator_hidden_size", PretrainingConfig.generator_hidden_size)
        if fraction is None or math.isclose(size_fraction, fraction):
            return name
    return matches[0] if matches else "electra_small"


def inferred_hparams(layout, hf_config=None):
    """PretrainingConfig overrides that rebuild exactly this model (shapes from the tensors)."""
    num_heads = hf_config.get("num_attention_heads") if hf_config else None
    size = choose_model_size(layout, num_heads)
    model = {"hidden_size": layout.discriminator.hidden_size, "num_layers": layout.discriminator.num_layers,
             "intermediate_size": layout.discriminator.intermediate_size,
             "embedding_size": layout.embedding_size, "max_position_embeddings": layout.max_position_embeddings,
             "type_vocab_size": layout.type_vocab_size}
    size_model = _size_model(size)
    if hf_config:
        model.update({ours: hf_config[theirs] for ours, theirs in HF_MODEL_FIELDS.items() if theirs in hf_config})
    elif any(size_model[key] != value for key, value in model.items()):
        model["num_heads"] = max(1, layout.discriminator.hidden_size // 64)  # the original's sizes follow it
    hparams = {"model_size": size,
               "model_hparam_overrides": {k: v for k, v in model.items() if size_model[k] != v}}
    for flag in ("electra_objective", "untied_generator", "untied_generator_embeddings", "gdes_embeddings"):
        if getattr(layout, flag) != getattr(PretrainingConfig, flag):
            hparams[flag] = getattr(layout, flag)
    if layout.two_tower_generator:  # the original builds two towers for Electric only
        hparams["electric_objective"] = True
    if layout.generator is not None:
        hparams["generator_hidden_size"] = _generator_fraction(layout)
        hparams["generator_layers"] = layout.generator.num_layers / layout.discriminator.num_layers
    return hparams


def _compare(found, expected, what):
    return [f"{what} {key} {found[key]} (config: {expected[key]})" for key in found if found[key] != expected[key]]


def check_config_matches(config, layout, source, hf_generator_config=None):
    """InputError listing every size the tensors contradict in `config`."""
    model = config.model_config()
    found = {"vocab_size": layout.vocab_size, "embedding_size": layout.embedding_size,
             "max_position_embeddings": layout.max_position_embeddings, "type_vocab_size": layout.type_vocab_size,
             **dataclasses.asdict(layout.discriminator)}
    if source.hf_config:
        found["num_heads"] = source.hf_config.get("num_attention_heads", model.num_heads)
    problems = _compare(found, dataclasses.asdict(model), "discriminator")
    flags = ("electra_objective", "untied_generator", "untied_generator_embeddings", "gdes_embeddings",
             "two_tower_generator")
    problems += [f"{flag} {getattr(layout, flag)} (config: {getattr(config, flag)})" for flag in flags
                 if getattr(layout, flag) != getattr(config, flag)]
    if layout.generator is not None and not problems:
        generator = config.generator_model_config()
        found = dict(dataclasses.asdict(layout.generator))
        if layout.generator_embedding_size is not None:
            found["embedding_size"] = layout.generator_embedding_size
        if hf_generator_config:
            found["num_heads"] = hf_generator_config.get("num_attention_heads", generator.num_heads)
        problems += _compare(found, dataclasses.asdict(generator), "generator")
    if problems:
        raise InputError(f"{source.folder}: the {source.kind} does not match the model config: "
                         f"{'; '.join(problems)}; pass --hparams that describe it (or none, to infer them)")


def build_config(source, layout, tokenizer, model_name, data_dir, hparams=None):
    """The PretrainingConfig of the imported model: `hparams` (or electra_config.json beside a TF1
    checkpoint) if given, else inferred; checked against the tensors either way."""
    given = loading.parse_hparams(hparams, "--hparams")
    beside = pathlib.Path(source.folder) / tf1_lib.CONFIG_COPY
    if not given and source.hf_config is None and beside.is_file():
        given = {k: v for k, v in loading.read_json_file(beside).items() if k not in DATASET_FIELDS}
        loading.check_known_keys(PretrainingConfig, given, str(beside))
    values = given or inferred_hparams(layout, source.hf_config)
    special = tokenizer.special_ids
    values = {**values, "model_name": model_name, "data_dir": str(data_dir), "vocab_size": tokenizer.vocab_size,
              "cls_token_id": special.cls, "sep_token_id": special.sep, "mask_token_id": special.mask,
              "do_lower_case": tokenizer.lower_case}
    config = PretrainingConfig.create(values, source="--hparams")
    if config.max_seq_length > layout.max_position_embeddings:
        config = dataclasses.replace(config, max_seq_length=layout.max_position_embeddings,
                                     max_predictions_per_seq=None).with_derived_values()
    if tokenizer.vocab_size != layout.vocab_size:
        raise InputError(f"{tokenizer.vocab_file}: {tokenizer.vocab_size} tokens, but the checkpoint's word "
                         f"embeddings have {layout.vocab_size} rows; pass the vocabulary it was trained with")
    check_config_matches(config, layout, source, getattr(source, "generator_hf_config", None))
    return config


def continue_hparams(config):
    """The --hparams that make run_pretraining.py build this model (to pass with --init-checkpoint)."""
    reference = PretrainingConfig.create({"model_size": config.model_size}).to_dict()
    values = config.to_dict()
    return {key: value for key, value in values.items()
            if key not in DATASET_FIELDS and (key == "model_size" or value != reference[key])}


# ------------------------------------------------------------------------------------------------ import


def resolve_vocab(source, vocab_file=None, spm_model=None):
    """--vocab-file/--spm-model, else the vocabulary beside the checkpoint (InputError if none)."""
    if vocab_file or spm_model:
        return vocab_file, spm_model
    found = getattr(source, "vocab_file", None) or find_vocab(source.folder)
    if found is None:
        raise InputError(f"--source {source.folder}: no vocab.txt (or single SentencePiece .model) beside the "
                         "checkpoint, nor a keras-hub tokenizer; pass --vocab-file or --spm-model")
    return (found, None) if found.suffix != ".model" else (None, found)


def source_lower_case(source):
    """The casing the source's tokenizer files state (keras-hub's tokenizer.json, Hugging Face's
    tokenizer_config.json), else lower-cased (the official vocabulary is uncased)."""
    if getattr(source, "lower_case", None) is not None:
        return source.lower_case
    path = pathlib.Path(source.folder) / "tokenizer_config.json"
    if getattr(source, "hf_config", None) is None or not path.is_file():
        return True
    return bool(json.loads(path.read_text(encoding="utf-8")).get("do_lower_case", True))


def import_weights(source, model_dir, tokenizer, hparams=None, overwrite=False, say=print):
    """Writes the model folder `model_dir` from `source`; returns (config, pretrainer)."""
    from pretrain.builder import build_pretrainer

    model_dir = pathlib.Path(model_dir)
    layout = read_layout(source)
    config = build_config(source, layout, tokenizer, model_dir.name, model_dir.parent.parent, hparams)
    say(f"Reading {source.kind} {source.folder}: {describe(config, layout)}")
    pretrainer = build_pretrainer(config)
    read_names = set()

    def read(name, shape):
        found = tuple(_require(source, name))
        if found != tuple(shape):
            raise InputError(f"{source.describe(name)} has shape {list(found)} but the model needs {list(shape)}; "
                             "the checkpoint does not match the inferred config")
        read_names.add(name)
        return source.get(name)

    names_lib.assign_imported(pretrainer, read, skip_generator=layout.fresh_generator,
                              skip_discriminator_head=layout.fresh_discriminator_head)
    unused = source.unused_keys(read_names)
    if unused:
        say(f"Note: {len(unused)} tensor(s) not used: {', '.join(unused[:5])}{' …' if len(unused) > 5 else ''}")
    for note in getattr(source, "notes", []):
        say(f"Note: {note}.")
    if layout.fresh_discriminator_head:
        say(f"Note: the {source.kind} holds the encoder alone; the discriminator head and the generator are "
            "initialised fresh (fine-tuning uses only the encoder; continued pretraining trains them from scratch).")
    elif layout.fresh_generator:
        say("Note: the checkpoint holds no generator; a fresh one is initialised (fine-tuning uses only the "
            "discriminator; continued pretraining trains the generator from scratch).")
    write_model_folder(model_dir, config, pretrainer, tokenizer.vocab_file, step=source.step, overwrite=overwrite)
    return config, pretrainer


def describe(config, layout):
    model = config.model_config()
    text = (f"discriminator {model.num_layers} layers × {model.hidden_size} ({model.num_heads} heads, "
            f"embeddings {model.embedding_size}, vocabulary {model.vocab_size})")
    if layout.fresh_discriminator_head:
        return text + ", encoder only"
    if layout.fresh_generator:
        return text + ", no generator"
    if config.electra_objective and config.untied_generator:
        generator = config.generator_model_config()
        towers = "two-tower generator (Electric), each" if config.two_tower_generator else "generator"
        text += f", {towers} {generator.num_layers} layers × {generator.hidden_size}"
    return text + f"; model size {config.model_size}"
