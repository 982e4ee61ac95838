"""The Task interface (finetune.registry names the tasks that implement it).

A task knows its files (reading and checking them), how its examples become model inputs, its head and
loss, how its predictions are scored and how its test predictions are written. The loop and the trials
only talk to this interface, so GLUE sentence(-pair) tasks and SQuAD share them.
"""
import abc
import dataclasses
import re
from typing import Any, Dict, List, Optional

CLASSIFICATION, REGRESSION, SPAN = "classification", "regression", "span"
TAGGING = "tagging"  # a label per word (chunking)


def layer_name(task_name: str) -> str:
    """A task's head as a Keras layer name and TF scope (`task_specific/<layer name>/...`): TensorFlow refuses
    a colon there ('mrqa:drop' is not a valid scope name), so a family task's `prefix:<name>` becomes
    `prefix-<name>` (its file_stem). The named tasks' names have no such character and stay as they are,
    so their checkpoint names are the original's; `-` is in no named task, so the names stay distinct."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", task_name)


@dataclasses.dataclass(frozen=True)
class Example:
    """One GLUE row: `guid` is the row's id for submission files (the `index` column, else its number);
    `label` is the label name (classification), a float (regression) or None (test)."""
    guid: str
    text_a: str
    text_b: Optional[str]
    label: Any


class Task(abc.ABC):
    name: str
    kind: str
    primary_metric: str

    @property
    def is_pair(self) -> bool:
        return False

    @property
    def label_names(self) -> List[str]:
        return []

    @property
    def file_stem(self) -> str:
        """The task's name in file and folder names: a family task's `prefix:<name>` as `prefix-<name>`,
        since a colon is refused by Windows and read as a host by scp and rsync."""
        return self.name.replace(":", "-")

    @property
    def layer_name(self) -> str:
        """The task's head layer and scope name (layer_name above)."""
        return layer_name(self.name)

    @property
    def num_outputs(self) -> int:
        return len(self.label_names) or 1

    @property
    def recipe_name(self) -> str:
        """The name the recipe reads (FinetuningConfig.with_recipe: RTE and STS alone get 10 epochs, names
        holding "squad" or "qa" SQuAD's, chunk alone 256 tokens): the task's own, but for a task of the
        user's files, whose name the user chose and so must not pick a recipe."""
        return self.name

    def describe(self) -> dict:
        """What the results JSON says about the task beyond its name and labels ({} for built-in tasks)."""
        return {}

    def saved_info(self) -> dict:
        """Keys added to a fine-tuned model's finetuning_info.json beyond the common ones ({} for built-in
        tasks; a task of the user's files names the fields its inputs come from)."""
        return {}

    @abc.abstractmethod
    def eval_splits(self) -> Dict[str, str]:
        """{split file stem: suffix of its metric names} for evaluation (MNLI: matched and mismatched)."""

    @abc.abstractmethod
    def test_splits(self) -> List[str]:
        ...

    def missing_test_splits(self, data_root) -> Dict[str, str]:
        """{split: a one-line note} for optional test splits whose file is absent (MNLI's diagnostic
        set): they are skipped with the note, where a missing required split stops the run."""
        return {}

    @abc.abstractmethod
    def read(self, data_root, split, bad_rows=None, config=None):
        """The split's examples; InputError for a missing folder or file, a bad row or an empty split.
        `bad_rows` (finetune.bad_rows.BadRows; None: stop at the first): what to do with a row that cannot
        be parsed, where the format has rows. `config` (a FinetuningConfig, or None for the defaults): for the
        options that change what is read (MRQA's mrqa_answer_end)."""

    @abc.abstractmethod
    def featurize(self, examples, tokenizer, config, training=False) -> dict:
        """Model inputs: {"sequences": {"input_ids", "segment_ids"}: unpadded int32 arrays per feature,
        "scalars": {name: per-feature training targets}, "count": number of features, ...}."""

    @abc.abstractmethod
    def evaluate(self, features, outputs, config, suffix=""):
        """(metrics {name + suffix: value on 0–100}, extra outputs to save or None) from the head's
        outputs for every feature."""

    @abc.abstractmethod
    def write_test_predictions(self, folder, split, features, outputs):
        """Writes the split's predictions in the benchmark's submission format; returns the path."""

    def majority_baseline(self, train_examples, eval_examples, suffix=""):
        """Scores of always predicting the most frequent training label ({} where it means nothing)."""
        return {}

