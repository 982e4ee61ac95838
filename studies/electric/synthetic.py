"""Electric's text score on a language where context decides every word: does it rank word order?

    python -m studies.electric.synthetic --work-dir runs/electric_synthetic [--steps 1500] [--eval-every 500]

A control for studies/electric/ranking.py, whose Wikipedia runs left the swap and shuffle fractions at
chance: there, too little training is one explanation. Here the language is a random walk over 300
invented words in which each word may be followed by 3 others only, so a cloze model learns it in a few
hundred CPU steps and any order violation puts words where neither the data nor the cloze model ever
does. Builds that corpus (12,000 documents of 10-20 sentences, ~2.2M words), a 600-word WordPiece
vocabulary and the dataset, pretrains Electric (electra_tiny, run_pretraining.py), then scores 200 fresh
sentences of the language against their corrupted copies at every checkpoint with the same measurement
as the Wikipedia ranking (studies.electric.ranking.ranking_fractions), which also scores the same swapped and
shuffled copies by the cloze model's own pseudo-log-likelihood (Σ log q: if that ranks them and the
energies do not, the comparison is sound and the energies are what has not learned order). Prints one row
per checkpoint with the generator's cloze accuracy and the discriminator's AUC (both from training) and
keeps them in <work-dir>/ranking.json.
"""
import argparse
import json
import pathlib
import random
import types

from studies.electric.ranking import MODEL_NAME, ranking_fractions, run, saved_checkpoints, train, training_metric_at

SYLLABLES = ("ba", "ko", "ri", "mu", "te", "sa", "lo", "ni", "pe", "du", "ga", "fi", "zo", "ve", "hu", "ja")


def make_language(seed=0, words=300, successors=3):
    """(words, {word: the words allowed after it}): three-syllable invented words, a fixed successor set each."""
    rng = random.Random(seed)
    vocabulary = sorted({a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES})
    rng.shuffle(vocabulary)
    vocabulary = vocabulary[:words]
    return vocabulary, {word: rng.sample(vocabulary, successors) for word in vocabulary}


def sentence(rng, language):
    """8-15 words of a random walk over the successor sets, and a final period."""
    words, successors = language
    word = rng.choice(words)
    out = [word]
    for _ in range(rng.randint(7, 14)):
        word = rng.choice(successors[word])
        out.append(word)
    return " ".join(out) + " ."


def write_corpus(path, language, documents, seed=0):
    """Plain text, one sentence per line, a blank line after each document of 10-20 sentences."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for _ in range(documents):
            out.writelines(sentence(rng, language) + "\n" for _ in range(rng.randint(10, 20)))
            out.write("\n")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    parser.add_argument("--documents", type=int, default=12000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--hparams", type=json.loads, default={},
                        help="JSON of PretrainingConfig overrides, e.g. a weaker cloze model: "
                             "'{\"generator_hidden_size\": 0.125, \"generator_layers\": 0.5}'")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    data_dir = args.work_dir.resolve()
    language = make_language()
    if not (data_dir / "pretrain_tfrecords" / "metadata.json").is_file():
        write_corpus(data_dir / "corpus" / "language.txt", language, args.documents)
        run(["build_pretraining_dataset.py", "--corpus-dir", data_dir / "corpus", "--corpus-format", "plain",
             "--blanks-separate-docs", "--vocab-size", 600, "--data-dir", data_dir, "--max-seq-length", 128,
             "--num-shards", 8, "--num-processes", 2])
    if not saved_checkpoints(data_dir / "models" / MODEL_NAME):
        train(types.SimpleNamespace(model_size="electra_tiny", model={}, hparams=args.hparams, steps=args.steps,
                                    batch_size=32, learning_rate=1e-3, eval_every=args.eval_every), data_dir)

    from common import atomic
    from inference.score import Scorer

    rng = random.Random(1)  # other sentences than the corpus's (seed 0)
    sentences = [sentence(rng, language) for _ in range(args.sentences)]
    folder = data_dir / "models" / MODEL_NAME
    accuracy, disc_auc = (training_metric_at(folder, name) for name in ("masked_lm_accuracy", "disc_auc"))
    results = {}
    print(f"{len(sentences)} fresh sentences of the language; originals scored above their corrupted copy:")
    print("| step | cloze accuracy (train) | disc AUC (train) | above swapped | above shuffled | above replaced | "
          "above a cloze sample | swap margin | energy std within a token | std between tokens | "
          "cloze score: above swapped | cloze score: above shuffled |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for step, prefix in saved_checkpoints(folder):
        scorer = Scorer(prefix)
        row = {**ranking_fractions(scorer, sentences),
               "cloze_accuracy": accuracy.get(step), "disc_auc": disc_auc.get(step)}
        results[str(step)] = row
        cloze, auc = ("n/a" if value is None else f"{value:.3f}" for value in (row["cloze_accuracy"], row["disc_auc"]))
        print(f"| {step} | {cloze} | {auc} | {row['swap']:.3f} | {row['shuffle']:.3f} | {row['replace']:.3f} | "
              f"{row['sample']:.3f} | {row['swap_margin']:.2f} | {row['within_token']:.3f} | "
              f"{row['between_tokens']:.3f} | {row['cloze_swap']:.3f} | {row['cloze_shuffle']:.3f} |", flush=True)
    atomic.write_json(data_dir / "ranking.json", results)


if __name__ == "__main__":
    main()
