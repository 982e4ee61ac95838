"""CoNLL-2000 chunking (`chunk`), the original's one tagging task: a BIOES label per word, predicted on
its first sub-token, scored by chunk-level F1 (by the original's span decoder, or conlleval's rules with
chunk_scorer "conlleval": finetune/tagging/scorer.py).

Files: the first of `<root>/chunk/` and `<root>/conll2000/` that exists, holding
`train.txt`, `dev.txt` and `test.txt` (the original's names) or CoNLL-2000's own download, `train.txt`
and `test.txt`. Without dev.txt the dev split is test.txt, CoNLL-2000's standard evaluation set: the dev
scores are then the test set's, the figure papers report, and must not be tuned on.

TaggingTask is what chunking shares with tagging tasks read from a user's own column files
(finetune/custom): featurisation, the head's labels, scores and CoNLL-style test predictions.
"""
import dataclasses
import pathlib
from typing import Dict, List

import numpy as np

from common import atomic
from finetune.data_files import find_split_file, find_task_dir
from finetune.tagging.featurize import featurize_sentences
from finetune.tagging.reader import read_conll
from finetune.tagging.scorer import DECODERS, chunk_f1
from finetune.tagging.spans import LABEL_NAMES, OUTSIDE, encode
from finetune.tasks import TAGGING, Task

FOLDER_NAMES = ("conll2000",)  # besides the task's name: NLTK's and the shared data's name for it
SPLIT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "test.txt"), "test": ("test.txt",)}


class TaggingTask(Task):
    """A label per word on its first sub-token, whatever the tag set; subclasses give the labels and read
    the files. With `span_labels` (chunk and NER tags: O and B-, I-, E-, S-<type>) the file's tags (IOB1,
    IOB2 or BIOES) are learnt as BIOES labels and scored by span F1 (precision, recall and F1 of the spans,
    decoded by the config's chunk_scorer); without (part-of-speech or any other per-word tags) each tag is
    its own label, scored by the accuracy over words. Test predictions are written in `output_scheme`
    (IOB2 or BIOES; the tags themselves without span labels)."""

    kind = TAGGING
    span_labels = True
    output_scheme = "IOB2"

    @property
    def primary_metric(self):
        return "f1" if self.span_labels else "accuracy"

    @property
    def label_mapping(self) -> Dict[str, int]:
        """{label: output index}, the original's label_mapping (saved beside the results as JSON)."""
        return {name: index for index, name in enumerate(self.label_names)}

    def eval_splits(self) -> Dict[str, str]:
        return {"dev": ""}

    def test_splits(self) -> List[str]:
        return ["test"]

    def featurize(self, sentences, tokenizer, config, training=False):
        encode_tags = None if self.span_labels else (lambda tags, index: [index[tag] for tag in tags])
        features = featurize_sentences(sentences, tokenizer, config.max_seq_length, self.label_names,
                                       encode_tags=encode_tags)
        features["chunk_scorer"] = config.chunk_scorer  # how write_test_predictions reads predicted tags
        return features

    # ------------------------------------------------------------------ predictions and scores
    def predicted_tags(self, features, outputs) -> List[List[str]]:
        """Per sentence, the label of each word the model saw (argmax at its first sub-token)."""
        names, predicted = self.label_names, []
        for number, mask in enumerate(features["sequences"]["tag_mask"]):
            positions = np.flatnonzero(mask)
            predicted.append([names[i] for i in np.asarray(outputs[number])[positions].argmax(-1)])
        return predicted

    def gold_tags(self, features) -> List[List[str]]:
        """Per sentence, the labels of the words the model saw (from the features, so an exported task
        scores without its files)."""
        names, sequences = self.label_names, features["sequences"]
        return [[names[i] for i in ids[mask == 1]] for ids, mask in zip(sequences["tag_ids"], sequences["tag_mask"])]

    def evaluate(self, features, outputs, config, suffix=""):
        """Span precision, recall and F1 (or, without span labels, the accuracy over words; 0–100) and, to
        save, the label mapping and the predicted labels."""
        predicted, gold = self.predicted_tags(features, outputs), self.gold_tags(features)
        if self.span_labels:
            scores = chunk_f1(gold, predicted, config.chunk_scorer)
        else:
            words = [(g, p) for gold_tags, predicted_tags in zip(gold, predicted, strict=True)
                     for g, p in zip(gold_tags, predicted_tags)]
            scores = {"accuracy": 100.0 * sum(g == p for g, p in words) / max(1, len(words))}
        extra = {"label_mapping": self.label_mapping,
                 "predictions": {example.guid: " ".join(tags)
                                 for example, tags in zip(features["examples"], predicted)}}
        return {name + suffix: value for name, value in scores.items()}, extra

    def write_test_predictions(self, folder, split, features, outputs):
        """`<task>_<split>.txt`, CoNLL style for conlleval: `word gold predicted` per line (`word predicted`
        without gold), a blank line after each sentence. Span predictions are written in the task's
        output_scheme (IOB2 for chunking, CoNLL-2000's own tags) from the spans the run's scorer decodes
        (chunk_scorer, recorded by featurize; the original's decoder for features without it), so
        conlleval on the file counts what the run scored; words the model did not see (cut by
        max_seq_length) get O."""
        decode = DECODERS[features.get("chunk_scorer", "original")]
        lines = []
        for sentence, tags in zip(features["examples"], self.predicted_tags(features, outputs)):
            if self.span_labels:
                predicted = encode(decode(tags), len(sentence.words), self.output_scheme)
            else:
                predicted = list(tags) + [OUTSIDE] * (len(sentence.words) - len(tags))
            gold = sentence.tags or [None] * len(sentence.words)
            lines += [" ".join(field for field in fields if field is not None)
                      for fields in zip(sentence.words, gold, predicted)] + [""]
        path = pathlib.Path(folder) / f"{self.file_stem}_{split}.txt"
        atomic.write_text(path, "\n".join(lines) + "\n")
        return path


@dataclasses.dataclass(frozen=True)
class ChunkTask(TaggingTask):
    name: str = "chunk"

    @property
    def label_names(self) -> List[str]:
        return list(LABEL_NAMES)

    def split_file(self, data_root, split) -> pathlib.Path:
        folder = find_task_dir(data_root, self.name, FOLDER_NAMES)
        return find_split_file(folder, split, SPLIT_FILES.get(split, (f"{split}.txt",)), self.name)

    def read(self, data_root, split, bad_rows=None, config=None):
        return read_conll(self.split_file(data_root, split), set(LABEL_NAMES), need_tags=split != "test",
                          fix="use CoNLL-2000's full train.txt / test.txt", bad_rows=bad_rows)


TASKS = [ChunkTask()]  # what finetune.registry lists
