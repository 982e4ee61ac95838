"""SQuAD 2.0 (`squad`) and 1.1 (`squadv1`) as fine-tuning tasks, on SpanTask (what the MRQA tasks share).

Files: `<root>/<task>/{train,dev}.json` (the original's names), or SQuAD's own `train-v2.0.json`,
`dev-v2.0.json` (`-v1.1` for squadv1) there, in `<root>/SQuAD/` or in `<root>` itself; gzipped files
(`.json.gz`) are read too.
"""
import dataclasses
import pathlib
from typing import Dict, List

import numpy as np

from configs.loading import save_json
from common.errors import InputError
from finetune.squad import evaluate as squad_eval
from finetune.squad.featurize import featurize_examples
from finetune.squad.postprocess import predict_answers
from finetune.squad.reader import load_json, read_squad
from finetune.tasks import SPAN, Task


def answerable_labels(examples, windows, has_unanswerable=False):
    """The answerability classifier's label per window, the original's (qa_tasks.py writes the example's
    is_impossible into each of its windows): the question's flag, read only by SQuAD 2.0, so 0 for SQuAD 1.1
    and every MRQA set, and for 2.0 the same in every window of a question, one without the answer too.
    (Labelling 1 every window without the answer, as this code once did, showed no gain when measured:
    docs/reproduction.md#finetuning-heads.)"""
    if not has_unanswerable:
        return np.zeros(len(windows), np.int32)
    return np.array([examples[w.example_index].is_impossible for w in windows], np.int32)


class SpanTask(Task):
    """What SQuAD and the MRQA tasks share: windows with doc stride, the span head's training targets and
    answer texts decoded from its beams; subclasses read their files and score."""
    kind = SPAN
    has_unanswerable = False  # whether the original reads the questions' is_impossible (SQuAD 2.0's `v2`)

    def featurize(self, read, tokenizer, config, training=False):
        windows = featurize_examples(read["examples"], tokenizer, config.max_seq_length, config.doc_stride,
                                     config.max_query_length, training)
        scalars = {}
        if training:
            starts = np.array([w.start_position for w in windows], np.int32)
            labels = answerable_labels(read["examples"], windows, self.has_unanswerable)
            scalars = {"start_positions": starts, "end_positions": np.array([w.end_position for w in windows], np.int32),
                       "is_impossible": labels}
        return {"sequences": {"input_ids": [w.input_ids for w in windows],
                              "segment_ids": [w.segment_ids for w in windows]},
                "scalars": scalars, "windows": windows, "read": read, "count": len(windows),
                "tokenizer": tokenizer, "config": config}

    def predictions(self, features, outputs, config):
        """({question id: answer text}, {question id: null odds})."""
        return predict_answers(features["read"]["examples"], features["windows"], outputs, features["tokenizer"],
                               config or features["config"], features["tokenizer"].lower_case)


@dataclasses.dataclass(frozen=True)
class SquadTask(SpanTask):
    name: str
    version: str  # "v2.0" | "v1.1"

    @property
    def primary_metric(self):
        return "exact" if self.is_v2 else "exact_match"

    @property
    def is_v2(self):
        return self.version == "v2.0"

    @property
    def has_unanswerable(self):
        return self.is_v2

    def eval_splits(self) -> Dict[str, str]:
        return {"dev": ""}

    def test_splits(self) -> List[str]:
        return ["dev"]  # SQuAD's test set is hidden: --do-predict writes the dev predictions for submission

    def split_file(self, data_root, split) -> pathlib.Path:
        root = pathlib.Path(data_root)
        folders = [root / self.name, root / "SQuAD", root / "squad", root]
        names = [f"{split}.json", f"{split}-{self.version}.json"]
        names += [name + ".gz" for name in names]
        for folder in folders:
            for name in names:
                if (folder / name).is_file():
                    return folder / name
        raise InputError(f"task {self.name}: no {split} file ({' or '.join(names[:2])}, optionally .gz) in "
                         f"{', '.join(str(f) for f in folders)}; put SQuAD {self.version} there or pass "
                         "--finetuning-data-dir")

    def read(self, data_root, split, bad_rows=None, config=None):
        """`bad_rows` is not used: a SQuAD file is one JSON document, not rows (a malformed entry stops)."""
        path = self.split_file(data_root, split)
        dataset = load_json(path)
        return {"path": path, "dataset": dataset, "examples": read_squad(path, dataset)}

    def evaluate(self, features, outputs, config, suffix=""):
        predictions, null_odds = self.predictions(features, outputs, config)
        dataset = features["read"]["dataset"]
        if self.is_v2:
            scores = squad_eval.evaluate_v2(dataset, predictions, null_odds, config.qa_na_threshold)
            scores.pop("total", None)
            scores = {k: float(v) for k, v in scores.items() if not k.endswith("_total")}
            extra = {"predictions": predictions, "null_odds": null_odds}
        else:
            scores = squad_eval.evaluate_v1(dataset, predictions)
            extra = {"predictions": predictions}
        return {key + suffix: value for key, value in scores.items()}, extra

    def write_test_predictions(self, folder, split, features, outputs):
        """`<task>_<split>_predictions.json` (and, for 2.0, `..._null_odds.json`: predict "" where the odds
        exceed the threshold, as the official script's --na-prob-thresh does)."""
        predictions, null_odds = self.predictions(features, outputs, features["config"])
        folder = pathlib.Path(folder)
        path = folder / f"{self.name}_{split}_predictions.json"
        save_json(predictions, path)
        if self.is_v2:
            save_json(null_odds, folder / f"{self.name}_{split}_null_odds.json")
        return path


TASKS = [SquadTask("squad", "v2.0"), SquadTask("squadv1", "v1.1")]  # what finetune.registry lists
