"""Hugging Face ELECTRA folders: config.json + model.safetensors + vocabulary and tokenizer files.

One folder holds one model: ElectraForPreTraining (the discriminator; ElectraModel reads the same folder)
or ElectraForMaskedLM (the generator). Our export writes `<output>/discriminator/` and
`<output>/generator/`; the import reads that pair, or a discriminator folder with an optional generator
folder (the `google/electra-*-discriminator` / `-generator` layout). Keys follow checkpoints.names.hf_key.
The export (`export_hf`) writes a loaded model folder as that pair; the import reads through `HFSource`.
"""
import json
import pathlib
import shutil

import numpy as np

from checkpoints import names as names_lib
from common.atomic import atomic_output_dir
from common.errors import InputError

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
TOKENIZER = "tokenizer.json"
ARCHITECTURES = {"discriminator": "ElectraForPreTraining", "generator": "ElectraForMaskedLM"}
# Keys a Hugging Face folder may hold that are not weights of ours: buffers, and the generator's output
# matrix, which is the word-embedding table (tie_word_embeddings; checked equal on import).
IGNORED_KEY_SUFFIXES = (".position_ids", ".token_type_ids")
TIED_LM_HEAD = "generator_lm_head.weight"


# ------------------------------------------------------------------------------------------------ writing


def hf_config(encoder, architecture, pad_token_id, dtype="float32"):
    """ElectraConfig fields of one of our BertEncoders (exact gelu, absolute positions)."""
    return {
        "architectures": [architecture], "model_type": "electra", "vocab_size": encoder.vocab_size,
        "embedding_size": encoder.embedding_size, "hidden_size": encoder.hidden_size,
        "num_hidden_layers": encoder.num_layers, "num_attention_heads": encoder.num_heads,
        "intermediate_size": encoder.intermediate_size, "hidden_act": "gelu",
        "hidden_dropout_prob": encoder.dropout_rate, "attention_probs_dropout_prob": encoder.attention_dropout,
        "max_position_embeddings": encoder.max_position_embeddings, "type_vocab_size": encoder.type_vocab_size,
        "initializer_range": encoder.initializer_range, "layer_norm_eps": encoder.layer_norm_epsilon,
        "pad_token_id": pad_token_id, "position_embedding_type": "absolute", "tie_word_embeddings": True,
        "torch_dtype": dtype,
    }


def write_tokenizer_files(folder, vocab_file, do_lower_case, max_length):
    """Files for `AutoTokenizer.from_pretrained(folder)`: a WordPiece vocabulary as vocab.txt for
    ElectraTokenizer (BERT's rules); a SentencePiece model as tokenizer.json (a fast tokenizer built by
    checkpoints.hf_tokenizer, since transformers has no ELECTRA class for SentencePiece), the .model
    copied beside it. `do_lower_case` goes into tokenizer_config.json either way: our import reads it."""
    folder, vocab_file = pathlib.Path(folder), pathlib.Path(vocab_file)
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
               "mask_token": "[MASK]"}
    tokenizer_config = {"do_lower_case": bool(do_lower_case), "model_max_length": max_length, **special}
    if vocab_file.suffix == ".model":
        from checkpoints.hf_tokenizer import build_hf_tokenizer
        from data.tokenization import load_tokenizer

        tokenizer = load_tokenizer(spm_model=vocab_file, lower_case=do_lower_case)
        build_hf_tokenizer(tokenizer).save(str(folder / TOKENIZER), pretty=True)
        shutil.copyfile(vocab_file, folder / vocab_file.name)
        tokenizer_config.update(tokenizer_class="PreTrainedTokenizerFast", strip_accents=tokenizer.strip_accents,
                                model_input_names=["input_ids", "token_type_ids", "attention_mask"])
    else:
        shutil.copyfile(vocab_file, folder / "vocab.txt")
        tokenizer_config.update(tokenizer_class="ElectraTokenizer", strip_accents=None, tokenize_chinese_chars=True)
    _write_json(folder / "tokenizer_config.json", tokenizer_config)
    _write_json(folder / "special_tokens_map.json", special)


def write_hf_folder(folder, tensors, config, vocab_file, do_lower_case):
    """One Hugging Face model folder from {hf key: array} and its config dict (its torch_dtype: the tensors')."""
    from safetensors.numpy import save_file

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True)
    dtype = np.dtype(config["torch_dtype"])
    save_file({key: np.ascontiguousarray(value, dtype=dtype) for key, value in tensors.items()},
              str(folder / WEIGHTS), metadata={"format": "pt"})
    _write_json(folder / CONFIG, config)
    write_tokenizer_files(folder, vocab_file, do_lower_case, config["max_position_embeddings"])


def export_hf(model, output, overwrite=False, dtype="float32"):
    """<output>/discriminator (ElectraForPreTraining) and <output>/generator (ElectraForMaskedLM) of a loaded
    model folder (pretrain.loaded_folder.ModelFolder); returns the towers written. `dtype` "float16": the weights
    rounded to half precision (half the bytes, to share or copy; transformers and our import read them back)."""
    pretrainer = model.pretrainer
    encoders = {"discriminator": pretrainer.discriminator, "generator": pretrainer.generator}
    pad_id = model.tokenizer().special_ids.pad
    models = names_lib.hf_models(names_lib.export_tensors(pretrainer))
    with atomic_output_dir(output, overwrite) as temp:
        for tower, tensors in models.items():
            config = hf_config(encoders[tower], ARCHITECTURES[tower], pad_id, dtype)
            write_hf_folder(temp / tower, tensors, config, model.vocab_file, model.config.do_lower_case)
    return sorted(models)


def _write_json(path, values):
    path.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------------ reading


def is_hf_folder(path):
    path = pathlib.Path(path)
    return path.is_dir() and (path / CONFIG).is_file() and (
        (path / WEIGHTS).is_file() or (path / WEIGHTS_INDEX).is_file() or (path / "pytorch_model.bin").is_file())


def split_pair(path):
    """(discriminator folder, generator folder or None) for a folder that holds both as subfolders."""
    path = pathlib.Path(path)
    if is_hf_folder(path / "discriminator"):
        return path / "discriminator", (path / "generator" if is_hf_folder(path / "generator") else None)
    return path, None


class _Weights:
    """Lazy access to one folder's safetensors file(s)."""

    def __init__(self, folder):
        from safetensors import safe_open

        self.folder = pathlib.Path(folder)
        if (self.folder / WEIGHTS).is_file():
            files = {WEIGHTS}
            weight_map = None
        elif (self.folder / WEIGHTS_INDEX).is_file():
            weight_map = _read_json(self.folder / WEIGHTS_INDEX).get("weight_map", {})
            files = set(weight_map.values())
        else:
            raise InputError(f"{self.folder}: holds pytorch_model.bin but no {WEIGHTS}; convert it first "
                             "(model.save_pretrained(folder) in transformers writes safetensors)")
        self._handles = {}
        for name in sorted(files):
            try:
                self._handles[name] = safe_open(str(self.folder / name), framework="numpy")
            except Exception as error:  # safetensors raises its own error types
                raise InputError(f"{self.folder / name}: not a readable safetensors file ({error}); "
                                 "download it again") from None
        self._file_of = weight_map or {key: WEIGHTS for key in self._handles[WEIGHTS].keys()}

    def keys(self):
        return set(self._file_of)

    def shape(self, key):
        return tuple(self._handles[self._file_of[key]].get_slice(key).get_shape())

    def get(self, key):
        try:
            value = self._handles[self._file_of[key]].get_tensor(key)
        except TypeError:  # bfloat16 has no numpy type
            raise InputError(f"{self.folder}: tensor {key} is stored as bfloat16, which this importer cannot "
                             "read; save the model in float32 (model.float().save_pretrained(folder))") from None
        return np.asarray(value, dtype=np.float32)


def _read_json(path):
    try:
        return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: not readable JSON ({error}); fix or download it again") from None


def read_hf_config(folder):
    config = _read_json(pathlib.Path(folder) / CONFIG)
    if config.get("model_type") != "electra":
        raise InputError(f"{folder}/{CONFIG}: model_type is {config.get('model_type')!r}, not 'electra'; pass an "
                         "ELECTRA folder")
    for key, expected in (("hidden_act", "gelu"), ("position_embedding_type", "absolute")):
        if config.get(key, expected) != expected:
            raise InputError(f"{folder}/{CONFIG}: {key} is {config[key]!r}; this implementation has only "
                             f"{expected!r}")
    return config


class HFSource:
    """Reads tensors by TF1 name from a discriminator folder and an optional generator folder.

    A generator embedding equal to the discriminator's reads as absent, so that shared embeddings (the
    original's and the released models') are recognised as shared.
    """

    kind = "Hugging Face folder"

    def __init__(self, discriminator_folder, generator_folder=None):
        self.folder = pathlib.Path(discriminator_folder)
        self.hf_config = read_hf_config(self.folder)
        self.generator_folder = pathlib.Path(generator_folder) if generator_folder else None
        self.generator_hf_config = read_hf_config(self.generator_folder) if generator_folder else None
        self._weights = {"discriminator": _Weights(self.folder)}
        if generator_folder:
            self._weights[names_lib.GENERATOR] = _Weights(generator_folder)
        self._shared_cache = {}
        self.step = 0

    def _locate(self, name):
        tower = names_lib.tower_of(name)
        weights = self._weights.get(tower)
        return (weights, names_lib.hf_key(name)) if weights is not None else (None, None)

    def has(self, name):
        weights, key = self._locate(name)
        if weights is None or key not in weights.keys():
            return False
        return not self._same_as_discriminator(name)

    def shape(self, name):
        weights, key = self._locate(name)
        shape = weights.shape(key)
        return shape[::-1] if name.endswith("/kernel") else shape

    def get(self, name):
        weights, key = self._locate(name)
        value = weights.get(key)
        return np.ascontiguousarray(value.T) if name.endswith("/kernel") else value

    def _same_as_discriminator(self, name):
        if not name.startswith(f"{names_lib.GENERATOR}/embeddings/"):
            return False
        if name not in self._shared_cache:
            twin = name.replace(f"{names_lib.GENERATOR}/", f"{names_lib.DISCRIMINATOR}/", 1)
            weights, key = self._locate(twin)
            self._shared_cache[name] = (key in weights.keys() and np.array_equal(
                self.get(name), weights.get(key)))
        return self._shared_cache[name]

    def unused_keys(self, used_names):
        """Keys of either folder that no used TF1 name maps to (buffers and the tied head excepted)."""
        used = {}
        for name in used_names:
            used.setdefault(names_lib.tower_of(name), set()).add(names_lib.hf_key(name))
        unused = []
        for tower, weights in self._weights.items():
            for key in sorted(weights.keys() - used.get(tower, set())):
                if key.endswith(IGNORED_KEY_SUFFIXES):
                    continue
                if tower == names_lib.GENERATOR and key.startswith("electra.embeddings."):
                    continue  # equal to the discriminator's (shared), or read
                if key == TIED_LM_HEAD:
                    self._check_tied_head(weights)
                    continue
                unused.append(f"{weights.folder.name}:{key}")
        return unused

    def _check_tied_head(self, weights):
        table = weights.get("electra.embeddings.word_embeddings.weight")
        if not np.array_equal(weights.get(TIED_LM_HEAD), table):
            raise InputError(f"{weights.folder}: generator_lm_head.weight differs from the word embeddings; "
                             "ELECTRA ties them (tie_word_embeddings), so this generator cannot be imported")

    def describe(self, name):
        weights, key = self._locate(name)
        folder = weights.folder if weights is not None else "(no generator folder)"
        return f"{folder}: tensor {key} (TF1 name {name})"
