"""What the fine-tuning tests share: GLUE files written in their formats (MNLI, the diagnostic set), a
tokenizer of one id per character, a TrialRunner reporter that records the losses, the SQuAD
featurisation's reasons an answer cannot be mapped, and the multitask tests' synthetic features, tiny
model and configs. Scripts run under JAX import it (one of them with TensorFlow unimportable), so nothing
here imports TensorFlow at import time."""
import numpy as np

from configs.finetuning_config import FinetuningConfig
from configs.model_config import ModelConfig
from finetune.registry import get_task


# ------------------------------------------------------------------------------------------------ GLUE files
def write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("\t".join(cells) for cells in lines) + "\n", encoding="utf-8")
    return path


MNLI_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
               "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"]
DIAGNOSTIC_HEADER = ["index", "sentence1", "sentence2"]  # GLUE's diagnostic/diagnostic.tsv: no labels


def write_mnli(folder):
    """MNLI's five files in GLUE's formats, two rows each."""
    rows = [["0", "1", "1n", "fiction", "( x )", "( y )", "(ROOT x)", "(ROOT y)", "A man sleeps .",
             "A person rests .", "entailment", "entailment"],
            ["1", "2", "2c", "slate", "( x )", "( y )", "(ROOT x)", "(ROOT y)", "It is raining .",
             "The sun is out .", "contradiction", "contradiction"]]
    for split in ("train", "dev_matched", "dev_mismatched"):
        write(folder / f"{split}.tsv", [MNLI_HEADER] + rows)
    for split in ("test_matched", "test_mismatched"):
        write(folder / f"{split}.tsv", [MNLI_HEADER[:10]] + [row[:10] for row in rows])
    return folder


def write_diagnostic(path, count):
    return write(path, [DIAGNOSTIC_HEADER] + [[str(i), f"The cat {i} sat .", f"A cat {i} sat ."]
                                              for i in range(count)])


class _CharTokenizer:
    """One id per character (ord), enough to see what featurize packs."""
    special_ids = type("Special", (), {"cls": 1, "sep": 2})()

    def encode_batch(self, texts):
        return [np.array([ord(c) for c in text], np.int32) for text in texts]


class RecordingReporter:
    """TrialRunner's reporter interface; keeps the training loss of every logged step."""
    train_writer, eval_writer = "train", "eval"

    def __init__(self, losses):
        self.losses = losses

    def scalars(self, writer, step, values):
        if writer == "train":
            self.losses.append([values["loss"], values["learning_rate"]])

    def close(self):
        pass


# ------------------------------------------------------------------------------------------------ SQuAD, MRQA
def why_unmappable(example, tokenizer, answer_start):
    """Why the pieces cannot spell the answer exactly, or None when they should."""
    from data.tokenization import is_split_character
    from finetune.squad.postprocess import _basic_tokenize

    context, text = example.paragraph.context, example.answer_text
    end = answer_start + len(text) - 1

    def edge(i, j):  # is there a BERT token boundary between characters i and j?
        if i < 0 or j >= len(context):
            return True
        return (context[i].isspace() or context[j].isspace() or is_split_character(context[i])
                or is_split_character(context[j]))

    if not (edge(answer_start - 1, answer_start) and edge(end, end + 1)):
        return "starts or ends inside a word"
    if " ".join(text.split()) != text:
        return "has runs of whitespace the whitespace split collapses"
    words = example.paragraph.doc_tokens[example.start_word:example.end_word + 1]
    if any(tokenizer.special_ids.unk in tokenizer.encode(word) for word in words):
        return "contains a character the vocabulary lacks ([UNK])"
    joined = " ".join(words)
    if len("".join(_basic_tokenize(joined, True))) != len(joined.replace(" ", "")):
        return "normalisation changes its length (dropped or decomposed characters)"
    return None


# ------------------------------------------------------------------------------------------------ multitask
TASKS = [get_task("rte"), get_task("sts"), get_task("chunk")]  # classification, regression, tagging
COUNTS = {"rte": 37, "sts": 23, "chunk": 11}


def synthetic_features(seed=0, counts=COUNTS):
    """Training features as the tasks' featurize returns them: ids of random lengths, the task's targets
    (rte label ids, sts scores / 5, chunk's per-token tag_ids and tag_mask)."""
    rng = np.random.default_rng(seed)
    features = {}
    for number, (name, count) in enumerate(counts.items()):
        lengths = rng.integers(4, 30, count)
        sequences = {"input_ids": [np.full(n, 10 * number + 5, np.int32) + np.arange(n, dtype=np.int32) % 3
                                   for n in lengths],
                     "segment_ids": [(np.arange(n) >= n // 2).astype(np.int32) for n in lengths]}
        scalars = {}
        if name == "rte":
            scalars["labels"] = rng.integers(0, 2, count).astype(np.int32)
        elif name == "sts":
            scalars["labels"] = rng.uniform(0, 1, count).astype(np.float32)
        else:
            sequences["tag_mask"] = [(np.arange(n) % 2 == 1).astype(np.int32) for n in lengths]
            sequences["tag_ids"] = [rng.integers(0, 45, n).astype(np.int32) * mask
                                    for n, mask in zip(lengths, sequences["tag_mask"])]
        features[name] = {"sequences": sequences, "scalars": scalars, "count": count}
    return features


def tiny_model(tasks, config, seed=0):
    import keras

    from finetune.model import FinetuningModel, make_head
    from finetune.pretrained import build_encoder

    keras.utils.set_random_seed(seed)
    model_config = ModelConfig(vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                               embedding_size=16, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0)
    encoder = build_encoder(model_config)
    return FinetuningModel(encoder, {t.name: make_head(t, 16, config, encoder.dtype_policy) for t in tasks})


def config_for(**values):
    return FinetuningConfig.create({"train_batch_size": 8, "iterations_per_loop": 1000, **values}, "small",
                                   list(COUNTS))


def step_config():
    return config_for(head_dropout=0.0, max_seq_length=64, learning_rate=1e-3, layerwise_lr_decay=0.0,
                      warmup_proportion=0.0, pad_to_multiple=32)


def mixed_losses(trainer, steps=4):
    """The losses of the first `steps` mixed updates on synthetic_features(1) (one batch shape)."""
    losses = []
    for task, batch in trainer.epoch_batches(synthetic_features(1), np.random.default_rng(0)):
        losses.append(float(trainer.step(task, batch)))
        if len(losses) == steps:
            return losses
