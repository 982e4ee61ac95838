"""CoNLL-2000 chunking (`chunk`), the original's one tagging task: a BIOES label per word, predicted on
its first sub-token, scored by chunk-level F1 (by the original's span decoder, or conlleval's rules with
chunk_scorer "conlleval": finetune/tagging/scorer.py).

Files: the first of `<root>/chunk/` and `<root>/conll2000/` that exists, holding
`train.txt`, `dev.txt` and `test.txt` (the original's names) or CoNLL-2000's own download, `train.txt`
and `test.txt`. Without dev.txt the dev split is test.txt, CoNLL-2000's standard evaluation set: the dev
scores are then the test set's, the figure papers report, and must not be tuned on.
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
from finetune.tagging.spans import LABEL_NAMES, encode
from finetune.tasks import TAGGING, Task

FOLDER_NAMES = ("conll2000",)  # besides the task's name: NLTK's and the shared data's name for it
SPLIT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "test.txt"), "test": ("test.txt",)}


@dataclasses.dataclass(frozen=True)
class ChunkTask(Task):
    name: str = "chunk"

    kind = TAGGING
    primary_metric = "f1"

    @property
    def label_names(self) -> List[str]:
        return list(LABEL_NAMES)

    @property
    def label_mapping(self) -> Dict[str, int]:
        """{BIOES label: output index}, the original's label_mapping (saved beside the results as JSON)."""
        return {name: index for index, name in enumerate(LABEL_NAMES)}

    def eval_splits(self) -> Dict[str, str]:
        return {"dev": ""}

    def test_splits(self) -> List[str]:
        return ["test"]

    def split_file(self, data_root, split) -> pathlib.Path:
        folder = find_task_dir(data_root, self.name, FOLDER_NAMES)
        return find_split_file(folder, split, SPLIT_FILES.get(split, (f"{split}.txt",)), self.name)

    def read(self, data_root, split, bad_rows=None, config=None):
        return read_conll(self.split_file(data_root, split), set(LABEL_NAMES), need_tags=split != "test",
                          fix="use CoNLL-2000's full train.txt / test.txt", bad_rows=bad_rows)

    def featurize(self, sentences, tokenizer, config, training=False):
        features = featurize_sentences(sentences, tokenizer, config.max_seq_length, LABEL_NAMES)
        features["chunk_scorer"] = config.chunk_scorer  # how write_test_predictions reads predicted tags
        return features

    # ------------------------------------------------------------------ predictions and scores
    def predicted_tags(self, features, outputs) -> List[List[str]]:
        """Per sentence, the BIOES label of each word the model saw (argmax at its first sub-token)."""
        predicted = []
        for number, mask in enumerate(features["sequences"]["tag_mask"]):
            positions = np.flatnonzero(mask)
            predicted.append([LABEL_NAMES[i] for i in np.asarray(outputs[number])[positions].argmax(-1)])
        return predicted

    def gold_tags(self, features) -> List[List[str]]:
        """Per sentence, the BIOES labels of the words the model saw (from the features, so an exported
        task scores without its files)."""
        sequences = features["sequences"]
        return [[LABEL_NAMES[i] for i in ids[mask == 1]]
                for ids, mask in zip(sequences["tag_ids"], sequences["tag_mask"])]

    def evaluate(self, features, outputs, config, suffix=""):
        """Chunk precision, recall and F1 (0–100) and, to save, the label mapping and the predicted tags."""
        predicted = self.predicted_tags(features, outputs)
        scores = chunk_f1(self.gold_tags(features), predicted, config.chunk_scorer)
        extra = {"label_mapping": self.label_mapping,
                 "predictions": {example.guid: " ".join(tags) for example, tags in zip(features["examples"], predicted)}}
        return {name + suffix: value for name, value in scores.items()}, extra

    def write_test_predictions(self, folder, split, features, outputs):
        """`chunk_<split>.txt`, CoNLL style for conlleval: `word gold predicted` per line (`word predicted`
        without gold), a blank line after each sentence. Predictions are written in IOB2, CoNLL-2000's own
        tags, from the chunks the run's scorer decodes (chunk_scorer, recorded by featurize; the original's
        decoder for features without it), so conlleval on the file counts what the run scored; words the
        model did not see (cut by max_seq_length) get O."""
        decode = DECODERS[features.get("chunk_scorer", "original")]
        lines = []
        for sentence, tags in zip(features["examples"], self.predicted_tags(features, outputs)):
            predicted = encode(decode(tags), len(sentence.words), "IOB2")
            gold = sentence.tags or [None] * len(sentence.words)
            lines += [" ".join(field for field in fields if field is not None)
                      for fields in zip(sentence.words, gold, predicted)] + [""]
        path = pathlib.Path(folder) / f"{self.name}_{split}.txt"
        atomic.write_text(path, "\n".join(lines) + "\n")
        return path


TASKS = [ChunkTask()]  # what finetune.registry lists
