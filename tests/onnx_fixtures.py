"""What the ONNX and ids-in SavedModel export tests share: a small WordPiece vocabulary that spells any
lower-case English, and fine-tuned model folders of each task kind (finetune.saved, random weights moved
off their initial values), as run_finetuning.py saves them."""
import pathlib
import string
import types

import numpy as np

MAX_SEQ_LENGTH = 32
WORDS = ("the a an and of to in is it that was for on with as film movie story good bad great not no "
         "one very more than this his her they are be at by from funny dull plot acting".split())
# one task of each kind the exporters handle (finetune.registry names)
TASKS = {"classification": "sst", "regression": "sts", "tagging": "chunk", "span": "squadv1"}
SENTENCES = ["the film is good", "a very dull plot , not funny at all", "it was great",
             "one of the acting more than his story , and that is that", "xyz qwerty", ""]


def write_vocab(path):
    """[PAD] [UNK] [CLS] [SEP] [MASK], letters, digits and punctuation (and their ## forms), a few words."""
    chars = list(string.ascii_lowercase + string.digits) + list(string.punctuation)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    tokens += [word for word in WORDS if word not in tokens]
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def finetuned_folder(folder, vocab_file, kind, seed=2, task=None, embedding_size=16):
    """A fine-tuned folder of `kind` (TASKS' key; or of `task`, a registry name): a 2-layer, 32-wide
    encoder (embeddings `embedding_size` wide: 32 has no embeddings projection), its head, random weights."""
    from configs.model_config import ModelConfig
    from data.tokenization import load_tokenizer
    from finetune.model import make_head
    from finetune.pretrained import build_encoder
    from finetune.registry import get_task
    from finetune.saved import save_finetuned_model

    import keras

    keras.utils.set_random_seed(seed)  # the initial weights too: the same model every run
    task = get_task(task or TASKS[kind])
    vocab_size = load_tokenizer(vocab_file=vocab_file).vocab_size
    model_config = ModelConfig(vocab_size=vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                               intermediate_size=64, embedding_size=embedding_size,
                               max_position_embeddings=64)
    encoder = build_encoder(model_config)
    config = types.SimpleNamespace(max_seq_length=MAX_SEQ_LENGTH, qa_hidden_size=16, beam_size=4, head_dropout=0.1)
    head = make_head(task, model_config.hidden_size, config, dtype=encoder.dtype_policy)
    from finetune.model import SingleTaskModel

    model = SingleTaskModel(encoder, head)
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = variable.numpy()
        variable.assign((value + 0.2 * rng.standard_normal(value.shape)).astype(np.float32))
    pretrained = types.SimpleNamespace(vocab_file=pathlib.Path(vocab_file), sp_model=None, do_lower_case=True,
                                       model_config=model_config, checkpoint="random")
    return save_finetuned_model(folder, encoder, head, task, config, pretrained)


def exported_folders(root, kinds, fmt="onnx"):
    """{kind: (a fine-tuned folder, its `python -m checkpoints.export --format fmt` folder)} under root."""
    from checkpoints import export

    vocab = write_vocab(pathlib.Path(root) / "vocab.txt")
    made = {}
    for kind in kinds:
        folder = finetuned_folder(pathlib.Path(root) / f"{kind}_model_1", vocab, kind)
        output = pathlib.Path(root) / f"{kind}_{fmt}"
        export.main(["--model-dir", str(folder), "--format", fmt, "--output", str(output)])
        made[kind] = (folder, output)
    return made


def model_inputs(tokenizer, texts, max_seq_length=MAX_SEQ_LENGTH):
    """[CLS] text [SEP] of each text, padded to the longest: int32 arrays by the model's input names."""
    special = tokenizer.special_ids
    rows = [[special.cls] + list(ids)[:max_seq_length - 2] + [special.sep] for ids in tokenizer.encode_batch(texts)]
    length = max(len(row) for row in rows)
    batch = {key: np.zeros((len(rows), length), np.int32) for key in ("input_ids", "input_mask", "segment_ids")}
    for number, row in enumerate(rows):
        batch["input_ids"][number, :len(row)] = row
        batch["input_mask"][number, :len(row)] = 1
    return batch
