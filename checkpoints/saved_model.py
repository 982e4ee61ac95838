"""A fine-tuned classifier or tagger as a SavedModel that serves raw strings.

The serving signature takes one string tensor `text` (or `text_a` and `text_b` for a sentence-pair task),
tokenizes in the graph with the same tensorflow-text graph the data pipeline uses
(data.tokenization.Tokenizer.tf_tokenize), truncates BERT-style to max_seq_length, builds
`[CLS] a [SEP] (b [SEP])`, runs the classifier and returns `label` (string), `label_id` and
`probabilities` (a regression task, with no label names, returns `score`). Load it with
`import tensorflow_text` then `tf.saved_model.load(path)`; TF Serving (which links tensorflow-text's ops)
serves the `serving_default` signature. The graph needs tensorflow-text's NormalizeUTF8 and
FastWordpieceTokenizeWithOffsets (WordPiece) or its SentencePiece ops, so clients without tensorflow-text
(`saved_model_cli`, Triton's TensorFlow backend) cannot run it: for them, --format saved_model_ids
(checkpoints/saved_model_ids.py: token ids in) or --format onnx.

The classifier is any Keras model mapping {"input_ids", "input_mask", "segment_ids"} (int32
[batch, max_seq_length]) to logits [batch, num_labels].

A tagger (chunking) serves `text`, words separated by whitespace as in CoNLL files: each word is tokenized
on its own and labelled at its first sub-token, whole words while they fit (finetune/tagging/featurize.py);
it returns `tags` (the BIOES label of each word, "" past the sentence), `tag_ids` (-1 there) and
`num_words` (the words the model saw; the rest of a longer text is cut, as in fine-tuning).
"""
import json

import tensorflow as tf

from common.atomic import atomic_output_dir
from common.errors import InputError
from data.tokenization import load_tokenizer

SERVING_INFO = "electra_serving.json"


def _head(tokens, lengths):
    """The first `lengths[i]` tokens of row i of a RaggedTensor."""
    positions = tf.ragged.range(tokens.row_lengths())
    return tf.ragged.boolean_mask(tokens, positions < tf.expand_dims(lengths, 1))


def truncate_pair(tokens_a, tokens_b, budget):
    """BERT's _truncate_seq_pair (drop the last token of the longer segment, of b on a tie, until the pair
    fits `budget`) in closed form: b keeps min(len b, max(budget − len a, budget // 2)), a the rest."""
    length_a, length_b = tokens_a.row_lengths(), tokens_b.row_lengths()
    keep_b = tf.minimum(length_b, tf.maximum(budget - length_a, budget // 2))
    keep_a = tf.minimum(length_a, budget - keep_b)
    return _head(tokens_a, keep_a), _head(tokens_b, keep_b)


def encode_texts(tokenizer, texts, max_seq_length):
    """One or two string tensors [batch] → the model's int32 inputs [batch, max_seq_length]."""
    segments = [tokenizer.tf_tokenize(text) for text in texts]
    if len(segments) == 1:
        segments = [_head(segments[0], tf.fill([segments[0].nrows()], tf.constant(max_seq_length - 2, tf.int64)))]
    else:
        segments = list(truncate_pair(segments[0], segments[1], max_seq_length - 3))
    batch = segments[0].nrows()
    special = tokenizer.special_ids
    ids, types = [tf.fill([batch, 1], special.cls)], [tf.zeros([batch, 1], tf.int32)]
    for segment_id, tokens in enumerate(segments):
        ids += [tokens, tf.fill([batch, 1], special.sep)]
        types += [tf.zeros_like(tokens) + segment_id, tf.fill([batch, 1], segment_id)]
    ids, types = _concat_rows(ids), _concat_rows(types)
    shape = [None, max_seq_length]
    return {"input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": types.to_tensor(0, shape=shape)}


def _concat_rows(pieces):
    """Concatenates dense [batch, 1] and ragged [batch, (n)] pieces along the token axis."""
    return tf.concat([tf.RaggedTensor.from_tensor(p) if isinstance(p, tf.Tensor) else p for p in pieces], axis=1)


def encode_words(tokenizer, texts, max_seq_length):
    """Whitespace-separated words [batch] → (the model's int32 inputs [batch, max_seq_length], int64
    positions of the kept words' first sub-tokens [batch, (words)]): featurize.align in the graph. A word
    the tokenizer turns into nothing is [UNK]; segment ids are 1, as the tagging features have them."""
    words = tf.strings.split(texts)
    pieces = tokenizer.tf_tokenize(words.flat_values)
    empty = tf.cast(tf.equal(pieces.row_lengths(), 0), tf.int64)
    unknown = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(empty)], tf.constant(tokenizer.special_ids.unk, pieces.dtype)), empty)
    pieces = tf.concat([pieces, unknown], axis=1)
    lengths = words.with_flat_values(pieces.row_lengths())
    ends = tf.math.cumsum(lengths, axis=1)
    kept = ends + 2 <= max_seq_length  # [CLS] before, [SEP] after; a prefix of the words
    positions = tf.ragged.boolean_mask(1 + ends - lengths, kept)
    tokens = tf.ragged.boolean_mask(words.with_flat_values(pieces), kept).merge_dims(1, 2)
    batch = tokens.nrows()
    special = tokenizer.special_ids
    ids = _concat_rows([tf.fill([batch, 1], special.cls), tokens, tf.fill([batch, 1], special.sep)])
    shape = [None, max_seq_length]
    ones = tf.ones_like(ids).to_tensor(0, shape=shape)
    return {"input_ids": ids.to_tensor(0, shape=shape), "input_mask": ones, "segment_ids": ones}, positions


class ServingModule(tf.Module):
    """Holds the classifier and the tokenizer's TensorFlow objects so the SavedModel carries both."""

    def __init__(self, model, tokenizer, max_seq_length, label_names, is_pair, score_range=None):
        super().__init__(name="electra_classifier")
        self.model = model
        self.tokenizer = tokenizer.tf_module
        self._encode = lambda texts: encode_texts(tokenizer, texts, max_seq_length)
        self._label_names = list(label_names or [])
        self._score_range = tuple(score_range) if score_range else (0.0, 1.0)
        names = ("text_a", "text_b") if is_pair else ("text",)
        signature = [tf.TensorSpec([None], tf.string, name=name) for name in names]
        self.serve = tf.function(self._predict, input_signature=signature, autograph=False)

    def _predict(self, *texts):
        logits = tf.cast(self.model(self._encode(texts), training=False), tf.float32)
        if not self._label_names:
            low, high = self._score_range  # the head regresses (score − min) / max
            return {"score": tf.reshape(logits, [-1]) * high + low}
        probabilities = tf.nn.softmax(logits, axis=-1)
        label_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
        return {"label": tf.gather(tf.constant(self._label_names), label_id), "label_id": label_id,
                "probabilities": probabilities}


class TaggingServingModule(ServingModule):
    """`text` (words separated by whitespace) → `tags`, `tag_ids`, `num_words` per text."""

    def __init__(self, model, tokenizer, max_seq_length, label_names):
        super().__init__(model, tokenizer, max_seq_length, label_names, is_pair=False)
        self._encode = lambda texts: encode_words(tokenizer, texts[0], max_seq_length)

    def _predict(self, text):
        inputs, positions = self._encode((text,))
        logits = tf.cast(self.model(inputs, training=False), tf.float32)  # [batch, seq, labels]
        tag_ids = tf.argmax(tf.gather(logits, positions.to_tensor(0), batch_dims=1), -1, output_type=tf.int32)
        num_words = tf.cast(positions.row_lengths(), tf.int32)
        seen = tf.sequence_mask(num_words, tf.shape(tag_ids)[1])
        tags = tf.where(seen, tf.gather(tf.constant(self._label_names), tag_ids), "")
        return {"tags": tags, "tag_ids": tf.where(seen, tag_ids, -1), "num_words": num_words}


def export_classifier(model, tokenizer, max_seq_length, output, label_names=None, is_pair=False,
                      overwrite=False, task=None, score_range=None):
    """Writes the SavedModel (+ electra_serving.json describing its inputs and labels) to `output`."""
    if max_seq_length < (5 if is_pair else 3):
        raise InputError(f"max_seq_length {max_seq_length} leaves no room for text; use a longer one")
    module = ServingModule(model, tokenizer, max_seq_length, label_names, is_pair, score_range)
    return _save(module, output, overwrite, task, label_names, is_pair, max_seq_length)


def export_tagger(model, tokenizer, max_seq_length, output, label_names, overwrite=False, task=None):
    """Writes a tagger's SavedModel (+ electra_serving.json) to `output`; `model` maps the inputs to logits
    [batch, seq, len(label_names)]."""
    if max_seq_length < 3:
        raise InputError(f"max_seq_length {max_seq_length} leaves no room for text; use a longer one")
    module = TaggingServingModule(model, tokenizer, max_seq_length, label_names)
    return _save(module, output, overwrite, task, label_names, False, max_seq_length)


def _save(module, output, overwrite, task, label_names, is_pair, max_seq_length):
    serving = module.serve.get_concrete_function()
    info = {"task": task, "label_names": list(label_names or []), "is_pair": bool(is_pair),
            "max_seq_length": int(max_seq_length), "signature": "serving_default",
            "inputs": [spec.name for spec in serving.structured_input_signature[0]],
            "outputs": sorted(serving.structured_outputs)}
    with atomic_output_dir(output, overwrite) as temp:
        tf.saved_model.save(module, str(temp), signatures={"serving_default": serving})
        (temp / SERVING_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def export_finetuned(folder, output, overwrite=False, skip_padding=True):
    """--format saved_model: a fine-tuned model folder (read by finetune.saved.load_finetuned_model) → a
    SavedModel serving raw strings. Classification, regression and tagging heads (not SQuAD's spans).
    `skip_padding`: the encoder computes the real tokens' rows only (model/unpadding.py): the graph pads every
    input to max_seq_length (bench.saved_model_padding measures both)."""
    from finetune.saved import load_finetuned_model

    model, info = load_finetuned_model(folder)
    model.encoder.skip_padding = skip_padding
    if info.kind not in ("classification", "regression", "tagging"):
        raise InputError(f"--model-dir {folder}: a {info.task} model ({info.kind} head); the SavedModel export "
                         "serves sentence(-pair) classifiers, regressors and taggers")
    tokenizer = load_tokenizer(vocab_file=None if info.sp_model else info.vocab_file, spm_model=info.sp_model,
                               lower_case=info.do_lower_case)
    if info.kind == "tagging":
        return export_tagger(model, tokenizer, info.max_seq_length, output, info.label_names, overwrite,
                             task=info.task)
    label_names = info.label_names if info.kind == "classification" else None
    return export_classifier(model, tokenizer, info.max_seq_length, output, label_names, info.is_pair, overwrite,
                             task=info.task, score_range=info.score_range)
