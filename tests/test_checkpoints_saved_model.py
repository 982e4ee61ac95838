"""The SavedModel export (4): reloaded with tf.saved_model.load, it serves raw strings (real GLUE dev
sentences, an empty string, strings longer than max_seq_length) with the Keras classifier's predictions.

The reference side tokenizes in Python (Tokenizer.encode_batch) and truncates with BERT's own
_truncate_seq_pair loop, written out here; the SavedModel does both inside its graph.
"""
import types

import numpy as np
import pytest

from tests.helpers import saved_model_ops

MAX_SEQ_LENGTH = 24


class Classifier:
    """Built lazily (keras import): BertEncoder + dense on the [CLS] hidden state; one layer, which the export
    traces fastest (what the test checks holds for any depth)."""

    @staticmethod
    def build(vocab_size, num_labels, seed):
        import keras

        from model.encoder import BertEncoder

        class _Classifier(keras.Model):
            def __init__(self):
                super().__init__(name="classifier")
                self.encoder = BertEncoder(vocab_size, hidden_size=32, num_layers=1, num_heads=2,
                                           intermediate_size=64, embedding_size=32, max_position_embeddings=64)
                self.dense = keras.layers.Dense(num_labels, name="dense")

            def call(self, inputs, training=False):
                return self.dense(self.encoder(inputs, training=training)[:, 0])

        model = _Classifier()
        zeros = np.zeros((1, MAX_SEQ_LENGTH), np.int32)
        model({"input_ids": zeros, "input_mask": zeros + 1, "segment_ids": zeros})
        rng = np.random.default_rng(seed)
        for variable in model.weights:
            value = variable.numpy()
            variable.assign((value + 0.2 * rng.standard_normal(value.shape)).astype(np.float32))
        return model


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert's loop."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def reference_inputs(tokenizer, texts_a, texts_b=None):
    special = tokenizer.special_ids
    ids_a = [list(x) for x in tokenizer.encode_batch(texts_a)]
    ids_b = [list(x) for x in tokenizer.encode_batch(texts_b)] if texts_b else [None] * len(texts_a)
    batch = {key: np.zeros((len(texts_a), MAX_SEQ_LENGTH), np.int32)
             for key in ("input_ids", "input_mask", "segment_ids")}
    for row, (a, b) in enumerate(zip(ids_a, ids_b)):
        if b is None:
            a = a[:MAX_SEQ_LENGTH - 2]
            tokens, types = [special.cls] + a + [special.sep], [0] * (len(a) + 2)
        else:
            truncate_seq_pair(a, b, MAX_SEQ_LENGTH - 3)
            tokens = [special.cls] + a + [special.sep] + b + [special.sep]
            types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        batch["input_ids"][row, :len(tokens)] = tokens
        batch["input_mask"][row, :len(tokens)] = 1
        batch["segment_ids"][row, :len(tokens)] = types
    return batch


def glue_rows(shared_data, task, columns, count):
    lines = (shared_data / "glue" / task / "dev.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = [line.split("\t") for line in lines[1:count + 1]]
    return [[row[header.index(column)] for row in rows] for column in columns]


@pytest.fixture(scope="module")
def tokenizer(bert_vocab_file):
    from data.tokenization import load_tokenizer

    return load_tokenizer(vocab_file=bert_vocab_file)


def load_and_serve(path, *texts):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops the graph uses)

    serving = tf.saved_model.load(str(path)).signatures["serving_default"]
    names = ("text_a", "text_b") if len(texts) == 2 else ("text",)
    return {key: value.numpy() for key, value in serving(**{
        name: tf.constant(list(text)) for name, text in zip(names, texts)}).items()}


def assert_same_predictions(model, served, inputs, label_names):
    logits = np.asarray(model(inputs))
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    assert list(served["label_id"]) == list(np.argmax(logits, -1))
    assert [label.decode() for label in served["label"]] == [label_names[i] for i in np.argmax(logits, -1)]
    assert len(set(np.round(probabilities[:, 0], 4))) > len(probabilities) // 2  # inputs differ in effect


def test_truncate_pair_is_berts_loop():
    import tensorflow as tf

    from checkpoints.saved_model import truncate_pair

    lengths = [(a, b) for a in range(9) for b in range(9)]
    tokens_a = tf.ragged.constant([list(range(a)) for a, _ in lengths], dtype=tf.int32)
    tokens_b = tf.ragged.constant([list(range(100, 100 + b)) for _, b in lengths], dtype=tf.int32)
    for budget in (0, 1, 5, 6, 11):
        kept_a, kept_b = (kept.to_list() for kept in truncate_pair(tokens_a, tokens_b, budget))
        for row, (a, b) in enumerate(lengths):
            expected_a, expected_b = list(range(a)), list(range(100, 100 + b))
            truncate_seq_pair(expected_a, expected_b, budget)
            assert (kept_a[row], kept_b[row]) == (expected_a, expected_b), (a, b, budget)


def finetuned_folder(folder, tokenizer, bert_vocab_file, task_name):
    """A fine-tuned model folder as run_finetuning.py saves one (finetune.saved), random weights; one layer,
    which the export traces fastest (what the tests check holds for any depth)."""
    from configs.model_config import ModelConfig
    from finetune.heads import ClassificationHead
    from finetune.model import SingleTaskModel
    from finetune.pretrained import build_encoder
    from finetune.saved import save_finetuned_model
    from finetune.registry import get_task

    task = get_task(task_name)
    model_config = ModelConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=1, num_heads=2,
                               intermediate_size=64, embedding_size=16, max_position_embeddings=64)
    encoder = build_encoder(model_config)
    head = ClassificationHead(task.num_outputs, model_config.hidden_size, name=task.name)
    model = SingleTaskModel(encoder, head)
    rng = np.random.default_rng(2)
    for variable in model.weights:
        value = variable.numpy()
        variable.assign((value + 0.2 * rng.standard_normal(value.shape)).astype(np.float32))
    config = types.SimpleNamespace(max_seq_length=MAX_SEQ_LENGTH)
    pretrained = types.SimpleNamespace(vocab_file=bert_vocab_file, sp_model=None, do_lower_case=True,
                                       model_config=model_config, checkpoint="random")
    return save_finetuned_model(folder, encoder, head, task, config, pretrained)


def test_finetuned_regression_pair_through_the_cli(tmp_path, shared_data, tokenizer, bert_vocab_file, capsys):
    """--format saved_model on a fine-tuned STS-B folder: two string inputs, a score out."""
    from checkpoints import export
    from finetune.saved import load_finetuned_model

    folder = finetuned_folder(tmp_path / "sts_model_1", tokenizer, bert_vocab_file, "sts")
    output = tmp_path / "served" / "1"
    export.main(["--model-dir", str(folder), "--format", "saved_model", "--output", str(output)])
    assert "text_a, text_b" in capsys.readouterr().out
    assert "ScatterNd" in saved_model_ops(output)  # padded to max_seq_length, computed on the real tokens' rows
    first, second = glue_rows(shared_data, "STS-B", ["sentence1", "sentence2"], 8)
    long_text = " ".join(first)
    assert len(tokenizer.encode(long_text)) > 2 * MAX_SEQ_LENGTH
    texts_a = first + ["", long_text, "a short one", long_text]  # empty; longer than max_seq_length
    texts_b = second + ["", "a short one", long_text, long_text]
    served = load_and_serve(output, texts_a, texts_b)
    model, info = load_finetuned_model(folder)
    assert info.score_range == [0.0, 5.0]
    # the head regresses the original's normalised target score / 5; the SavedModel serves the score
    expected = np.asarray(model(reference_inputs(tokenizer, texts_a, texts_b)))[:, 0] * 5.0
    np.testing.assert_allclose(served["score"], expected, atol=1e-5)
    assert len(set(np.round(expected, 4))) > len(expected) // 2  # the inputs differ in effect


def test_single_sentence_classifier(tmp_path, shared_data, tokenizer):
    """The generic interface: any Keras classifier (here BertEncoder + dense on [CLS]) and label names."""
    from checkpoints.saved_model import export_classifier

    label_names = ["negative", "positive", "neutral"]
    model = Classifier.build(tokenizer.vocab_size, num_labels=3, seed=1)
    info = export_classifier(model, tokenizer, MAX_SEQ_LENGTH, tmp_path / "single", label_names, task="sst")
    assert info["inputs"] == ["text"] and info["outputs"] == ["label", "label_id", "probabilities"]
    (sentences,) = glue_rows(shared_data, "SST-2", ["sentence"], 10)
    texts = sentences + ["", " ".join(sentences)]  # an empty string; one far over max_seq_length
    served = load_and_serve(tmp_path / "single", texts)
    assert_same_predictions(model, served, reference_inputs(tokenizer, texts), label_names)
