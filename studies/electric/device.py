"""The Electric ranking (studies/electric/ranking.py; its command line is cli.py, which imports this module)
with its pretraining on an accelerator that holds JAX but no TensorFlow, and back. The training is
training_jax.pretrain's, the moving there and back the RTD-vs-MLM study's (studies/rtd_vs_mlm/device.py); this
module adds what is Electric's: one arm, and the ranking of held-out sentences scored on the accelerator from
token ids, so that it needs no tokenizer there.

Here (TensorFlow):
  export   the resolved config, the examples as arrays (the last eval batches held out), the held-out
           sentences and their corrupted copies as token ids, export.json; prints the commands
There (JAX only; every command resumes, so each may be cut off and run again):
  size     the steps that fit the minutes at the measured speed (the config rewritten, as the study does)
  pretrain python3 -m studies.device_path.pretrain_export --model electric, in pieces under a time limit
  score    the ranking at every checkpoint saved so far, with inference.score's energy computation
  collect  the ranking, the metrics, the config and the newest weights (float16, in shards) into $OUT
Here again:
  import   the newest weights as <work>/models/electric_device_step<N>/, scored again by
           inference.score.Scorer as the CPU ranking scores; both rows in <work>/ranking.json under "device"
"""
import dataclasses
import json
import os
import pathlib
import re
import shutil
import time

from studies.electric.ranking import (CORRUPTIONS, MODEL_NAME, SHARDS, cloze_order_row, cloze_sample_row,
                                    corrupted_copies, electric_hparams, fractions_from_results, print_header,
                                    print_row, score_id_lists, scored_ranking, warmup_steps)
from studies.rtd_vs_mlm import device as study_device
from studies.rtd_vs_mlm.stages import log
from common import atomic
from common.errors import InputError
from training_jax import weights as jax_weights
from studies.device_path.export import read_examples, save_examples

ARM = "electric"  # the one arm of the export (export.json's one model, training_jax.pretrain's --model)
EXPORTER = "python -m studies.electric --device-export"
CONFIG_FILE = f"config_{ARM}.json"
SIZED_CONFIG_FILE = f"config_{ARM}_sized.json"
SENTENCES_FILE = "sentences.npz"  # the held-out sentences and their copies as token ids
RANKING_FILE = "ranking.json"  # on the accelerator in <export>/runs/electric/, and what comes back
CONFIG_BACK = "config.json"  # the config that trained, in what comes back
GROUPS = ("original", *CORRUPTIONS)
DEFAULT_MINUTES = 18.0  # three pieces in three calls of a 30-minute device budget (studies/electric/DEVICE.md)


# ---------------------------------------------------------------- here: export
def export_for_device(args, data_dir, out_dir, shown_as=None):
    """What the accelerator needs, into out_dir: the config as run_pretraining.py resolves it, the
    examples as arrays (the last eval_batch_size × num_eval_steps held out for evaluation), the held-out
    sentences with their copies as token ids, and export.json (last)."""
    from data.tokenization import file_sha256
    from configs.resolve import resolve_run
    from training_jax import pretrain as pretrain_jax

    out_dir.mkdir(parents=True, exist_ok=True)
    resolved = resolve_run(MODEL_NAME, json.dumps(electric_hparams(args, device=True)), data_dir)
    config, dataset_dir, metadata = resolved.config, resolved.dataset_dir, resolved.metadata
    config.save(out_dir / CONFIG_FILE)
    eval_count = config.eval_batch_size * config.num_eval_steps
    train_files = resolved.train_files
    examples = read_examples(dataset_dir, metadata, train_files)
    if len(examples["input_ids"]) < 2 * eval_count:
        raise InputError(f"{dataset_dir}: {len(examples['input_ids'])} examples, too few to hold out {eval_count} "
                         "for evaluation; build from more text (--corpus-mb) or lower num_eval_steps in --hparams")
    save_examples(out_dir / pretrain_jax.TRAIN_ARRAYS,
                               {k: v[:-eval_count] for k, v in examples.items()}, f"{len(train_files)} shard(s)")
    save_examples(out_dir / pretrain_jax.EVAL_ARRAYS, {k: v[-eval_count:] for k, v in examples.items()},
                               "the end of the last shard (held out: never trained on)")
    vocab_file = resolved.vocab_file
    count = export_sentences(args, config, vocab_file, out_dir / SENTENCES_FILE)
    steps = config.num_train_steps
    study = {"log_every": study_device.DEVICE_LOG_EVERY, "eval_every": {ARM: eval_every(steps)},
             "models": {ARM: {"config_file": CONFIG_FILE, "num_train_steps": steps,
                              "checkpoint_steps": checkpoint_steps(steps, args.device_checkpoints)}},
             "checkpoints": args.device_checkpoints, "eval_examples": eval_count, "sentences": count,
             "vocab_sha256": file_sha256(vocab_file)}
    study_device.write_study(out_dir, study)
    log(f"wrote {out_dir}: {config.model_size} Electric, batch {config.train_batch_size}, {count} sentences")
    study_device.show_commands(out_dir, device_commands(shown_as or out_dir, args.minutes or DEFAULT_MINUTES))


def export_sentences(args, config, vocab_file, path):
    """The ranking's held-out sentences and their corrupted copies (its own functions and seed) as token ids,
    cut as Scorer cuts them: ids_<group> (all rows end to end, uint16) and lengths_<group> per group, and
    kept (the sentences that have a replaced copy). Returns the number of sentences."""
    import numpy as np

    from studies.shared_data import plain_wikipedia_sentences
    from data.tokenization import load_tokenizer

    tokenizer = load_tokenizer(vocab_file=vocab_file, lower_case=config.do_lower_case)
    sentences = plain_wikipedia_sentences(args.shared_data / SHARDS.format(1), args.sentences)
    copies, kept = corrupted_copies(sentences, tokenizer)
    room = config.max_seq_length - 2
    arrays = {"kept": np.asarray(kept, "int32")}
    for group, texts in (("original", sentences), *((name, copies[name]) for name in CORRUPTIONS)):
        id_lists = [list(ids)[:room] for ids in tokenizer.encode_batch(texts)]
        arrays[f"ids_{group}"] = np.asarray([i for ids in id_lists for i in ids], "uint16")
        arrays[f"lengths_{group}"] = np.asarray([len(ids) for ids in id_lists], "int32")
    np.savez_compressed(path, **arrays)
    return len(sentences)


def read_sentences(path):
    """({group: [id list]}, kept) of export_sentences' file."""
    import numpy as np

    if not path.is_file():
        raise InputError(f"{path}: missing; export again ({EXPORTER})")
    with np.load(path) as arrays:
        groups = {}
        for group in GROUPS:
            ids, ends = arrays[f"ids_{group}"].astype("int32"), np.cumsum(arrays[f"lengths_{group}"])
            groups[group] = [ids[end - length:end].tolist()
                             for end, length in zip(ends, arrays[f"lengths_{group}"])]
        return groups, arrays["kept"].tolist()


def checkpoint_steps(steps, count):
    """`count` evenly spaced steps ending at `steps` (a multiple of count once sized)."""
    every = max(1, steps // count)
    return sorted({min(steps, every * (k + 1)) for k in range(count - 1)} | {steps})


def eval_every(steps):
    return max(1, steps // study_device.EVALS_PER_RUN)


def device_commands(export, minutes):
    """[(note, shell line)] for the accelerator, in order."""
    export = pathlib.Path(export)
    runs = export / study_device.RUNS
    pieces = -(-minutes // study_device.PIECE_MINUTES)
    jax_env = "KERAS_BACKEND=jax"  # python3: the accelerator machines' interpreter, which holds JAX
    piece = study_device.PIECE_MINUTES
    return [
        (f"size (about 3 min: a compile and 30 timed steps): the steps that fit {minutes:g} minutes",
         f"{jax_env} python3 -m studies.electric --device-size {export} --minutes {minutes:g}"),
        (f"pretrain ({piece:g} min a piece; run it about {pieces:g} times, until it says done)",
         f"mkdir -p {runs} && {jax_env} python3 -m studies.device_path.pretrain_export --export {export} --model {ARM} "
         f"--out {runs}/{ARM} --time-limit-minutes {piece:g} >> {runs}/{ARM}.log 2>&1; tail -n 3 {runs}/{ARM}.log"),
        ("score every checkpoint saved so far (new ones only; under a minute each)",
         f"{jax_env} python3 -m studies.electric --device-score {export}"),
        ("collect what comes back (at most 8 files; seconds)",
         f"python3 -m studies.electric --device-collect {export} --out $OUT")]


# ---------------------------------------------------------------- there: size, score, collect
def on_the_accelerator(args):
    """The accelerator's stages, under JAX and without TensorFlow (as the machines there are)."""
    from training_jax.pretrain import without_tensorflow

    os.environ.setdefault("KERAS_BACKEND", "jax")
    without_tensorflow()
    if args.device_size:
        size_on_device(args.device_size, args.minutes or DEFAULT_MINUTES)
    elif args.device_score:
        score_on_device(args.device_score)
    else:
        collect_from_device(args.device_collect, args.out)


def size_on_device(study_dir, minutes, measure_steps=30):
    """Measures the exported config's steps/s and compile seconds, and sets the steps (a multiple of the
    checkpoint count) that fit `minutes` with a compile per piece and 5% for evaluations; the warmup and
    checkpoints follow. Writes config_electric_sized.json (the exported one kept) and export.json."""
    from configs.pretraining_config import PretrainingConfig
    from studies.device_path.pretrain_export import measure

    study_dir = pathlib.Path(study_dir)
    study = study_device.read_study(study_dir, EXPORTER)
    study_device.refuse_resizing(study_dir)
    entry = study["models"][ARM]
    exported = entry.get("exported_config_file", entry["config_file"])
    rate, compile_seconds = measure(study_dir, exported, ARM, measure_steps)
    config = PretrainingConfig.load(study_dir / exported)
    log(f"{rate:.2f} steps/s of batch {config.train_batch_size} after a {compile_seconds:.0f} s compile")
    pieces = -(-minutes // study_device.PIECE_MINUTES)
    count = study["checkpoints"]
    steps = study_device.steps_within(minutes, 1.05 / rate, pieces * compile_seconds, count)
    if steps < count:
        raise InputError(f"--minutes {minutes:g}: too short for {count} steps at {rate:.2f} steps/s after "
                         f"{pieces:g} compile(s) of {compile_seconds:.0f} s; give more minutes")
    config = dataclasses.replace(config, num_train_steps=steps, num_warmup_steps=warmup_steps(steps),
                                 save_checkpoints_steps=steps // count)
    config.save(study_dir / SIZED_CONFIG_FILE)
    study["models"][ARM] = {"config_file": SIZED_CONFIG_FILE, "num_train_steps": steps,
                            "checkpoint_steps": checkpoint_steps(steps, count), "exported_config_file": exported,
                            "measured_steps_per_second": round(rate, 3),
                            "measured_compile_seconds": round(compile_seconds, 1)}
    study["eval_every"][ARM] = eval_every(steps)
    study["sized_for_minutes"] = minutes
    study_device.write_study(study_dir, study)
    tokens = steps * config.train_batch_size * config.max_seq_length
    log(f"sized: {steps} steps of batch {config.train_batch_size} ({tokens / 1e6:.0f}M tokens), checkpoints "
        f"{study['models'][ARM]['checkpoint_steps']}; expected "
        f"{(steps * 1.05 / rate + pieces * compile_seconds) / 60:.1f} min in {pieces:g} piece(s)")
    return steps


def score_on_device(study_dir):
    """The ranking row of every checkpoint saved so far and not scored yet, into runs/electric/ranking.json
    ({"vocab_sha256", "sentences", "steps": {step: row with every text's score}}); prints the table.
    Float32 matmuls at full precision, as the CPU's Scorer computes them (a GPU's default is TF32)."""
    import jax

    from configs.pretraining_config import PretrainingConfig
    from storage.model_folder import checkpoint_exists, checkpoint_prefix

    jax.config.update("jax_default_matmul_precision", "highest")
    study_dir = pathlib.Path(study_dir)
    study = study_device.read_study(study_dir, EXPORTER)
    entry = study["models"][ARM]
    config = PretrainingConfig.load(study_dir / entry["config_file"])
    groups, kept = read_sentences(study_dir / SENTENCES_FILE)
    id_lists = [ids for group in GROUPS for ids in groups[group]]
    run_dir = study_dir / study_device.RUNS / ARM
    path = run_dir / RANKING_FILE
    ranking = (json.loads(path.read_text()) if path.is_file() else
               {"vocab_sha256": study["vocab_sha256"], "sentences": study["sentences"], "steps": {}})
    pretrainer = None
    for step in entry["checkpoint_steps"]:
        weights_path = pathlib.Path(checkpoint_prefix(run_dir, step))
        if str(step) in ranking["steps"] or not checkpoint_exists(weights_path):
            continue
        start = time.perf_counter()
        weights = jax_weights.read_checkpoint(weights_path)
        pretrainer = (jax_weights.pretrainer_with_weights(config, weights, weights_path) if pretrainer is None
                      else jax_weights.assign_weights(pretrainer, weights, weights_path))
        results = score_id_lists(pretrainer, config, id_lists)
        row = fractions_from_results(results, len(groups["original"]), kept, weights_path)
        row.update(cloze_sample_row(pretrainer, config, groups["original"],
                                    [r["score"] for r in results[:len(groups["original"])]]))
        row.update(cloze_order_row(pretrainer, config, id_lists, len(groups["original"]), kept, weights_path))
        ranking["steps"][str(step)] = {**row, "seconds": time.perf_counter() - start,
                                       "scores": [r["score"] for r in results]}
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_json(path, ranking)
    if not ranking["steps"]:
        log(f"no checkpoint saved yet in {run_dir}; pretrain first")
        return
    print_header(ranking["sentences"], "shard 1, scored on the accelerator")
    for step, row in sorted(ranking["steps"].items(), key=lambda item: int(item[0])):
        print_row(step, row)


def newest_weights_step(folder):
    """The largest N of the run's ckpt-N, or of weights-<N>.npz (whole or in shards: what came back) in
    `folder`, or None."""
    steps = [int(match.group(1)) for path in pathlib.Path(folder).glob("weights-*.npz")
             if (match := re.match(r"weights-(\d+)(\.part\d+of\d+)?\.npz$", path.name))]
    return max(steps + jax_weights.checkpoint_steps(folder), default=None)


def collect_from_device(study_dir, out):
    """Into <out>/electric/ (at most 6 files): ranking.json, metrics.jsonl, the config that trains, and the
    newest checkpoint's weights in shards. Whatever exists so far: run it after every piece, so that a
    machine taken back mid-way still returned the latest progress."""
    from pretrain_loop.metrics_file import METRICS_FILE

    study_dir, out = pathlib.Path(study_dir), pathlib.Path(out)
    study = study_device.read_study(study_dir, EXPORTER)
    entry = study["models"][ARM]
    missing = [name for name in (METRICS_FILE, RANKING_FILE)
               if not study_device.copy_run_file(study_dir, out, ARM, name)]
    (out / ARM).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(study_dir / entry["config_file"], out / ARM / CONFIG_BACK)
    newest = newest_weights_step(study_dir / study_device.RUNS / ARM)
    last = entry["checkpoint_steps"][-1]
    if newest is not None:
        study_device.copy_weights_in_shards(study_dir, out, ARM, newest)
    if newest != last:
        missing.append(f"the weights of step {last}" + (f" (brought step {newest})" if newest else ""))
    study_device.log_collected(out, missing)


# ---------------------------------------------------------------- here: import and score again
def import_device_results(args, data_dir, results_dir):
    """The newest weights that came back as <work>/models/electric_device_step<N>/ (a normal model
    folder), scored again by inference.score.Scorer on the ranking's sentences; prints the accelerator's rows
    and the one scored here, and keeps both in <work>/ranking.json under "device"."""
    import numpy as np

    from configs.pretraining_config import PretrainingConfig
    from data import paths, tfrecords
    from data.tokenization import file_sha256
    from inference.score import Scorer
    from storage import model_folder
    from studies.shared_data import plain_wikipedia_sentences
    from configs.resolve import vocab_source
    from training_jax.weights import weights_file

    source = results_dir / ARM
    for name in (CONFIG_BACK, RANKING_FILE):
        if not (source / name).is_file():
            raise InputError(f"{source / name}: missing; on the accelerator run --device-score and then "
                             f"--device-collect EXPORT --out $OUT, and pass the folder that came back")
    ranking = json.loads((source / RANKING_FILE).read_text())
    dataset_dir = paths.pretrain_tfrecords_dir(data_dir)
    vocab_file = vocab_source(tfrecords.load_metadata(dataset_dir), dataset_dir)
    if file_sha256(vocab_file) != ranking["vocab_sha256"]:
        raise InputError(f"{source / RANKING_FILE}: scored with another vocabulary than {vocab_file}; pass the "
                         "--work-dir the export was made from")
    step = newest_weights_step(source)
    if step is None:
        raise InputError(f"{source}: no weights-<step>.npz came back; run --device-collect after a checkpoint is "
                         "saved and copy its files here")
    config = PretrainingConfig.load(source / CONFIG_BACK)
    folder = data_dir / "models" / f"{MODEL_NAME}_device_step{step}"
    if not model_folder.is_complete(folder):
        weights = jax_weights.read_weights(source, weights_file(step))
        pretrainer = jax_weights.pretrainer_with_weights(config, weights, source / weights_file(step))
        study_device.write_model_folder_for(folder, config, pretrainer, vocab_file, step)
        log(f"imported {folder}")
    sentences = plain_wikipedia_sentences(args.shared_data / SHARDS.format(1), ranking["sentences"])
    start = time.perf_counter()
    row, scores = scored_ranking(Scorer(folder), sentences)
    row["seconds"] = time.perf_counter() - start
    device_row = ranking["steps"].get(str(step))
    if device_row is not None:
        if len(device_row["scores"]) != len(scores):
            raise InputError(f"{source / RANKING_FILE}: {len(device_row['scores'])} texts scored there, {len(scores)} "
                             "here; pass the --shared-data and --work-dir the export was made from")
        row["max_abs_score_difference"] = float(np.max(np.abs(np.subtract(scores, device_row["scores"]))))
    keep_device_rows(data_dir / "ranking.json", folder.name, step, ranking, row, device_run_note(source))
    print_header(ranking["sentences"], "shard 1: the accelerator's rows, then the newest scored here")
    for device_step, device_row in sorted(ranking["steps"].items(), key=lambda item: int(item[0])):
        print_row(f"{device_step} (accelerator)", device_row)
    print_row(f"{step} (here, {folder.name})", row)
    if "max_abs_score_difference" in row:
        print(f"largest score difference between the accelerator and here: {row['max_abs_score_difference']:.2e}")


def device_run_note(source):
    """What metrics.jsonl says of the run: finished (its run record) or how far it got."""
    from pretrain_loop.metrics_file import METRICS_FILE, read_metrics

    if not (source / METRICS_FILE).is_file():
        return {"finished": False}
    splits, run = read_metrics(source)
    if run is not None:
        return {"finished": True, "num_train_steps": run["num_train_steps"], "device": run["device"],
                "steps_per_second": run["steps_per_second"], "wall_clock_seconds": run["wall_clock_seconds"]}
    return {"finished": False, "last_logged_step": splits["train"][-1]["step"] if splits["train"] else 0}


def keep_device_rows(path, model, step, ranking, row, run_note):
    """<work>/ranking.json's "device" entry: the accelerator's rows (without the per-text scores) and the
    row scored here; the CPU rows beside it are kept."""
    results = json.loads(path.read_text()) if path.is_file() else {}
    results["device"] = {"model": model, "run": run_note,
                         "steps": {s: {k: v for k, v in r.items() if k != "scores"}
                                   for s, r in ranking["steps"].items()},
                         "rescored": {str(step): row}}
    atomic.write_json(path, results)
