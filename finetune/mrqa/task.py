"""The MRQA shared task's sets as fine-tuning tasks: `newsqa`, `naturalqs`, `triviaqa` and `searchqa` as the
original names them, and `mrqa:<name>` for a folder of any MRQA-format set (the out-of-domain dev sets:
DROP, DuoRC, BioASQ, ...). SQuAD 1.1's span head, featurisation and decoding; the official MRQA scoring
(finetune.mrqa.evaluate), F1 first as the shared task ranked by it.

A task's files under the fine-tuning data root R, with F its folder (the task's name; `<name>` for
mrqa:<name>), the first that exists:
  R/F/<split>.jsonl or .jsonl.gz               the original's names
  R/F/<split>/<Official>, R/mrqa/<split>/<Official>   the MRQA download scripts' folders
  R/F/<Official>, R/mrqa/<Official>            dev only: train and dev share the official name
<Official> is <official name>.jsonl or .jsonl.gz, case aside: NewsQA, NaturalQuestionsShort or
NaturalQuestions, TriviaQA-web or TriviaQA, SearchQA; for mrqa:<name> the name itself (DROP.jsonl.gz for
mrqa:drop). A file found by its official name must not say another split in its header.
"""
import dataclasses
import pathlib
import re
from typing import Dict, List, Optional, Tuple

from common.errors import InputError
from configs.loading import save_json
from finetune.mrqa import evaluate as mrqa_eval
from finetune.mrqa.reader import read_mrqa
from finetune.squad.task import SpanTask

SHARED_FOLDER = "mrqa"  # where all sets may sit together under their official names
FOLDER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _official_file(folder: pathlib.Path, stems) -> Optional[pathlib.Path]:
    """The file in `folder` named <stem>.jsonl or <stem>.jsonl.gz for one of `stems`, case aside."""
    if not folder.is_dir():
        return None
    wanted = [stem.lower() + suffix for stem in stems for suffix in (".jsonl", ".jsonl.gz")]
    files = {path.name.lower(): path for path in folder.iterdir() if path.is_file()}
    return next((files[name] for name in wanted if name in files), None)


@dataclasses.dataclass(frozen=True)
class MrqaTask(SpanTask):
    name: str
    folder: str
    official_names: Tuple[str, ...]

    primary_metric = "f1"

    def eval_splits(self) -> Dict[str, str]:
        return {"dev": ""}

    def test_splits(self) -> List[str]:
        return ["dev"]  # MRQA's test sets are hidden: --do-predict writes the dev predictions

    def split_file(self, data_root, split) -> Tuple[pathlib.Path, Optional[str]]:
        """(path, the split its header must agree with, for a file found by its official name, else None)."""
        root = pathlib.Path(data_root)
        own = root / self.folder
        for name in (f"{split}.jsonl", f"{split}.jsonl.gz"):
            if (own / name).is_file():
                return own / name, None
        folders = [own / split, root / SHARED_FOLDER / split] + ([own, root / SHARED_FOLDER] if split == "dev" else [])
        for folder in folders:
            path = _official_file(folder, self.official_names)
            if path is not None:
                return path, split
        official = " or ".join(f"{stem}.jsonl[.gz]" for stem in self.official_names)
        raise InputError(f"task {self.name}: no {split} file ({split}.jsonl[.gz] in {own}, or {official} in "
                         f"{', '.join(str(f) for f in folders)}); put the MRQA file there or pass "
                         "--finetuning-data-dir")

    def read(self, data_root, split, bad_rows=None, config=None):
        path, header_split = self.split_file(data_root, split)
        answer_end = config.mrqa_answer_end if config is not None else "text_length"
        return {"path": path, "examples": read_mrqa(path, header_split, bad_rows, answer_end)}

    def evaluate(self, features, outputs, config, suffix=""):
        predictions, _ = self.predictions(features, outputs, config)
        gold = {example.qas_id: example.answers for example in features["read"]["examples"]}
        scores = mrqa_eval.evaluate(gold, predictions)
        return {key + suffix: value for key, value in scores.items()}, {"predictions": predictions}

    def write_test_predictions(self, folder, split, features, outputs):
        """`<task>_<split>_predictions.json`: {qid: answer text}, what the official script reads."""
        predictions, _ = self.predictions(features, outputs, features["config"])
        path = pathlib.Path(folder) / f"{self.file_stem}_{split}_predictions.json"
        save_json(predictions, path)
        return path


TASKS = [MrqaTask("newsqa", "newsqa", ("NewsQA",)),
         MrqaTask("naturalqs", "naturalqs", ("NaturalQuestionsShort", "NaturalQuestions")),
         MrqaTask("triviaqa", "triviaqa", ("TriviaQA-web", "TriviaQA")),
         MrqaTask("searchqa", "searchqa", ("SearchQA",))]


def mrqa_task(folder: str) -> MrqaTask:
    """The task `mrqa:<name>`: the set in R/<name>/ (or named <name> in R/mrqa/); a named task's
    folder keeps its official names (mrqa:triviaqa finds TriviaQA-web.jsonl.gz)."""
    if not FOLDER_NAME.fullmatch(folder):
        raise InputError(f"--task mrqa:{folder}: give the data folder's name after mrqa: (lower-case letters, "
                         "digits, '.', '_', '-'), as in mrqa:drop for finetuning_data/drop/")
    named = {task.folder: task.official_names for task in TASKS}
    return MrqaTask(f"mrqa:{folder}", folder, (folder,) + named.get(folder, ()))


TASK_FAMILIES = {"mrqa": mrqa_task}  # what finetune.registry resolves `mrqa:<name>` with
