"""Does Electric's text score learn word order? Held-out Wikipedia sentences against corrupted copies, at
every checkpoint of one Electric pretraining run on Wikipedia.

    python -m studies.electric --work-dir runs/electric_ranking            # train, then score
    python -m studies.electric --work-dir runs/electric_ranking --no-train # score what is saved

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
(studies/electric/device.py; studies/electric/DEVICE.md has the runbook):
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

from common.errors import exit_on_input_error
from studies.electric import device as electric_device
from studies.electric.ranking import REFERENCE_NAME, SHARDS, build_dataset, rank_saved_checkpoints

# What the flags default to on the CPU and for an accelerator (--device-export): studies/electric/DEVICE.md
# says why electra_small and this corpus (its arrays about 30 MB, inside what one device call carries).
CPU_DEFAULTS = {"model_size": "electra_tiny", "batch_size": 32, "learning_rate": 1e-3, "corpus_mb": 20.0,
                "model": {"hidden_size": 128, "num_layers": 4, "num_heads": 2, "intermediate_size": 512,
                          "embedding_size": 128}}
DEVICE_DEFAULTS = {"model_size": "electra_small", "batch_size": 128, "learning_rate": 5e-4, "corpus_mb": 120.0,
                   "model": {}}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.electric", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
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


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    if args.device_size or args.device_score or args.device_collect:
        electric_device.on_the_accelerator(args)
        return
    data_dir = args.work_dir.resolve()
    if args.device_results:  # the dataset of the export's --work-dir is there already
        electric_device.import_device_results(args, data_dir, args.device_results.resolve())
        return
    build_dataset(args, data_dir)
    if args.device_export:
        electric_device.export_for_device(args, data_dir, args.device_export.resolve(), shown_as=args.device_export)
        return
    rank_saved_checkpoints(args, data_dir)
