"""Does Electric's text score learn word order? Held-out Wikipedia sentences against corrupted copies, at
every checkpoint of one Electric pretraining run on Wikipedia.

    python -m studies.electric.ranking --work-dir runs/electric_ranking            # train, then score
    python -m studies.electric.ranking --work-dir runs/electric_ranking --no-train # score what is saved

Needs ELECTRA_SHARED_DATA (or --shared-data). Builds a dataset from the first --corpus-mb MB of Wikipedia
shard 0 with a WordPiece vocabulary of --vocab-size learned from it, pretrains an Electric model
(run_pretraining.py in a subprocess: a killed run resumes), saving every --eval-every steps, then scores
--sentences plain sentences from shard 1 (other articles) with each checkpoint (inference.score.Scorer):

- swap: the fraction of sentences whose score is above the same sentence with two different words
  exchanged (the same tokens in another order: only context can tell them apart; chance is 0.5);
- shuffle: the same, against all the words in a random order;
- replace: the fraction above a copy with two one-token words replaced by random one-token words (rarer
  words out of place: even unigram frequencies see most of these);
- sample: the fraction above a copy with one token replaced by a draw from the checkpoint's own cloze
  model q (not the original token): the kind of fake the energies are trained on, so this is what the
  objective promises, where swapped words may be outside what the data or q ever write;
- how much the energies depend on context: the mean standard deviation of one token's energy across its
  occurrences in the originals, against the standard deviation between tokens' mean energies (a
  context-blind energy has the first near 0, and then swaps sit at chance);
- the swap, shuffle and replace fractions again, with the same texts scored by the checkpoint's two-tower
  cloze model (Σ log q, inference.score --scorer cloze) instead of the energies: the other one-pass score an
  Electric model has, and a check that the copies can be told apart by context at all.

With --reference-electra the same data, model size and schedule train plain ELECTRA instead (model
electra_reference), scored by its discriminator's logits of "replaced" in the energies' place (-Σ logit;
those are no energies, so inference.score refuses the model, and the sample and cloze columns are n/a): the
control for whether a discriminator learns word order at all at this budget. Its rows go to
<work-dir>/ranking_electra_reference.json.

Prints one row per checkpoint and keeps them in <work-dir>/ranking.json (scored checkpoints are not
scored again, unless scored before the margins and the cloze score existed), with the discriminator's
training AUC at that step: below 0.5, the energies do not yet offset log q, so "real" and "fake" are told
apart worse than by chance (docs/reproduction.md#electric). The real-data test
(tests/test_electric.py) runs the same measurement on a 250-step model.

The same measurement after pretraining on an accelerator that holds JAX but no TensorFlow
(studies/electric/device.py; docs/jax_gpu.md#electric has the runbook):
  --device-export DIR    here: the dataset, the resolved config (electra_small by default), the examples as
                         arrays and the held-out sentences with their corrupted copies as token ids, into DIR;
                         prints the accelerator's commands (also DIR/COMMANDS.txt) and stops
  --device-size DIR      there: the steps that fit --minutes at the measured speed
  --device-score DIR     there: the ranking at every checkpoint saved so far, from the pre-tokenized copies
  --device-collect DIR   there: the ranking, the metrics and the last weights into --out (at most 8 files)
  --device-results OUT   here: the last weights as models/electric_device_step<N>/, scored again with
                         inference.score.Scorer; both rows in <work-dir>/ranking.json under "device"
"""
import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import time

from studies.shared_data import plain_wikipedia_sentences, write_wikipedia_slice
from common.errors import InputError, exit_on_input_error

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL_NAME = "electric"
REFERENCE_NAME = "electra_reference"  # --reference-electra's model
SHARDS = "corpus/enwiki_wikiextractor/enwiki_part0{}.txt.gz"
TRAINING_SHARDS = (0, 2, 3)  # read in this order up to --corpus-mb; shard 1 holds the held-out sentences
CORRUPTIONS = ("swap", "shuffle", "replace")
# What the flags default to on the CPU and for an accelerator (--device-export): docs/jax_gpu.md#electric
# says why electra_small and this corpus (its arrays about 30 MB, inside what one device call carries).
CPU_DEFAULTS = {"model_size": "electra_tiny", "batch_size": 32, "learning_rate": 1e-3, "corpus_mb": 20.0,
                "model": {"hidden_size": 128, "num_layers": 4, "num_heads": 2, "intermediate_size": 512,
                          "embedding_size": 128}}
DEVICE_DEFAULTS = {"model_size": "electra_small", "batch_size": 128, "learning_rate": 5e-4, "corpus_mb": 120.0,
                   "model": {}}


def swap_two_words(sentence, rng):
    """The same words, two different ones (final period kept) exchanged: the same tokens, another order."""
    words = sentence.split()[:-1]
    while True:
        i, j = sorted(rng.sample(range(len(words)), 2))
        if words[i].lower().strip(",") != words[j].lower().strip(","):
            words[i], words[j] = words[j], words[i]
            return " ".join(words) + " ."


def shuffle_words(sentence, rng):
    """All the words in a random other order (final period kept): the grossest order violation."""
    words = sentence.split()[:-1]
    shuffled = words[:]
    while shuffled == words:
        rng.shuffle(shuffled)
    return " ".join(shuffled) + " ."


def replace_two_words(sentence, rng, tokenizer, words_of_one_token):
    """Two words that are one token each replaced by other one-token words drawn uniformly from the
    vocabulary: as many tokens as the original, two of them out of place (None: fewer than two such words)."""
    words = sentence.split()[:-1]
    lengths = [len(ids) for ids in tokenizer.encode_batch([w.strip(",") for w in words])]
    single = [i for i, n in enumerate(lengths) if n == 1]
    if len(single) < 2:
        return None
    for i in rng.sample(single, 2):
        comma = "," if words[i].endswith(",") else ""
        replacement = rng.choice(words_of_one_token)
        while replacement == words[i].strip(",").lower():
            replacement = rng.choice(words_of_one_token)
        words[i] = replacement + comma
    return " ".join(words) + " ."


def context_spread(results, min_count=5):
    """(mean std of one token's energy across its occurrences, std of the tokens' mean energies), over the
    tokens seen at least `min_count` times: how much the energy depends on context vs on the token."""
    import collections

    import numpy as np

    by_token = collections.defaultdict(list)
    for result in results:
        for token, energy in zip(result["tokens"], result["energies"]):
            by_token[token].append(energy)
    frequent = [values for values in by_token.values() if len(values) >= min_count]
    if len(frequent) < 2:
        return float("nan"), float("nan")
    return float(np.mean([np.std(v) for v in frequent])), float(np.std([np.mean(v) for v in frequent]))


def corrupted_copies(sentences, tokenizer, seed=0):
    """({"swap", "shuffle", "replace": the corrupted texts}, kept): the replace list holds only the sentences
    with two one-token words, whose indices are `kept`. The same seed gives the same texts (the accelerator
    scores the copies the export made of them, and the import here makes them again)."""
    vocab = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    one_token_words = [token for token in vocab if token.isalpha() and token.islower()]
    rng = random.Random(seed)
    swapped = [swap_two_words(s, rng) for s in sentences]
    replaced = [replace_two_words(s, rng, tokenizer, one_token_words) for s in sentences]
    kept = [i for i, r in enumerate(replaced) if r is not None]
    shuffled = [shuffle_words(s, rng) for s in sentences]
    return {"swap": swapped, "shuffle": shuffled, "replace": [replaced[i] for i in kept]}, kept


def order_fractions(scores, count, kept, where):
    """Scores laid out as the originals (`count`), then each of CORRUPTIONS: {"swap", "shuffle", "replace":
    fraction of originals scored above their corrupted copy; "swap_margin", "shuffle_margin": the mean score
    of the originals minus their copies' (nats: a trend shows in it before the fractions leave chance, and a
    context-blind score leaves it at 0)}."""
    import numpy as np

    scores = np.asarray(scores, np.float64)
    if not np.isfinite(scores).all():
        raise FloatingPointError(f"{where}: non-finite scores")
    original, swap, shuffle = scores[:count], scores[count:2 * count], scores[2 * count:3 * count]
    replace = scores[3 * count:]
    return {"swap": float(np.mean(original > swap)), "shuffle": float(np.mean(original > shuffle)),
            "replace": float(np.mean(original[kept] > replace)),
            "swap_margin": float(np.mean(original - swap)), "shuffle_margin": float(np.mean(original - shuffle))}


def fractions_from_results(results, count, kept, where):
    """The ranking of texts scored by the energies, laid out as order_fractions reads them: its row, with
    "replace_pairs" and "within_token", "between_tokens" (context_spread of the originals' energies).
    `results` are [{"score", "tokens", "energies"}]; tokens may be strings or ids (only compared with each
    other)."""
    within, between = context_spread(results[:count])
    return {**order_fractions([r["score"] for r in results], count, kept, where), "replace_pairs": len(kept),
            "within_token": within, "between_tokens": between}


def cloze_order_row(pretrainer, config, id_lists, count, kept, where):
    """The same texts (token-id lists, laid out as order_fractions reads them) ranked by the two-tower cloze
    model's Σ log q instead of the energies (inference.score's --scorer cloze): {"cloze_swap", "cloze_shuffle",
    "cloze_replace", "cloze_swap_margin", "cloze_shuffle_margin"}. Where these rank and the energies do not,
    the copies are sound and it is the energies that have not learned order."""
    scores = [r["score"] for r in score_id_lists(pretrainer, config, id_lists, scorer="cloze")]
    return {f"cloze_{key}": value for key, value in order_fractions(scores, count, kept, where).items()}


def cloze_samples(pretrainer, config, id_lists, seed=0, batch_size=32):
    """Each token-id list with one position (drawn uniformly) replaced by a draw from the model's own cloze
    distribution q at that position, never the original token nor [CLS]/[SEP]/[MASK].

    Why: such draws are the fakes Electric's noise-contrastive training learns from, so an original above
    its copy is what the objective asks of the energies directly, where swapped or shuffled words may lie
    outside what either the data or q ever write (docs/reproduction.md#electric). Backend-neutral (ids in,
    no tokenizer): the accelerator draws them as the CPU does, from the checkpoint's own q and `seed`."""
    import numpy as np

    from inference.score import batch_inputs

    rng = np.random.default_rng(seed)
    never = [config.cls_token_id, config.sep_token_id, config.mask_token_id]
    sampled = []
    for start in range(0, len(id_lists), batch_size):
        chunk = id_lists[start:start + batch_size]
        logits = np.asarray(pretrainer.cloze_logits(batch_inputs(config, chunk), training=False), np.float64)
        for row, ids in enumerate(chunk):
            position = int(rng.integers(len(ids)))
            scores = logits[row, position + 1].copy()  # + 1: [CLS] comes first
            scores[never + [int(ids[position])]] = -np.inf
            probs = np.exp(scores - scores.max())
            copy = [int(i) for i in ids]
            copy[position] = int(rng.choice(len(probs), p=probs / probs.sum()))
            sampled.append(copy)
    return sampled


def score_id_lists(pretrainer, config, id_lists, scorer="energy"):
    """[{"score", "tokens" (ids), "energies" (or "log_q")}] of token-id lists, in batches of inference.score's
    size, all padded to the longest text (two shapes in all: the eager forward pass compiles its operations
    once); `scorer` as inference.score's."""
    from inference.score import DEFAULT_BATCH_SIZE, TOKEN_VALUES, score_ids

    length = 2 + max(len(ids) for ids in id_lists)
    results = []
    for start in range(0, len(id_lists), DEFAULT_BATCH_SIZE):
        chunk = id_lists[start:start + DEFAULT_BATCH_SIZE]
        results += [{"score": score, "tokens": ids, TOKEN_VALUES[scorer]: values}
                    for ids, (score, values) in zip(chunk, score_ids(pretrainer, config, chunk, length, scorer))]
    return results


def cloze_sample_row(pretrainer, config, id_lists, original_scores, seed=0):
    """{"sample": fraction of the texts (token-id lists, already scored as `original_scores`) scored above
    their cloze-sample copy (cloze_samples), "sample_pairs"}; the same on the CPU and the accelerator."""
    import numpy as np

    sampled = score_id_lists(pretrainer, config, cloze_samples(pretrainer, config, id_lists, seed))
    return {"sample": float(np.mean(np.asarray(original_scores) > [r["score"] for r in sampled])),
            "sample_pairs": len(sampled)}


def texts_and_copies(sentences, tokenizer, seed=0):
    """(the originals followed by each of CORRUPTIONS' copies, kept: corrupted_copies')."""
    copies, kept = corrupted_copies(sentences, tokenizer, seed)
    return sentences + [text for name in CORRUPTIONS for text in copies[name]], kept


def copy_ids(tokenizer, config, sentences, seed=0):
    """(the token ids of texts_and_copies' texts, cut as inference.score.Scorer.score_texts cuts them
    (max_seq_length - 2), kept): tokenized once for every score of the ranking."""
    texts, kept = texts_and_copies(sentences, tokenizer, seed)
    room = config.max_seq_length - 2
    return [list(encoded[:room]) for encoded in tokenizer.encode_batch(texts)], kept


def scored_ranking(scorer, sentences, seed=0):
    """(ranking_fractions' row, every text's score in the order originals, swap, shuffle, replace)."""
    ids, kept = copy_ids(scorer.tokenizer, scorer.config, sentences, seed)
    results = score_id_lists(scorer.pretrainer, scorer.config, ids)
    row = fractions_from_results(results, len(sentences), kept, scorer.folder)
    row.update(cloze_sample_row(scorer.pretrainer, scorer.config, ids[:len(sentences)],
                                [r["score"] for r in results[:len(sentences)]], seed))
    row.update(cloze_order_row(scorer.pretrainer, scorer.config, ids, len(sentences), kept, scorer.folder))
    return row, [r["score"] for r in results]


def ranking_fractions(scorer, sentences, seed=0):
    """fractions_from_results' row of the energies, with cloze_sample_row's and cloze_order_row's."""
    return scored_ranking(scorer, sentences, seed)[0]


def reference_fractions(path, sentences, seed=0):
    """fractions_from_results' row for a plain ELECTRA checkpoint (`path` as Scorer's), its discriminator's
    logits of "replaced" summed in the energies' place (-Σ logit over the text's tokens)."""
    from inference.score import folder_tokenizer
    from storage.model_folder import load_model_folder

    folder = load_model_folder(path)
    tokenizer = folder_tokenizer(folder)
    ids, kept = copy_ids(tokenizer, folder.config, sentences, seed)
    results = score_id_lists(folder.pretrainer, folder.config, ids)
    return fractions_from_results(results, len(sentences), kept, path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, default=None,
                        help="the study's folder (required but for the accelerator's stages)")
    parser.add_argument("--shared-data", type=pathlib.Path, default=os.environ.get("ELECTRA_SHARED_DATA"))
    parser.add_argument("--corpus-mb", type=float, default=None,
                        help="MB of text to train on: shard 0, then shards 2 and 3 (default 20; 120 with "
                             "--device-export)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--model-size", default=None, help="default electra_tiny; electra_small with --device-export")
    parser.add_argument("--model", default=None,
                        help="JSON of ModelConfig overrides of --model-size (default: hidden 128, 4 layers; none "
                             "with --device-export)")
    parser.add_argument("--hparams", default="{}", help="JSON of further PretrainingConfig overrides")
    parser.add_argument("--batch-size", type=int, default=None, help="default 32; 128 with --device-export")
    parser.add_argument("--learning-rate", type=float, default=None, help="default 1e-3; 5e-4 with --device-export")
    parser.add_argument("--steps", type=int, default=6000,
                        help="training steps (with --device-export: until --device-size sets them)")
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--no-train", action="store_true", help="only score the checkpoints already saved")
    parser.add_argument("--reference-electra", action="store_true",
                        help=f"train and score plain ELECTRA ({REFERENCE_NAME}) on the same data and schedule instead")
    parser.add_argument("--device-export", type=pathlib.Path, default=None, metavar="DIR",
                        help="build the dataset, write what the accelerator needs into DIR, and stop")
    parser.add_argument("--device-checkpoints", type=int, default=6,
                        help="--device-export: evenly spaced checkpoints the accelerator saves and scores")
    parser.add_argument("--device-results", type=pathlib.Path, default=None, metavar="OUT",
                        help="import and score again what --device-collect brought back, and stop")
    accelerator = parser.add_argument_group("on the accelerator (JAX, no TensorFlow; no --work-dir)")
    for stage, does in (("size", "measure the speed and set the steps that fit --minutes"),
                        ("score", "rank the held-out sentences at every checkpoint saved so far"),
                        ("collect", "copy what comes back (at most 8 files) into --out")):
        accelerator.add_argument(f"--device-{stage}", type=pathlib.Path, default=None, metavar="DIR", help=does)
    accelerator.add_argument("--minutes", type=float, default=None,
                             help="--device-size: the pretraining minutes (default 18); --device-export: the "
                                  "minutes its printed commands plan for")
    accelerator.add_argument("--out", type=pathlib.Path, default=None, help="--device-collect: where to copy")
    args = parser.parse_args(argv)
    if args.device_size or args.device_score or args.device_collect:
        if args.device_collect and args.out is None:
            parser.error("--device-collect: give --out (on the accelerator, $OUT)")
        return args
    defaults = DEVICE_DEFAULTS if args.device_export else CPU_DEFAULTS
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, json.dumps(value) if key == "model" else value)
    for flag in ("model", "hparams"):
        try:
            setattr(args, flag, json.loads(getattr(args, flag)))
        except json.JSONDecodeError as error:
            parser.error(f"--{flag}: not JSON ({error.msg}, column {error.colno}); give an object such as "
                         "'{\"num_layers\": 4}'")
    if args.work_dir is None:
        parser.error("--work-dir: required (the study's folder, e.g. runs/electric_ranking)")
    if args.reference_electra and (args.device_export or args.device_results or args.device_size
                                   or args.device_score or args.device_collect):
        parser.error("--reference-electra runs here only; drop the --device-* flag")
    if args.device_checkpoints < 1:
        parser.error("--device-checkpoints must be at least 1")
    if not args.shared_data or not (args.shared_data / SHARDS.format(1)).is_file():
        parser.error(f"--shared-data (or ELECTRA_SHARED_DATA) must hold {SHARDS.format('0/1')}")
    return args


def build_dataset(args, data_dir):
    if (data_dir / "pretrain_tfrecords" / "metadata.json").is_file():
        return
    corpus = write_corpus(args.shared_data, data_dir / "corpus", int(args.corpus_mb * 1e6))
    run(["build_pretraining_dataset.py", "--corpus-dir", corpus, "--corpus-format", "wikiextractor",
         "--vocab-size", args.vocab_size, "--data-dir", data_dir, "--max-seq-length", args.seq_length,
         "--num-shards", 8, "--num-processes", 2])


def write_corpus(shared_data, folder, max_bytes):
    """The first whole articles of TRAINING_SHARDS, in order, up to about max_bytes of text: shard 0 as
    folder/wiki.txt (as before: the CPU runs' 20 MB come from it alone), the next as folder/shard<k>/wiki.txt
    (the builder reads the folder recursively). Shard 0 holds about 51 MB."""
    left = max_bytes
    for index in TRAINING_SHARDS:
        shard = shared_data / SHARDS.format(index)
        if not shard.is_file():
            raise InputError(f"{shard}: missing, and --corpus-mb asks for more text than the shards before it "
                             "hold; lower --corpus-mb or restore the shard")
        part = folder if index == TRAINING_SHARDS[0] else folder / f"shard{index}"
        left -= (write_wikipedia_slice(shard, part, left) / "wiki.txt").stat().st_size
        if left <= 0:
            break
    return folder


def warmup_steps(steps):
    """10% of the steps, at most 1,000 (the CPU runs' rule; the accelerator's sizing applies it again)."""
    return min(1000, steps // 10)


def electric_hparams(args, device=False, electric=True):
    """run_pretraining.py's --hparams of the Electric run (plain ELECTRA's with electric=False); for the
    accelerator also mixed_bfloat16 and a held-out evaluation of 20 batches (run_pretraining.py's own
    resolution turns them into the config)."""
    hparams = {"model_size": args.model_size, "model_hparam_overrides": args.model,
               "electric_objective": electric, "num_train_steps": args.steps, "train_batch_size": args.batch_size,
               "learning_rate": args.learning_rate, "num_warmup_steps": warmup_steps(args.steps),
               "iterations_per_loop": 100, "save_checkpoints_steps": args.eval_every, "keep_checkpoint_max": 0}
    if device:
        hparams.update(mixed_precision="mixed_bfloat16", eval_batch_size=args.batch_size, num_eval_steps=20)
    return {**hparams, **args.hparams}


def train(args, data_dir, reference=False):
    """The Electric run (`reference`: plain ELECTRA's, as REFERENCE_NAME) in a subprocess."""
    run(["run_pretraining.py", "--model-name", REFERENCE_NAME if reference else MODEL_NAME, "--data-dir", data_dir,
         "--hparams", json.dumps(electric_hparams(args, electric=not reference))])


def run(command):
    command = [sys.executable, *map(str, command)]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, cwd=REPO, check=True)


def saved_checkpoints(folder):
    """[(step, prefix)] of the checkpoints in a model folder, oldest first."""
    from storage import model_folder

    return [(model_folder.checkpoint_step(prefix), pathlib.Path(prefix))
            for prefix in model_folder.saved_checkpoints(folder)]


def print_header(count, source):
    print(f"{count} held-out sentences ({source}); originals scored above their corrupted copy:")
    print("| step | above swapped | above shuffled | above replaced | replaced pairs | above a cloze sample | "
          "swap margin | shuffle margin | energy std within a token | std between tokens | disc AUC (train) | "
          "cloze score: above swapped | above shuffled | above replaced | scoring s |")
    print("|---" * 15 + "|")


def print_row(label, row):
    """One table row; "n/a" for what a row scored before it was measured, or a run without curves, lacks."""
    def shown(key, digits=3):
        return f"{row[key]:.{digits}f}" if row.get(key) is not None else "n/a"

    print(f"| {label} | {shown('swap')} | {shown('shuffle')} | {shown('replace')} | {row['replace_pairs']} | "
          f"{shown('sample')} | {shown('swap_margin', 2)} | {shown('shuffle_margin', 2)} | {shown('within_token')} | "
          f"{shown('between_tokens')} | {shown('disc_auc')} | {shown('cloze_swap')} | {shown('cloze_shuffle')} | "
          f"{shown('cloze_replace')} | {shown('seconds', 0)} |", flush=True)


def training_metric_at(folder, name):
    """{step: the training metric `name` logged at that step} of a model folder ({} without its logs)."""
    from training.curves import training_curves

    return dict(training_curves(folder).get(name, []))


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    if args.device_size or args.device_score or args.device_collect:
        from studies.electric import device as electric_device

        electric_device.on_the_accelerator(args)
        return
    data_dir = args.work_dir.resolve()
    if args.device_results:  # the dataset of the export's --work-dir is there already
        from studies.electric import device as electric_device

        electric_device.import_device_results(args, data_dir, args.device_results.resolve())
        return
    build_dataset(args, data_dir)
    if args.device_export:
        from studies.electric import device as electric_device

        electric_device.export_for_device(args, data_dir, args.device_export.resolve(), shown_as=args.device_export)
        return
    model_name = REFERENCE_NAME if args.reference_electra else MODEL_NAME
    if not args.no_train:
        train(args, data_dir, args.reference_electra)

    from common import atomic
    from inference.score import Scorer

    sentences = plain_wikipedia_sentences(args.shared_data / SHARDS.format(1), args.sentences)
    results_path = data_dir / ("ranking_electra_reference.json" if args.reference_electra else "ranking.json")
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    print_header(len(sentences), "shard 1")
    disc_auc = training_metric_at(data_dir / "models" / model_name, "disc_auc")
    newest_column = "swap_margin" if args.reference_electra else "cloze_swap"
    for step, prefix in saved_checkpoints(data_dir / "models" / model_name):
        if newest_column not in results.get(str(step), {}):
            start = time.perf_counter()
            row = (reference_fractions(prefix, sentences) if args.reference_electra
                   else ranking_fractions(Scorer(prefix), sentences))
            results[str(step)] = {**row, "seconds": time.perf_counter() - start}
            atomic.write_json(results_path, results)
        print_row(step, {**results[str(step)], "disc_auc": disc_auc.get(step)})


if __name__ == "__main__":
    main()
