"""Exports a model folder for other tools.

    python -m checkpoints.export --model-dir electra_data/models/electra_small --format hf --output out/hf
    python -m checkpoints.export --model-dir electra_data/models/electra_small --format hf --dtype float16 --output hf16
    python -m checkpoints.export --model-dir electra_data/models/electra_base --format bert --output out/bert
    python -m checkpoints.export --model-dir electra_data/models/electra_small --format tf1 --output out/tf1
    python -m checkpoints.export --model-dir electra_data/models/electra_small --format keras_hub --output out/kh
    python -m checkpoints.export --model-dir <fine-tuned folder> --format saved_model --output out/sst/1
    python -m checkpoints.export --model-dir <fine-tuned folder> --format saved_model_ids --output out/sst_ids/1
    python -m checkpoints.export --model-dir <fine-tuned folder> --format onnx --output out/sst_onnx

Formats:
  tf1          a name-based TF1 checkpoint with the original release's names (discriminator + generator),
               global_step, vocab.txt (readable by tf.train.load_checkpoint and Hugging Face's converter)
  bert         a google-research/bert checkpoint (bert/… names, bert_config.json, vocab.txt); only for
               models whose embedding size equals the hidden size (Base, Large)
  hf           <output>/discriminator (ElectraForPreTraining, ElectraModel) and <output>/generator
               (ElectraForMaskedLM): config.json, model.safetensors (float32, or --dtype float16), vocab and
               tokenizer files (under KERAS_BACKEND=jax it needs no TensorFlow); an
               Electric model exports its discriminator only (no Hugging Face class holds the two towers)
  keras_hub    a keras-hub preset of the encoder (config.json, model.weights.h5, tokenizer.json,
               assets/tokenizer/vocabulary.txt, metadata.json) for keras_hub.models.ElectraBackbone and
               ElectraTokenizer .from_preset(<output>); needs keras-hub (requirements-test.txt)
  saved_model  a fine-tuned classifier or tagger as a SavedModel serving raw strings (labels and
               probabilities; a tag per word); needs tensorflow-text's ops in the server (TF Serving has them)
  saved_model_ids  a fine-tuned model of any task kind as a SavedModel taking token ids (input_ids,
               attention_mask, token_type_ids; no tensorflow-text op), for any TensorFlow client
  onnx         a fine-tuned model of any task kind as model.onnx (the same ids in) beside tokenizer.json,
               vocab.txt and a Hugging Face config.json with id2label: for ONNX Runtime, Triton, Optimum and
               python -m inference.predict; ONNX Runtime's outputs are checked against TensorFlow's

--model-dir takes a model folder (its latest checkpoint) or a checkpoint prefix in one (…/ckpt-1000).
The output is written to a temporary folder and renamed when complete; an existing non-empty output
folder is replaced only with --overwrite. Bad input stops with one line and exit code 2.
"""
import argparse
import os
import sys

from common.quiet import quiet_tensorflow

quiet_tensorflow()  # before TensorFlow is imported anywhere: hides its start-up lines
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pathlib

from common.errors import InputError, exit_on_input_error

FORMATS = ("tf1", "bert", "hf", "keras_hub", "saved_model", "saved_model_ids", "onnx")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", required=True, type=pathlib.Path,
                        help="a pretrained model folder (or a checkpoint prefix in one); for saved_model, "
                             "saved_model_ids and onnx a fine-tuned model folder")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--output", required=True, type=pathlib.Path, help="the folder to write")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                        help="--format hf: the weights' type; float16 halves the files (to share, or to copy from a "
                             "machine with a size limit), read back by transformers and checkpoints.import_weights")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what this export writes in an existing non-empty --output folder")
    return parser.parse_args(argv)


@exit_on_input_error
def main(argv=None):
    args = parse_args(argv)
    from common.atomic import check_output_dir

    check_output_dir(args.output, args.overwrite)
    if args.dtype != "float32" and args.format != "hf":
        raise InputError(f"--dtype {args.dtype} is for --format hf; --format {args.format} writes float32")
    if args.format == "saved_model":
        from checkpoints.saved_model import export_finetuned

        info = export_finetuned(args.model_dir, args.output, args.overwrite)
        print(f"Wrote a SavedModel to {args.output}: inputs {', '.join(info['inputs'])} (strings), outputs "
              f"{', '.join(info['outputs'])}")
        return info
    if args.format in ("saved_model_ids", "onnx"):
        return export_token_ids(args)
    import importlib

    from checkpoints import keras_hub_preset
    from pretrain.loaded_folder import load_model_folder

    if args.format == "keras_hub":
        keras_hub_preset.import_keras_hub("--format keras_hub")  # before any work
    model = load_model_folder(args.model_dir)
    print(f"Read {model.checkpoint} (step {model.step}).")
    if args.format == "keras_hub":
        notes = keras_hub_preset.export_keras_hub(model, args.output, args.overwrite)
        print(f"Wrote a keras-hub preset of {args.model_dir}'s encoder to {args.output}: "
              f"keras_hub.models.ElectraBackbone.from_preset({str(args.output)!r}), and ElectraTokenizer likewise.")
        for note in notes:
            print(f"Note: {note}.")
        return notes
    module = importlib.import_module(f"checkpoints.{args.format}")  # only its own: hf needs no TensorFlow
    options = {"dtype": args.dtype} if args.format == "hf" else {}
    written = getattr(module, f"export_{args.format}")(model, args.output, args.overwrite, **options)
    detail = (f"models {', '.join(written)}" if args.format == "hf" else f"{written} tensors")
    print(f"Wrote the {args.format} export of {args.model_dir} to {args.output} ({detail}).")
    if args.format == "hf" and model.config.two_tower_generator:
        print("Note: Hugging Face has no class for Electric's two-tower cloze generator, so only the discriminator "
              "is exported (its head outputs Electric's energies); --format tf1 keeps both.")
    if args.format == "hf" and model.is_sentencepiece:
        print(f"Tokenizer: tokenizer.json (for AutoTokenizer) built from {model.vocab_file.name}, which is "
              "copied beside it; see docs/checkpoints.md for the rare inputs it splits differently.")
    return written


def export_token_ids(args):
    """--format saved_model_ids or onnx: a fine-tuned model with token ids in (tokenizer outside the graph)."""
    if args.format == "onnx":
        from checkpoints.onnx_export import TOLERANCE, export_onnx

        info, difference = export_onnx(args.model_dir, args.output, args.overwrite)
        print(f"Wrote {args.output}/model.onnx ({info['kind']}: outputs {', '.join(info['outputs'])}) with its "
              f"tokenizer and config.json; ONNX Runtime vs TensorFlow max abs diff {difference:.2e} "
              f"(limit {TOLERANCE:g}, float32)")
        return info
    from checkpoints.saved_model_ids import export_ids_saved_model

    info = export_ids_saved_model(args.model_dir, args.output, args.overwrite)
    print(f"Wrote a SavedModel to {args.output}: inputs {', '.join(info['inputs'])} (int64 token ids), outputs "
          f"{', '.join(info['outputs'])}")
    return info


if __name__ == "__main__":
    main()
    sys.exit(0)
