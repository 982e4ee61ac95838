"""Does Electric's text score learn word order? The measurement: held-out Wikipedia sentences against
corrupted copies (swapped, shuffled, replaced words; a draw from the model's own cloze model), ranked by the
energies and by the cloze score, at every checkpoint of one Electric pretraining run. The command line is
cli.py (`python -m studies.electric`, whose --help says what each column means); the accelerator's part is
device.py, which imports this module (and this module neither of them, so there is no import circle).
"""
import json
import pathlib
import random
import subprocess
import sys
import time

from studies.shared_data import plain_wikipedia_sentences, write_wikipedia_slice
from common.errors import InputError

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL_NAME = "electric"
REFERENCE_NAME = "electra_reference"  # --reference-electra's model
SHARDS = "corpus/enwiki_wikiextractor/enwiki_part0{}.txt.gz"
TRAINING_SHARDS = (0, 2, 3)  # read in this order up to --corpus-mb; shard 1 holds the held-out sentences
CORRUPTIONS = ("swap", "shuffle", "replace")


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
    from pretrain.loaded_folder import load_model_folder

    folder = load_model_folder(path)
    tokenizer = folder_tokenizer(folder)
    ids, kept = copy_ids(tokenizer, folder.config, sentences, seed)
    results = score_id_lists(folder.pretrainer, folder.config, ids)
    return fractions_from_results(results, len(sentences), kept, path)


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


def rank_saved_checkpoints(args, data_dir):
    """Trains (unless args.no_train), then scores every saved checkpoint not scored yet into
    <data_dir>/ranking.json (ranking_electra_reference.json with args.reference_electra); prints the table."""
    from common import atomic
    from inference.score import Scorer

    model_name = REFERENCE_NAME if args.reference_electra else MODEL_NAME
    if not args.no_train:
        train(args, data_dir, args.reference_electra)
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



if __name__ == "__main__":  # the command line moved to cli.py: the old command says so rather than do nothing
    print("python -m studies.electric.ranking: the command is now python -m studies.electric (same flags)",
          file=sys.stderr)
    sys.exit(2)
