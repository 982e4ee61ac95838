"""A trial's results file is written in one write with what a subclass adds to it (RecordingTrialRunner's
jax_settings): a run killed between two writes left a file without them, which its resumption refused, so the
killed run of tests/test_run_finetuning_jax.py started over once in CI."""
import json
import types

from configs.finetuning_config import FinetuningConfig
from finetune import trials as trials_lib
from finetune.registry import get_task
from finetune.trials import TaskData, TrialRunner


class WithSettings(TrialRunner):
    def results_extra(self):
        return {"jax_settings": {"bf16": False, "length_buckets": [32, 128]}}


def test_a_results_file_is_written_once_with_the_subclass_s_fields(tmp_path, monkeypatch):
    writes = []
    real_save = trials_lib.save_json
    monkeypatch.setattr(trials_lib, "save_json", lambda value, path: (writes.append(path), real_save(value, path)))
    data = TaskData(get_task("rte"), {"count": 64}, {}, {}, {})
    pretrained = types.SimpleNamespace(folder=tmp_path, checkpoint=tmp_path / "ckpt-1")
    runner = WithSettings(pretrained, FinetuningConfig.create({"save_finetuned_models": False}), [data], tmp_path,
                          say=lambda line: None, trainer_class=object)
    trial = {"trial": 1, "seed": 0, "metrics": {"accuracy": 50.0}, "train_seconds": 1.0}
    runner.write_results({"rte": [trial]}, complete=False)
    path = runner.results_path(data.task)
    assert writes == [path]
    written = json.loads(path.read_text())
    assert written["jax_settings"]["length_buckets"] == [32, 128] and written["trials"] == [trial]
