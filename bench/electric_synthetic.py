"""Electric's text score on a language where context decides every word: does it rank word order?

    python -m bench.electric_synthetic --work-dir runs/electric_synthetic [--steps 1500] [--eval-every 500]

A control for bench/electric_ranking.py, whose Wikipedia runs left the swap and shuffle fractions at
chance: there, too little training is one explanation. Here the language is a random walk over 300
invented words in which each word may be followed by 3 others only, so a cloze model learns it in a few
hundred CPU steps and any order violation puts words where neither the data nor the cloze model ever
does. Builds that corpus (12,000 documents of 10-20 sentences, ~2.2M words), a 600-word WordPiece
vocabulary and the dataset, pretrains Electric (electra_tiny, run_pretraining.py), then scores 200 fresh
sentences of the language against their corrupted copies at every checkpoint with the same measurement
as the Wikipedia bench (bench.electric_ranking.ranking_fractions), and the same swapped and shuffled copies
by the cloze model's own pseudo-log-likelihood (Σ log q: if that ranks them and the energies do not, the
comparison is sound and the energies are what has not learned order). Prints one row per checkpoint with
the generator's cloze accuracy and keeps them in <work-dir>/ranking.json.
"""
import argparse
import json
import pathlib
import random
import types

from bench.electric_ranking import (MODEL_NAME, corrupted_copies, ranking_fractions, run, saved_checkpoints,
                                    train)

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


def cloze_pseudo_log_likelihoods(scorer, texts, batch_size=32):
    """Σ_t log q(x_t | the rest) of each text under the checkpoint's own two-tower cloze model: the same texts
    scored by the generator instead of the energies, which tells a broken comparison from unlearned energies."""
    import numpy as np

    from pretrain.electric import log_noise_probs
    from pretrain.masking import candidate_mask
    from training.score import batch_inputs

    config = scorer.config
    special_ids = (config.cls_token_id, config.sep_token_id, config.mask_token_id)
    ids = [list(encoded) for encoded in scorer.tokenizer.encode_batch(texts)]
    totals = []
    for start in range(0, len(ids), batch_size):
        batch = batch_inputs(config, ids[start:start + batch_size])
        log_q = log_noise_probs(scorer.pretrainer.cloze_logits(batch, training=False), batch["input_ids"])
        weights = candidate_mask(batch["input_ids"], batch["input_mask"], special_ids)
        totals += np.sum(np.asarray(log_q, np.float64) * np.asarray(weights, np.float64), axis=-1).tolist()
    return np.array(totals)


def cloze_order_fractions(scorer, sentences):
    """{"cloze_swap", "cloze_shuffle"}: originals above their swapped / shuffled copies (the ranking's own
    copies) by the cloze pseudo-log-likelihood."""
    import numpy as np

    copies, _ = corrupted_copies(sentences, scorer.tokenizer)
    original = cloze_pseudo_log_likelihoods(scorer, sentences)
    return {f"cloze_{name}": float(np.mean(original > cloze_pseudo_log_likelihoods(scorer, copies[name])))
            for name in ("swap", "shuffle")}


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
    from training.curves import training_curves
    from training.score import Scorer

    rng = random.Random(1)  # other sentences than the corpus's (seed 0)
    sentences = [sentence(rng, language) for _ in range(args.sentences)]
    accuracy = dict(training_curves(data_dir / "models" / MODEL_NAME)["masked_lm_accuracy"])
    results = {}
    print(f"{len(sentences)} fresh sentences of the language; originals scored above their corrupted copy:")
    print("| step | cloze accuracy (train) | above swapped | above shuffled | above replaced | above a cloze sample | "
          "energy std within a token | std between tokens | cloze PLL: above swapped | cloze PLL: above shuffled |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for step, prefix in saved_checkpoints(data_dir / "models" / MODEL_NAME):
        scorer = Scorer(prefix)
        row = {**ranking_fractions(scorer, sentences), **cloze_order_fractions(scorer, sentences),
               "cloze_accuracy": accuracy.get(step)}
        results[str(step)] = row
        cloze = "n/a" if row["cloze_accuracy"] is None else f"{row['cloze_accuracy']:.3f}"
        print(f"| {step} | {cloze} | {row['swap']:.3f} | {row['shuffle']:.3f} | {row['replace']:.3f} | "
              f"{row['sample']:.3f} | {row['within_token']:.3f} | {row['between_tokens']:.3f} | "
              f"{row['cloze_swap']:.3f} | {row['cloze_shuffle']:.3f} |", flush=True)
    atomic.write_json(data_dir / "ranking.json", results)


if __name__ == "__main__":
    main()
