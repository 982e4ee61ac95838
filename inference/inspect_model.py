"""See replaced-token detection: what a pretrained model's generator and discriminator do with your text.

    python -m inference.inspect_model --model-name electra_tiny "the interpreter reads a line of input ."
    python -m inference.inspect_model --model-name electra_tiny --file sentences.txt --seed 3
    python -m inference.inspect_model --model-name electra_tiny --held-out 3     # sentences of the held-out shard
    python -m inference.inspect_model --model-name electra_tiny --fill-mask "the [MASK] statement raises an error ."
    python -m inference.inspect_model --model-name electra_tiny --json "some text" > inspect.json

Reads the model folder run_pretraining.py wrote (<data-dir>/models/<model-name>/, its latest checkpoint).
Each text is masked exactly as in pretraining (the pretrainer's own masking and Gumbel sampling, drawn
from --seed, so the same command prints the same thing), the generator fills the chosen positions, and
the discriminator gives every token of the result its probability of having been replaced; the tokens
the generator truly changed are marked with *. A sampled token equal to the original counts as real, as
in training. With --fill-mask, each [MASK] you write gets the generator's --top-k candidates instead.

Texts: the arguments, one per line of --file (- reads stdin), and --held-out N sentences taken from the
held-out evaluation shard of the model's dataset (a run with do_eval; examples it never trained on).
A text longer than the model's max_seq_length is truncated, and a note says so. Colour only when stdout
is a terminal and NO_COLOR is not set; --json prints one JSON document for scripts.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402

from data import paths  # noqa: E402
from common.errors import InputError, exit_on_input_error  # noqa: E402
from storage.model_folder import require_tensorflow_backend  # noqa: E402
from inference.inputs import read_lines  # noqa: E402
from inference.sources import pretrained_folder  # noqa: E402

MASK_LITERAL = "[MASK]"
CAUGHT = 0.5  # the threshold of the run's disc_precision / disc_recall
# Held-out sentences: whole sentences of plain words, short enough to read on one line.
HELD_OUT_LENGTHS = (8, 30)
_WORD = re.compile(r"^(##)?[a-z0-9]+$|^[,.]$", re.IGNORECASE)


# ------------------------------------------------------------------------------------------------ loading


class Inspector:
    """A model folder's pretrainer, tokenizer and config, and the two things it shows."""

    def __init__(self, folder):
        from pretrain.loaded_folder import load_model_folder

        self.folder = load_model_folder(folder)
        self.config = self.folder.config
        self.pretrainer = self.folder.pretrainer
        self.tokenizer = self.folder.tokenizer()

    # ------------------------------------------------------------------ text → ids
    def encode(self, text):
        """Token ids without [CLS]/[SEP]; a literal [MASK] becomes the mask token."""
        pieces = self.tokenizer.encode_batch(text.split(MASK_LITERAL))
        ids = []
        for index, piece in enumerate(pieces):
            if index:
                ids.append(self.config.mask_token_id)
            ids.extend(int(i) for i in piece)
        return ids

    def tokens(self, ids):
        return self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])

    def inputs(self, ids):
        """A batch of one, [CLS] ids [SEP] padded to max_seq_length, as the pretraining reader gives it."""
        c = self.config
        sequence = [c.cls_token_id, *ids, c.sep_token_id]
        padding = [0] * (c.max_seq_length - len(sequence))
        return {"input_ids": np.array([sequence + padding], np.int32),
                "input_mask": np.array([[1] * len(sequence) + padding], np.int32),
                "segment_ids": np.zeros((1, c.max_seq_length), np.int32)}

    # ------------------------------------------------------------------ the two views
    def detect(self, ids, seed_generator):
        """Replaced-token detection on one text, masked and sampled from `seed_generator` (a
        keras.random.SeedGenerator, advanced by each text as by each training step) as in pretraining."""
        batch = self.inputs(ids)
        out = self.pretrainer.compute_losses(batch, training=False, seed_generator=seed_generator)
        length = len(ids) + 2
        original = batch["input_ids"][0, :length]
        masked = np.asarray(out.masked_inputs["input_ids"])[0, :length]
        fake = np.asarray(out.fake.input_ids)[0, :length]
        labels = np.asarray(out.fake.is_fake_tokens)[0, :length]
        p_replaced = 1.0 / (1.0 + np.exp(-np.asarray(out.disc.logits, np.float64)[0, :length]))
        weights = np.asarray(out.masked_inputs["masked_lm_weights"])[0]
        positions = np.asarray(out.masked_inputs["masked_lm_positions"])[0]
        sampled = np.asarray(out.fake.sampled_tokens)[0]
        generator_p = softmax(np.asarray(out.mlm.logits, np.float64)[0] / self.config.temperature)

        slots = {}  # position → the slot whose sample is in the discriminator's input (draws repeat)
        for slot in np.flatnonzero(weights):
            position = int(positions[slot])
            if sampled[slot] == fake[position] or position not in slots:
                slots[position] = slot
        samples = [{"position": position, "original": self.tokens([original[position]])[0],
                    "input": "[MASK]" if masked[position] == self.config.mask_token_id else "kept",
                    "sample": self.tokens([fake[position]])[0],
                    "p_sample": significant(generator_p[slot, fake[position]]),
                    "p_original": significant(generator_p[slot, original[position]]),
                    "replaced": bool(labels[position])} for position, slot in sorted(slots.items())]
        shown, originals = self.tokens(fake), self.tokens(original)
        tokens = [{"position": i, "token": shown[i], "original": originals[i],
                   "p_replaced": round(float(p_replaced[i]), 4), "replaced": bool(labels[i]),
                   "chosen": i in slots} for i in range(length)]
        fakes = [t["p_replaced"] for t in tokens if t["replaced"]]
        reals = [t["p_replaced"] for t in tokens if not t["replaced"]]
        summary = {"replaced": len(fakes), "real": len(reals),
                   "mean_p_replaced": round(float(np.mean(fakes)), 4) if fakes else None,
                   "mean_p_real": round(float(np.mean(reals)), 4),
                   "replaced_caught": sum(p > CAUGHT for p in fakes),
                   "real_flagged": sum(p > CAUGHT for p in reals)}
        return {"samples": samples, "tokens": tokens, "summary": summary}

    def fill_mask(self, ids, top_k):
        """The generator's top_k candidates at every [MASK] of one text."""
        batch = self.inputs(ids)
        positions = [i for i, token in enumerate(batch["input_ids"][0]) if token == self.config.mask_token_id
                     and batch["input_mask"][0, i]]
        logits = self.pretrainer.generator_logits(
            {"input_ids": batch["input_ids"], "masked_lm_positions": np.array([positions], np.int32)},
            {"input_mask": batch["input_mask"], "segment_ids": batch["segment_ids"]}, training=False)
        probabilities = softmax(np.asarray(logits, np.float64)[0])
        masks = []
        for index, position in enumerate(positions):
            best = np.argsort(-probabilities[index], kind="stable")[:top_k]
            masks.append({"position": position, "candidates": [
                {"token": token, "p": significant(probabilities[index, i])}
                for token, i in zip(self.tokens(best), best)]})
        return {"tokens": self.tokens(batch["input_ids"][0, :len(ids) + 2]), "masks": masks}


def significant(p):
    """A probability with 4 significant digits (a weak generator's are often below 0.001)."""
    return float(f"{float(p):.4g}")


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------------------------------------ texts


def read_texts(args):
    """[(label, text)] from the arguments, --file and --held-out (added later, needs the model)."""
    texts = [(f"argument {i + 1}", text) for i, text in enumerate(args.texts)]
    if args.file is not None:
        lines = read_lines(args.file)
        file_texts = [(f"{args.file} line {n}", line) for n, line in enumerate(lines, 1) if line.strip()]
        if not file_texts:
            raise InputError(f"--file {args.file}: no text in it; write one text per line")
        texts += file_texts
    return texts


def detokenize(tokens):
    """WordPiece tokens back to readable text (## pieces joined, no space before punctuation)."""
    text = " ".join(tokens).replace(" ##", "")
    return re.sub(r" ([.,;:!?)])", r"\1", text).replace("( ", "(")


def held_out_sentences(config, data_dir, count, vocab_file):
    """`count` whole sentences of plain words from the held-out shard(s) of the model's dataset, one per
    example, in the shard's order: text the run evaluated on and never trained on."""
    from data import tfrecords
    from data.tokenization import file_sha256, load_tokenizer

    dataset_dir = paths.pretrain_tfrecords_dir(data_dir)
    metadata = tfrecords.load_metadata(dataset_dir)
    if metadata["vocab"]["kind"] != "wordpiece":
        raise InputError(f"--held-out: {dataset_dir} uses a SentencePiece vocabulary; pass sentences as "
                         "arguments instead")
    tfrecords.check_dataset_matches(metadata, dataset_dir, vocab_sha256=file_sha256(vocab_file))
    train_files, eval_files = tfrecords.split_shards(dataset_dir, metadata, config.do_eval,
                                                     config.eval_holdout_shards)
    if not eval_files or eval_files == train_files:
        raise InputError(f"--held-out: {config.model_name} was trained on every shard of {dataset_dir} (no "
                         "do_eval, or a single shard), so no sentence is held out; pass sentences as arguments")
    tokenizer = load_tokenizer(vocab_file=vocab_file, lower_case=config.do_lower_case)
    dataset = tfrecords.pretraining_dataset(dataset_dir, 64, files=eval_files, training=False, metadata=metadata)
    sentences = []
    with tfrecords.naming_damaged_shards(eval_files):
        for batch in dataset:
            for ids, mask in zip(batch["input_ids"].numpy(), batch["input_mask"].numpy()):
                sentence = first_plain_sentence(tokenizer.convert_ids_to_tokens(ids[:int(mask.sum())].tolist()))
                if sentence:
                    sentences.append(detokenize(sentence))
                if len(sentences) == count:
                    return sentences
    if not sentences:
        raise InputError(f"--held-out: no sentence of {HELD_OUT_LENGTHS[0]}–{HELD_OUT_LENGTHS[1]} plain words in "
                         f"the held-out shard of {dataset_dir}; pass sentences as arguments")
    return sentences


def first_plain_sentence(tokens):
    """The first whole sentence (after [CLS], [SEP] or a full stop, ending in one) of only words and
    commas, HELD_OUT_LENGTHS tokens long; None when the example has none."""
    start = 0
    for index, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]", "."):
            sentence = tokens[start:index + 1]
            if (token == "." and HELD_OUT_LENGTHS[0] <= len(sentence) <= HELD_OUT_LENGTHS[1]
                    and not sentence[0].startswith("##") and all(_WORD.match(t) for t in sentence)):
                return sentence
            start = index + 1
    return None


# ------------------------------------------------------------------------------------------------ output


class Style:
    """ANSI colours, or none: the numbers and the * marks carry everything, colour only repeats them."""

    def __init__(self, colour):
        self.colour = colour

    def paint(self, text, *codes):
        return f"\033[{';'.join(codes)}m{text}\033[0m" if self.colour and codes else text

    def probability(self, text, p, replaced):
        codes = ["32"] if p < 0.25 else ["33"] if p < CAUGHT else ["1", "31"]
        return self.paint(text, *(codes + (["4"] if replaced else [])))


def use_colour(stream):
    return stream.isatty() and "NO_COLOR" not in os.environ


def visible_length(text):
    return len(re.sub(r"\033\[[0-9;]*m", "", text))


def wrap(items, indent, width):
    lines, line = [], indent
    for item in items:
        if visible_length(line) > len(indent) and visible_length(line) + 2 + visible_length(item) > width:
            lines.append(line)
            line = indent
        line += ("  " if visible_length(line) > len(indent) else "") + item
    return lines + [line]


def p_text(p):
    """0.12, 0.0031, <0.0001: two decimals, or enough to show a small generator probability."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.4f}" if p >= 1e-4 else "<0.0001"


def heading(entry, width):
    """`[2] the text` on one line (long texts cut with …), saying when the model read only its start."""
    note = f" (truncated: the model reads its first {entry['tokens_read']} tokens)" if entry["truncated"] else ""
    text = " ".join(entry["text"].split())
    room = max(width - len(note) - len(str(entry["index"])) - 3, 20)
    return f"[{entry['index']}] {text if len(text) <= room else text[:room - 1] + '…'}{note}"


def render_detection(entry, result, style, width):
    lines = [style.paint(heading(entry, width), "1")]
    samples = result["samples"]
    lines.append(f"  masking chose {len(samples)} of its {len(result['tokens']) - 2} tokens (most become [MASK], "
                 "some are kept as they are); the generator sampled a token at each:")
    name_width = max(len(s["original"]) for s in samples) + 2
    for s in samples:
        verdict = ("replaced" if s["replaced"] else "the original again, so it counts as real")
        sample = f"\"{s['sample']}\" (p {p_text(s['p_sample'])}"
        sample += f", \"{s['original']}\" had p {p_text(s['p_original'])})" if s["replaced"] else ")"
        lines.append(f"    {(chr(34) + s['original'] + chr(34)).ljust(name_width)} {s['input'].ljust(6)} → "
                     f"{sample}: {verdict}")
    lines.append("  the discriminator's P(replaced) for every token (* = truly replaced"
                 + ("; green < 0.25, yellow < 0.5, red ≥ 0.5" if style.colour else "") + "):")
    items = [style.probability(f"{'*' if t['replaced'] else ''}{t['token']} {t['p_replaced']:.2f}",
                               t["p_replaced"], t["replaced"]) for t in result["tokens"]]
    lines += wrap(items, "    ", width)
    s = result["summary"]
    fakes = (f"{s['replaced']} replaced: mean P {s['mean_p_replaced']:.2f}, {s['replaced_caught']} above "
             f"{CAUGHT}" if s["replaced"] else "nothing replaced (every sample equalled its original)")
    lines.append(f"  {fakes}; {s['real']} real: mean P {s['mean_p_real']:.2f}, {s['real_flagged']} above {CAUGHT}")
    return lines


def render_fill_mask(entry, result, style, width):
    lines = [style.paint(heading(entry, width), "1")]
    for number, mask in enumerate(result["masks"], 1):
        items = [style.probability(f"{c['token']} {p_text(c['p'])}", c["p"], False) for c in mask["candidates"]]
        lines += wrap(items, f"  [MASK] {number} (token {mask['position']}): ", width)
    return lines


# ------------------------------------------------------------------------------------------------ main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m inference.inspect_model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to inspect (quote each)")
    parser.add_argument("--model-name", required=True, help="the model folder under <data-dir>/models/")
    parser.add_argument("--data-dir", type=pathlib.Path, default=None,
                        help=f"default ${paths.DATA_DIR_ENV} or ./{paths.DEFAULT_DATA_DIR}")
    parser.add_argument("--file", type=pathlib.Path, default=None,
                        help="also inspect every non-empty line of this file (- reads stdin)")
    parser.add_argument("--held-out", type=int, default=0, metavar="N",
                        help="also inspect N sentences from the held-out shard of the model's dataset")
    parser.add_argument("--seed", type=int, default=0, help="seeds the masking and the generator's sampling")
    parser.add_argument("--fill-mask", action="store_true",
                        help="show the generator's candidates at each [MASK] you write instead")
    parser.add_argument("--top-k", type=int, default=5, help="candidates per [MASK] with --fill-mask")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = parser.parse_args(argv)
    if args.top_k < 1 or args.held_out < 0:
        parser.error("--top-k must be at least 1 and --held-out 0 or more")
    return args


def prepare_texts(inspector, texts, fill_mask):
    """[(entry, ids)]: every text checked (non-empty, [MASK]s as the mode needs) and cut to the model's length;
    a truncated text gets a note on stderr."""
    config = inspector.config
    room = config.max_seq_length - 2
    prepared = []
    for index, (label, text) in enumerate(texts, 1):
        if not text.strip():
            raise InputError(f"{label} is empty; give a text with at least one word")
        ids = inspector.encode(text)
        if not ids:
            raise InputError(f"{label} ({text!r}) has no tokens the model reads; give a text with at least one word")
        entry = {"index": index, "source": label, "text": text, "truncated": len(ids) > room,
                 "tokens_read": min(len(ids), room)}
        if entry["truncated"]:
            print(f"note: {label} is {len(ids)} tokens long but {config.model_name} reads {config.max_seq_length} "
                  f"([CLS] and [SEP] included), so it is truncated to its first {room} tokens", file=sys.stderr)
            ids = ids[:room]
        has_mask = config.mask_token_id in ids
        if fill_mask and not has_mask:
            where = " within the first tokens the model reads" if MASK_LITERAL in text else ""
            raise InputError(f"{label} has no [MASK]{where}; --fill-mask needs one (write it as [MASK]), or drop "
                             "--fill-mask to see replaced-token detection")
        if not fill_mask and has_mask:
            raise InputError(f"{label} contains [MASK]; add --fill-mask to see the generator's candidates there "
                             "(replaced-token detection chooses its own positions)")
        prepared.append((entry, ids))
    return prepared


@exit_on_input_error
def main(argv=None, stdout=None):
    args = parse_args(argv)
    stdout = stdout or sys.stdout
    data_dir = args.data_dir or paths.default_data_dir()
    texts = read_texts(args)
    if not texts and not args.held_out:
        raise InputError("nothing to inspect; give a text, --file FILE or --held-out N")
    require_tensorflow_backend("inference.inspect_model")
    inspector = Inspector(pretrained_folder(data_dir, args.model_name))
    config = inspector.config
    if args.fill_mask and inspector.pretrainer.generator_head is None:
        raise InputError(f"{args.model_name} samples its fakes uniformly (uniform_generator): it has no generator "
                         "to fill a [MASK]")
    if not args.fill_mask and inspector.pretrainer.discriminator is None:
        raise InputError(f"{args.model_name} was trained with the MLM objective only (no discriminator); use "
                         "--fill-mask to see its predictions")
    if args.held_out:
        sentences = held_out_sentences(config, data_dir, args.held_out, inspector.folder.vocab_file)
        texts += [(f"held-out sentence {i + 1}", s) for i, s in enumerate(sentences)]
    prepared = prepare_texts(inspector, texts, args.fill_mask)

    import keras

    mode = "fill_mask" if args.fill_mask else "replaced_token_detection"
    seed_generator = keras.random.SeedGenerator(args.seed)  # one stream: each text draws its own masks and noise
    results = [(entry, inspector.fill_mask(ids, args.top_k) if args.fill_mask else inspector.detect(ids, seed_generator))
               for entry, ids in prepared]
    document = {"model_name": args.model_name, "checkpoint": str(inspector.folder.checkpoint),
                "step": inspector.folder.step, "mode": mode,
                **({"top_k": args.top_k} if args.fill_mask else {"seed": args.seed}),
                "texts": [{**entry, **result} for entry, result in results]}
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False), file=stdout)
        return document
    style = Style(use_colour(stdout))
    width = shutil.get_terminal_size((100, 24)).columns if style.colour else 100
    render = render_fill_mask if args.fill_mask else render_detection
    header = (f"{config.model_name} at step {inspector.folder.step} ({inspector.folder.checkpoint}): "
              + ("the generator's top candidates at each [MASK]" if args.fill_mask else
                 f"replaced-token detection, masked and sampled with seed {args.seed} as in pretraining"))
    print(header, file=stdout)
    for entry, result in results:
        print("\n".join(render(entry, result, style, width)), file=stdout)
    return document


if __name__ == "__main__":
    main()
    sys.exit(0)
