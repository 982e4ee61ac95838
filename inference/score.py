"""Score texts with an Electric model: a pseudo-log-likelihood estimate of each text in one forward pass.

    python -m inference.score --model-name electric_small "the cat sat on the mat ." "the mat sat on the cat ."
    python -m inference.score --model-name electric_small --file sentences.txt     # one text per line
    cat sentences.txt | python -m inference.score --model-name electric_small     # stdin when no text is given
    python -m inference.score --model-name electric_small --file sentences.txt --json > scores.jsonl
    python -m inference.score --model-name electric_small --scorer cloze --file sentences.txt

Reads the model folder run_pretraining.py wrote with --hparams '{"electric_objective": true}'
(<data-dir>/models/<model-name>/, its latest checkpoint). Two scorers, each one forward pass per batch of
--batch-size texts, no masking, no sampling:

- energy (default; the paper's): Electric's discriminator gives every token an energy E(x)_t, with exp(-E)
  proportional to p(x_t | the other tokens) (docs/reproduction.md#electric); a text's score is -Σ E.
- cloze: the two-tower generator's Σ_t log q(x_t | the other tokens), the cloze model Electric trains as its
  noise. Not the paper's score, and the generator is the smaller network; but its own softmax loss trains
  it directly, and on small budgets it ranks word order where the energies are still blind to it
  (docs/reproduction.md#electric has the figures). Any model with a two-tower generator has one.

Either way [CLS] and [SEP] are read but not summed, and higher is more likely. Output, one line per text in
input order: the score, the text, and each WordPiece token with its energy or its log q
(`score<TAB>text<TAB>token=value …`); --json prints one JSON object per line instead ("energies" or
"log_q"). A text longer than the model's max_seq_length is cut (a note on stderr says so, and "truncated"
in JSON). Progress with rate and ETA goes to stderr on long inputs. A model without what the scorer reads
is refused with one line (exit code 2): an ELECTRA discriminator's logits are not energies.
"""
import argparse
import json
import os
import pathlib
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

from common.errors import InputError, exit_on_input_error  # noqa: E402
from storage.model_folder import require_tensorflow_backend  # noqa: E402
from data import paths  # noqa: E402
from data.progress import ProgressLine  # noqa: E402

DEFAULT_BATCH_SIZE = 64
PROGRESS_MIN_TEXTS = 1000  # fewer texts than this finish before a progress line would help
SCORERS = ("energy", "cloze")
TOKEN_VALUES = {"energy": "energies", "cloze": "log_q"}  # what each scorer gives per token (JSON key)


def check_scorer(config, name, scorer="energy"):
    """Refuses a model folder that lacks what `scorer` reads (its config.json, before any weight is read)."""
    if scorer == "energy" and not config.electric_objective:
        raise InputError(f"--model-name {name}: not an Electric model (its config.json has electric_objective "
                         "false), so its discriminator gives replaced-token logits, not energies; score with a "
                         "model pretrained with --hparams '{\"electric_objective\": true}'")
    if scorer == "cloze" and not config.two_tower_generator:
        raise InputError(f"--model-name {name}: --scorer cloze reads a two-tower generator, and this model's "
                         "config.json has two_tower_generator false; use a model pretrained with "
                         "--hparams '{\"electric_objective\": true}' (or two_tower_generator)")


def batch_inputs(config, id_lists, length=None):
    """[CLS] ids [SEP], padded to the longest of the batch (or to `length` if longer): int32 arrays
    [batch, length]."""
    sequences = [[config.cls_token_id, *ids, config.sep_token_id] for ids in id_lists]
    length = max(length or 0, *(len(sequence) for sequence in sequences))
    input_ids = np.zeros((len(sequences), length), np.int32)
    input_mask = np.zeros((len(sequences), length), np.int32)
    for row, sequence in enumerate(sequences):
        input_ids[row, :len(sequence)] = sequence
        input_mask[row, :len(sequence)] = 1
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": np.zeros_like(input_ids)}


def token_values(pretrainer, batch, scorer="energy"):
    """float32 numpy [batch, seq]: each token's energy E(x)_t (scorer "energy": the discriminator alone) or
    log q(x_t | the other tokens) (scorer "cloze": the two-tower generator alone)."""
    if scorer == "energy":
        return np.asarray(pretrainer.energies(batch, training=False), np.float32)
    from pretrain.electric import log_noise_probs

    return np.asarray(log_noise_probs(pretrainer.cloze_logits(batch, training=False), batch["input_ids"]),
                      np.float32)


def score_ids(pretrainer, config, id_lists, length=None, scorer="energy"):
    """[(score, [each id's energy, or its log q with scorer "cloze"])] of token-id lists (each at most
    max_seq_length - 2 long, none empty), one forward pass: the score is -Σ E, or Σ log q, over the text's
    own tokens. Backend-neutral (no tokenizer, no TensorFlow), so that a JAX process scores pre-tokenized
    texts exactly as Scorer does. `length` pads every batch to one shape (padding is masked out), so that
    an eager JAX process compiles each operation once instead of once per batch length."""
    from pretrain.electric import text_scores
    from pretrain.masking import candidate_mask

    batch = batch_inputs(config, id_lists, length)
    special_ids = (config.cls_token_id, config.sep_token_id, config.mask_token_id)
    values = token_values(pretrainer, batch, scorer)
    weights = candidate_mask(batch["input_ids"], batch["input_mask"], special_ids)
    energies = values if scorer == "energy" else -values  # -log q: the cloze model's own energy
    scores = np.asarray(text_scores(energies, weights), np.float32)
    return [(float(scores[row]), [float(v) for v in values[row, 1:len(ids) + 1]])
            for row, ids in enumerate(id_lists)]


def folder_tokenizer(folder):
    """The tokenizer of a loaded model folder (pretrain.loaded_folder.load_model_folder): its WordPiece
    vocabulary or SentencePiece model, cased as it was trained."""
    from data.tokenization import load_tokenizer

    vocab = "spm_model" if folder.is_sentencepiece else "vocab_file"
    return load_tokenizer(**{vocab: folder.vocab_file}, lower_case=folder.config.do_lower_case)


class Scorer:
    """An Electric model folder's networks and tokenizer (`path`: the folder, its latest checkpoint, or a
    checkpoint prefix in it); `scorer` one of SCORERS."""

    def __init__(self, path, name=None, scorer="energy"):
        from pretrain.loaded_folder import load_model_folder
        from storage.model_folder import read_config

        path = pathlib.Path(path)
        folder = path if path.is_dir() else path.parent
        check_scorer(read_config(folder), name or folder.name, scorer)  # before reading weights
        self.scorer = scorer
        self.folder = load_model_folder(path)
        self.config = self.folder.config
        self.pretrainer = self.folder.pretrainer
        self.tokenizer = folder_tokenizer(self.folder)

    def score_texts(self, texts, batch_size=DEFAULT_BATCH_SIZE, progress=None):
        """[{"text", "score", "tokens", "energies" (or "log_q"), "truncated"}] in input order; `progress` a
        ProgressLine."""
        room = self.config.max_seq_length - 2
        results = []
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            full = self.tokenizer.encode_batch(chunk)
            id_lists = [ids[:room] for ids in full]
            if not all(len(ids) for ids in id_lists):
                empty = start + next(i for i, ids in enumerate(id_lists) if not len(ids))
                raise InputError(f"text {empty + 1} ({texts[empty]!r}) has no tokens the model reads; give each "
                                 "text at least one word")
            scored = score_ids(self.pretrainer, self.config, id_lists, scorer=self.scorer)
            for row, (text, ids) in enumerate(zip(chunk, id_lists)):
                score, values = scored[row]
                results.append({"text": text, "score": score,
                                "tokens": self.tokenizer.convert_ids_to_tokens([int(i) for i in ids]),
                                TOKEN_VALUES[self.scorer]: values, "truncated": len(full[row]) > room})
            if progress is not None:
                progress.update(len(results))
        return results


def read_texts(args):
    """The arguments, else every non-empty line of --file (- or no --file: stdin)."""
    if args.texts:
        return list(args.texts)
    from inference.inputs import read_lines

    where = "stdin" if args.file is None or str(args.file) == "-" else f"--file {args.file}"
    texts = [line for line in read_lines(args.file) if line.strip()]
    if not texts:
        raise InputError(f"{where}: no text to score; write one text per line")
    return texts


def format_line(result, scorer="energy"):
    values = result[TOKEN_VALUES[scorer]]
    tokens = " ".join(f"{token}={value:.3f}" for token, value in zip(result["tokens"], values))
    return f"{result['score']:.4f}\t{result['text']}\t{tokens}"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m inference.score", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", help="texts to score (default: --file, else stdin)")
    parser.add_argument("--model-name", required=True, help="the Electric model folder under <data-dir>/models/")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--file", type=pathlib.Path, default=None, help="one text per line (- reads stdin)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="texts per forward pass")
    parser.add_argument("--scorer", choices=SCORERS, default="energy",
                        help="energy: -Σ E from the discriminator (the paper's); cloze: Σ log q from the two-tower "
                             "generator")
    parser.add_argument("--json", action="store_true", help="one JSON object per text instead of tab-separated")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if args.texts and args.file is not None:
        parser.error("give texts as arguments or --file, not both")
    return args


@exit_on_input_error
def main(argv=None, stdout=None):
    from inference.sources import pretrained_folder
    from storage.model_folder import read_config

    args = parse_args(argv)
    stdout = stdout or sys.stdout
    data_dir = args.data_dir or paths.default_data_dir()
    folder = pretrained_folder(data_dir, args.model_name)
    check_scorer(read_config(folder), args.model_name, args.scorer)
    texts = read_texts(args)
    require_tensorflow_backend("inference.score")
    scorer = Scorer(folder, args.model_name, args.scorer)
    progress = None
    if len(texts) >= PROGRESS_MIN_TEXTS:
        progress = ProgressLine("scoring", len(texts),
                                lambda done, elapsed: f"{done:,.0f}/{len(texts):,} texts, {done / elapsed:,.1f} texts/s")
    results = scorer.score_texts(texts, args.batch_size, progress)
    if progress is not None:
        progress.finish(len(results))
    for index, result in enumerate(results, 1):
        if result["truncated"]:
            print(f"note: text {index} is longer than {args.model_name}'s {scorer.config.max_seq_length} tokens "
                  "([CLS] and [SEP] included); its first tokens are scored", file=sys.stderr)
        line = (json.dumps({"index": index, "scorer": args.scorer, **result}, ensure_ascii=False) if args.json
                else format_line(result, args.scorer))
        print(line, file=stdout)
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
