"""Does Electric's text score learn word order? Held-out Wikipedia sentences against corrupted copies, at
every checkpoint of one Electric pretraining run on Wikipedia.

    python -m bench.electric_ranking --work-dir runs/electric_ranking            # train, then score
    python -m bench.electric_ranking --work-dir runs/electric_ranking --no-train # score what is saved

Needs ELECTRA_SHARED_DATA (or --shared-data). Builds a dataset from the first --corpus-mb MB of Wikipedia
shard 0 with a WordPiece vocabulary of --vocab-size learned from it, pretrains an Electric model
(run_pretraining.py in a subprocess: a killed run resumes), saving every --eval-every steps, then scores
--sentences plain sentences from shard 1 (other articles) with each checkpoint (training.score.Scorer):

- swap: the fraction of sentences whose score is above the same sentence with two different words
  exchanged (the same tokens in another order: only context can tell them apart; chance is 0.5);
- shuffle: the same, against all the words in a random order;
- replace: the fraction above a copy with two one-token words replaced by random one-token words (rarer
  words out of place: even unigram frequencies see most of these);
- how much the energies depend on context: the mean standard deviation of one token's energy across its
  occurrences in the originals, against the standard deviation between tokens' mean energies (a
  context-blind energy has the first near 0, and then swaps sit at chance).

Prints one row per checkpoint and keeps them in <work-dir>/ranking.json (scored checkpoints are not
scored again). The real-data test (tests/test_electric.py) runs the same measurement on a 250-step model.
"""
import argparse
import json
import os
import pathlib
import random
import subprocess
import sys
import time

from bench.shared_data import plain_wikipedia_sentences, write_wikipedia_slice

REPO = pathlib.Path(__file__).resolve().parents[1]
MODEL_NAME = "electric"
SHARDS = "corpus/enwiki_wikiextractor/enwiki_part0{}.txt.gz"


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


def ranking_fractions(scorer, sentences, seed=0):
    """{"swap", "shuffle", "replace": fraction of originals scored above their corrupted copy; "replace_pairs";
    "within_token", "between_tokens": context_spread of the originals' energies}."""
    import numpy as np

    vocab = scorer.tokenizer.convert_ids_to_tokens(list(range(scorer.tokenizer.vocab_size)))
    one_token_words = [token for token in vocab if token.isalpha() and token.islower()]
    rng = random.Random(seed)
    swapped = [swap_two_words(s, rng) for s in sentences]
    replaced = [replace_two_words(s, rng, scorer.tokenizer, one_token_words) for s in sentences]
    kept = [i for i, r in enumerate(replaced) if r is not None]
    shuffled = [shuffle_words(s, rng) for s in sentences]
    results = scorer.score_texts(sentences + swapped + shuffled + [replaced[i] for i in kept])
    scores = np.array([r["score"] for r in results])
    if not np.isfinite(scores).all():
        raise FloatingPointError(f"{scorer.folder}: non-finite scores")
    count = len(sentences)
    original, swap, shuffle = scores[:count], scores[count:2 * count], scores[2 * count:3 * count]
    replace = scores[3 * count:]
    within, between = context_spread(results[:count])
    return {"swap": float(np.mean(original > swap)), "shuffle": float(np.mean(original > shuffle)),
            "replace": float(np.mean(original[kept] > replace)), "replace_pairs": len(kept),
            "within_token": within, "between_tokens": between}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    parser.add_argument("--shared-data", type=pathlib.Path, default=os.environ.get("ELECTRA_SHARED_DATA"))
    parser.add_argument("--corpus-mb", type=float, default=20.0, help="MB of shard 0's text to train on")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--model-size", default="electra_tiny")
    parser.add_argument("--model", default='{"hidden_size": 128, "num_layers": 4, "num_heads": 2, '
                                           '"intermediate_size": 512, "embedding_size": 128}',
                        help="JSON of ModelConfig overrides of --model-size")
    parser.add_argument("--hparams", default="{}", help="JSON of further PretrainingConfig overrides")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--no-train", action="store_true", help="only score the checkpoints already saved")
    args = parser.parse_args(argv)
    for flag in ("model", "hparams"):
        try:
            setattr(args, flag, json.loads(getattr(args, flag)))
        except json.JSONDecodeError as error:
            parser.error(f"--{flag}: not JSON ({error.msg}, column {error.colno}); give an object such as "
                         "'{\"num_layers\": 4}'")
    if not args.shared_data or not (args.shared_data / SHARDS.format(1)).is_file():
        parser.error(f"--shared-data (or ELECTRA_SHARED_DATA) must hold {SHARDS.format('0/1')}")
    return args


def build_dataset(args, data_dir):
    if (data_dir / "pretrain_tfrecords" / "metadata.json").is_file():
        return
    corpus = write_wikipedia_slice(args.shared_data / SHARDS.format(0), data_dir / "corpus",
                                   int(args.corpus_mb * 1e6))
    run(["build_pretraining_dataset.py", "--corpus-dir", corpus, "--corpus-format", "wikiextractor",
         "--vocab-size", args.vocab_size, "--data-dir", data_dir, "--max-seq-length", args.seq_length,
         "--num-shards", 8, "--num-processes", 2])


def train(args, data_dir):
    hparams = {"model_size": args.model_size, "model_hparam_overrides": args.model,
               "electric_objective": True, "num_train_steps": args.steps, "train_batch_size": args.batch_size,
               "learning_rate": args.learning_rate, "num_warmup_steps": min(1000, args.steps // 10),
               "iterations_per_loop": 100, "save_checkpoints_steps": args.eval_every, "keep_checkpoint_max": 0,
               **args.hparams}
    run(["run_pretraining.py", "--model-name", MODEL_NAME, "--data-dir", data_dir,
         "--hparams", json.dumps(hparams)])


def run(command):
    command = [sys.executable, *map(str, command)]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, cwd=REPO, check=True)


def saved_checkpoints(folder):
    """[(step, prefix)] of the checkpoints in a model folder, oldest first."""
    from training.model_folder import checkpoint_step

    prefixes = [path.with_suffix("") for path in folder.glob("ckpt-*.index")]
    return sorted((checkpoint_step(prefix), prefix) for prefix in prefixes)


def main(argv=None):
    args = parse_args(argv)
    data_dir = args.work_dir.resolve()
    build_dataset(args, data_dir)
    if not args.no_train:
        train(args, data_dir)

    from common import atomic
    from training.score import Scorer

    sentences = plain_wikipedia_sentences(args.shared_data / SHARDS.format(1), args.sentences)
    results_path = data_dir / "ranking.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    print(f"{len(sentences)} held-out sentences (shard 1); originals scored above their corrupted copy:")
    print("| step | above swapped | above shuffled | above replaced | replaced pairs | energy std within a token | "
          "std between tokens | scoring s |")
    print("|---|---|---|---|---|---|---|---|")
    for step, prefix in saved_checkpoints(data_dir / "models" / MODEL_NAME):
        if "shuffle" not in results.get(str(step), {}):
            start = time.perf_counter()
            results[str(step)] = {**ranking_fractions(Scorer(prefix), sentences),
                                  "seconds": time.perf_counter() - start}
            atomic.write_json(results_path, results)
        row = results[str(step)]
        print(f"| {step} | {row['swap']:.3f} | {row['shuffle']:.3f} | {row['replace']:.3f} | {row['replace_pairs']} | "
              f"{row['within_token']:.3f} | {row['between_tokens']:.3f} | {row['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
