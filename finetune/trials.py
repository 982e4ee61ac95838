"""Fine-tuning trials: read and featurize every split once, then per trial (seed + k) restore the
pretrained encoder, add fresh heads, train, evaluate, predict and save; results JSON with every trial and
the median/mean/std of each metric, and a printed table.

No TensorFlow at import: the trainer class and the encoder loader are TrialRunner's arguments, by
default run_finetuning.py's (finetune.tf_trainer.TFTrainer, a checkpoint read by
finetune.pretrained.load_encoder); training_jax.finetune passes its JAX trainer and an encoder read from
arrays, and gets the same trials and results files."""
import dataclasses
import json
import pathlib
import time
from typing import Dict, List

import keras
from configs.loading import save_json
from finetune import metrics as metrics_lib
from finetune.bad_rows import BadRows
from finetune.constant_predictions import constant_answer, warning as constant_warning
from finetune.loop import build_optimizer, count_steps
from finetune.model import FinetuningModel, make_head
from finetune.pretrained import load_encoder
from finetune.saved import model_folder_name, save_finetuned_model, set_aside
from model.matmul import set_matmul_dtype


@dataclasses.dataclass
class TaskData:
    task: object
    train: dict
    evals: Dict[str, dict]  # metric suffix → features
    tests: Dict[str, dict]  # split → features
    baseline: Dict[str, float]


def prepare_tasks(tasks, data_root, tokenizer, config, do_train=True, do_predict=False, say=print) -> List[TaskData]:
    """Reads every split first (so a bad file stops the run before any training), then featurizes. A row
    that cannot be parsed stops the run, or with config.skip_bad_rows is skipped (one line per file)."""
    bad_rows = BadRows(skip=config.skip_bad_rows)

    def read(task, split):
        rows = task.read(data_root, split, bad_rows=bad_rows, config=config)
        bad_rows.report(say)
        return rows

    examples = []
    for task in tasks:
        train = read(task, "train") if do_train else None
        evals = {suffix: read(task, split) for split, suffix in task.eval_splits().items()}
        tests = {}
        if do_predict:
            missing = task.missing_test_splits(data_root)
            for note in missing.values():
                say(note)
            tests = {split: read(task, split) for split in task.test_splits() if split not in missing}
        examples.append((task, train, evals, tests))
    prepared = []
    for task, train, evals, tests in examples:
        start = time.monotonic()
        baseline = {}
        if train is not None:
            for suffix, rows in evals.items():
                baseline.update(task.majority_baseline(train, rows, suffix))
        data = TaskData(
            task=task,
            train=task.featurize(train, tokenizer, config, training=True) if train is not None else None,
            evals={suffix: task.featurize(rows, tokenizer, config) for suffix, rows in evals.items()},
            tests={split: task.featurize(rows, tokenizer, config) for split, rows in tests.items()},
            baseline=baseline)
        splits = dict(zip(data.evals, task.eval_splits()))  # metric suffix → split name
        counts = ([f"train {data.train['count']}"] if train is not None else []) + [
            f"{splits[suffix]} {features['count']}" for suffix, features in data.evals.items()]
        counts = ", ".join(counts)
        say(f"{task.name}: featurized ({counts or 'no splits'}) in {time.monotonic() - start:.1f} s")
        prepared.append(data)
    return prepared


@dataclasses.dataclass
class StartedTrial:
    """A trial built and ready to train (TrialRunner.start_trial)."""
    trial: int
    seed: int
    encoder: object
    model: object
    trainer: object
    reporter: object = None


def skips_padding(config):
    """config.skip_padding, its default (None) resolved: on where the backend takes a step's real-token count
    (TensorFlow), off under JAX."""
    if config.skip_padding is not None:
        return config.skip_padding
    return keras.backend.backend() == "tensorflow"


class TrialRunner:
    """`trainer_class(model, tasks, optimizer, config)`: a finetune.loop.BaseTrainer (default TFTrainer);
    `load_encoder(pretrained)`: the encoder each trial starts from; `results_dir`: where
    <task>_results.json go (default <model_dir>/results)."""

    def __init__(self, pretrained, config, task_data, model_dir, do_train=True, do_predict=False,
                 say=print, reporter_factory=None, trainer_class=None, load_encoder=load_encoder,
                 results_dir=None):
        if trainer_class is None:
            from finetune.tf_trainer import TFTrainer as trainer_class
        self.pretrained, self.config, self.task_data = pretrained, config, task_data
        self.trainer_class, self.load_encoder = trainer_class, load_encoder
        self.model_dir = pathlib.Path(model_dir)
        self.results_dir = pathlib.Path(results_dir) if results_dir is not None else self.model_dir / "results"
        self.do_train, self.do_predict, self.say = do_train, do_predict, say
        self.reporter_factory = reporter_factory
        self._results_started = set()  # results files this run has begun (older ones were set aside)

    @property
    def num_steps(self):
        return count_steps([d.train["count"] for d in self.task_data], self.config)

    def run_trial(self, trial):
        started = self.start_trial(trial)
        start = time.monotonic()
        if self.do_train:
            started.trainer.train(*self.train_arguments(started))
        return self.score_trial(started, time.monotonic() - start)

    def start_trial(self, trial):
        """The trial's model and trainer, built from seed + trial (a caller that trains several trials at
        once, studies.device_path.members, builds them here too, so each is what run_trial would have trained)."""
        config, tasks = self.config, [d.task for d in self.task_data]
        seed = config.seed + trial
        keras.utils.set_random_seed(seed)
        encoder = self.load_encoder(self.pretrained)
        model = FinetuningModel(encoder, {t.name: make_head(t, encoder.hidden_size, config, encoder.dtype_policy)
                                          for t in tasks})
        set_matmul_dtype(model, config.matmul_dtype)  # the encoder and heads' dense products (model/matmul.py)
        encoder.skip_padding = skips_padding(config)  # model/unpadding.py
        trainer = self.trainer_class(model, tasks, build_optimizer(config, self.num_steps, encoder.num_layers),
                                     config)
        reporter = self.reporter_factory(trial) if self.reporter_factory else None
        return StartedTrial(trial, seed, encoder, model, trainer, reporter)

    def train_arguments(self, started):
        """trainer.train's arguments for the trial: (features by task, steps, seed, reporter, label)."""
        tasks = "+".join(d.task.name for d in self.task_data)
        label = f"{tasks} trial {started.trial + 1}/{self.config.num_trials}"
        return ({d.task.name: d.train for d in self.task_data}, self.num_steps, started.seed, started.reporter,
                label)

    def score_trial(self, started, train_seconds):
        """After training: evaluate (and predict, save) each task; the trial's results by task."""
        config, trial, trainer, reporter = self.config, started.trial, started.trainer, started.reporter
        results = {}
        for data in self.task_data:
            scores = {}
            for suffix, features in data.evals.items():
                outputs = trainer.predict(data.task, features)
                values, extra = data.task.evaluate(features, outputs, config, suffix)
                scores.update(values)
                answer = constant_answer(data.task, outputs)
                if answer is not None:
                    self.say(constant_warning(data.task.name, trial + 1, f"dev{suffix}", answer))
                if extra:
                    self._write_eval_extra(data.task, trial, suffix, extra)
            if reporter is not None:
                reporter.scalars(reporter.eval_writer, self.num_steps, scores)
            if self.do_predict:
                folder = self.model_dir / "test_predictions" / f"trial_{trial + 1}"
                for split, features in data.tests.items():
                    path = data.task.write_test_predictions(folder, split, features,
                                                            trainer.predict(data.task, features))
                    self.say(f"{data.task.name}: wrote {path}")
            if config.save_finetuned_models:
                folder = self.model_dir / "finetuning_models" / model_folder_name(data.task.file_stem, trial + 1)
                save_finetuned_model(folder, started.encoder, started.model.heads[data.task.name], data.task,
                                     config, self.pretrained, scores)
            results[data.task.name] = {"trial": trial + 1, "seed": started.seed, "metrics": scores,
                                       "train_seconds": round(train_seconds, 3)}
        if reporter is not None:
            reporter.close()
        return results

    def _write_eval_extra(self, task, trial, suffix, extra):
        folder = self.results_dir / f"{task.file_stem}_predictions_trial_{trial + 1}"
        for name, values in extra.items():
            save_json(values, folder / f"{name}{suffix}.json")

    def run(self, resume=False):
        """Every trial; with `resume`, the trials a results file of the same config and tasks already holds
        are kept and only the rest run (a run cut off between trials continues)."""
        all_trials = self.trials_so_far(resume)
        for trial in range(len(next(iter(all_trials.values()))), self.config.num_trials):
            self.record_trial(all_trials, trial, self.run_trial(trial))
        return all_trials

    def trials_so_far(self, resume):
        """{task: finished trials}: none, or with `resume` those its results files hold."""
        all_trials = {d.task.name: [] for d in self.task_data}
        if resume:
            all_trials = self.finished_trials() or all_trials
        first = len(next(iter(all_trials.values())))
        if first:
            self.say(f"resuming after {first} finished trial(s) in {self.results_dir}")
            self._results_started.update(self.results_path(d.task) for d in self.task_data)
        return all_trials

    def record_trial(self, all_trials, trial, results):
        """Adds a trial's results to `all_trials`, says them and rewrites the results files."""
        for name, result in results.items():
            all_trials[name].append(result)
            self.say(f"{name} trial {trial + 1}: " + ", ".join(
                f"{key} {value:.2f}" for key, value in result["metrics"].items()))
        self.write_results(all_trials, complete=trial + 1 == self.config.num_trials)

    def results_path(self, task):
        return self.results_dir / f"{task.file_stem}_results.json"

    def finished_trials(self):
        """{task: trials} of this run's results files when all of them were written by the same config (but
        for the number of trials: a rerun with more seeds continues after the trials done, seeds seed, seed+1,
        … being the same) and tasks and hold the same number of trials; None otherwise (the run starts over)."""
        found = {}
        for data in self.task_data:
            path = self.results_path(data.task)
            result = json.loads(path.read_text()) if path.is_file() else None
            if (result is None or not same_but_trials(result.get("config"), self.config.to_dict())
                    or result.get("tasks_trained_together") != [d.task.name for d in self.task_data]):
                return None
            found[data.task.name] = result["trials"]
        return found if len({len(trials) for trials in found.values()}) == 1 else None

    def write_results(self, all_trials, complete):
        for data in self.task_data:
            trials = all_trials[data.task.name]
            names = list(trials[0]["metrics"]) if trials else []
            summary = {name: metrics_lib.summary([t["metrics"][name] for t in trials]) for name in names}
            path = self.results_path(data.task)
            if path not in self._results_started:
                set_aside(path)  # a previous run's results are kept beside, never overwritten
                self._results_started.add(path)
            spec = getattr(data.task, "describe", dict)()  # a task of the user's files: its spec
            own = {"task_spec": spec} if spec else {}
            save_json({"task": data.task.name, "primary_metric": data.task.primary_metric,
                       "label_names": data.task.label_names, **own,
                       "model_folder": str(self.pretrained.folder), "checkpoint": str(self.pretrained.checkpoint),
                       "tasks_trained_together": [d.task.name for d in self.task_data],
                       "num_train_steps": self.num_steps, "config": self.config.to_dict(),
                       "trials_done": len(trials), "trials_requested": self.config.num_trials,
                       "complete": complete, "majority_baseline": data.baseline, "trials": trials,
                       "summary": summary, **self.results_extra()}, path)

    def results_extra(self):
        """What a subclass adds to every results file, written with the rest in one write (a run killed between
        two writes would leave a file its resumption cannot read: training_jax.finetune.RecordingTrialRunner)."""
        return {}


def same_but_trials(saved, current):
    """Two configs' dicts equal but for num_trials (and trials beyond the saved ones are run on top)."""
    return saved is not None and ({**saved, "num_trials": None} == {**current, "num_trials": None}
                                  and saved["num_trials"] <= current["num_trials"])


def results_table(all_trials, task_data) -> str:
    """A readable table: per task and metric, the median, mean ± std over trials and the baseline."""
    lines = [f"{'task':<8} {'metric':<18} {'median':>8} {'mean ± std':>16} {'trials':>6} {'majority':>9}"]
    for data in task_data:
        trials = all_trials[data.task.name]
        for name in trials[0]["metrics"]:
            s = metrics_lib.summary([t["metrics"][name] for t in trials])
            base = data.baseline.get(name)
            lines.append(f"{data.task.name:<8} {name:<18} {s['median']:>8.2f} "
                         f"{s['mean']:>8.2f} ± {s['std']:<5.2f} {s['n']:>6} "
                         f"{'' if base is None else f'{base:.2f}':>9}")
    return "\n".join(lines)
