"""--format onnx: a fine-tuned model folder → a folder ONNX Runtime, Triton and Hugging Face Optimum load.

Written: model.onnx (the function of checkpoints/saved_model_ids.py: token ids in, the task's outputs out,
any batch and length), the tokenizer as the ecosystem reads it (vocab.txt or the SentencePiece .model,
tokenizer.json, tokenizer_config.json and special_tokens_map.json, by checkpoints/hf.py's writer), the
Hugging Face config.json (ELECTRA sizes, the task's architecture, id2label / label2id) and electra_onnx.json
(what `python -m inference.predict` needs: task, kind, labels, casing, max_seq_length).

Classification, regression and tagging models: checkpoints/onnx_graph.py writes the graph from the weights
with ONNX Runtime's fused transformer ops (Attention, BiasGelu): 146 nodes at electra_small instead of the
converted graph's ~1,800, though hardly faster on a CPU, where the matmuls take the time (1.04x,
docs/benchmarks.md). Span QA models (the beam search of the head): tf2onnx, in-process on the
model's concrete function: Keras 3's own `model.export(format="onnx")` runs the same tf2onnx on the
tensorflow backend (and adds nothing for our model), and the torch-based exporters would need the model
in PyTorch. tf2onnx 1.17 has no handler for TensorFlow's Erfc, which exact GELU becomes; `_register_erfc`
maps it to ONNX's 1 − Erf(x).

After writing, ONNX Runtime runs the file on a few inputs beside TensorFlow; a difference above
TOLERANCE (float32) stops the export (InputError) and nothing is left behind.
"""
import contextlib
import json
import os

import numpy as np

from checkpoints import hf as hf_lib
from checkpoints import onnx_graph
from checkpoints.saved_model_ids import INPUT_NAMES, OUR_NAMES, ids_function, load_exportable, serving_info
from common.atomic import atomic_output_dir
from common.errors import InputError

MODEL_FILE = "model.onnx"
INFO_FILE = "electra_onnx.json"
OPSET = onnx_graph.OPSET
TOLERANCE = 1e-4
ARCHITECTURES = {"classification": "ElectraForSequenceClassification",
                 "regression": "ElectraForSequenceClassification",
                 "tagging": "ElectraForTokenClassification", "span": "ElectraForQuestionAnswering"}
_ERFC = []  # registered once per process


def _register_erfc():
    if _ERFC:
        return
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:  # noqa: F841  (registered by the decorator)
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            node.type = "Erf"
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype))
            ctx.insert_new_node_on_output("Sub", node.output[0], inputs=[one.output[0], node.output[0]],
                                          name=utils.make_name(f"{node.name}_erfc"))

    _ERFC.append(Erfc)


@contextlib.contextmanager
def _optimizers_without_copies():
    """tf2onnx deep-copies the whole graph before each of its optimizer passes (to undo a failing one);
    without the copies a conversion takes about half the time, and a failing pass raises instead."""
    saved = os.environ.get("TF2ONNX_CATCH_ERRORS")
    os.environ["TF2ONNX_CATCH_ERRORS"] = "FALSE"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TF2ONNX_CATCH_ERRORS", None)
        else:
            os.environ["TF2ONNX_CATCH_ERRORS"] = saved


def convert(model, info, function):
    """(the ONNX ModelProto of the model, which converter wrote it): onnx_graph's fused graph where it
    handles the task kind, else tf2onnx's conversion of `function` (an ids_function)."""
    if onnx_graph.supports(model, info):
        return onnx_graph.build(model, info), "onnx_graph"
    return tf2onnx_proto(function), "tf2onnx"


def tf2onnx_proto(function):
    """The ONNX ModelProto of an ids_function, by tf2onnx."""
    import tf2onnx

    _register_erfc()
    with _optimizers_without_copies():
        proto, _ = tf2onnx.convert.from_function(function, input_signature=function.input_signature, opset=OPSET)
    return proto


def check_inputs(info, vocab_size, seed=0):
    """Two batches of random ids: three rows at max_seq_length (one padded, segment 1 from the middle),
    and two rows half as long (at least the span head's beam), so that the batch and length both vary."""
    rng = np.random.default_rng(seed)
    beam = int(info.head.get("beam_size") or 1)
    batches = []
    for rows, length in ((3, info.max_seq_length), (2, max(beam + 2, info.max_seq_length // 2))):
        ids = rng.integers(5, vocab_size, (rows, length))
        mask = np.ones((rows, length), np.int64)
        mask[0, length - (length - beam) // 2:] = 0  # padding, leaving the span head its beam of positions
        types = np.zeros((rows, length), np.int64)
        types[:, 2:] = 1
        batches.append({"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types * mask})
    return batches


def max_difference(function, session, batches):
    """Max abs difference of ONNX Runtime's float outputs from TensorFlow's; InputError where an index
    output (the span head's top-k) differs."""
    worst = 0.0
    for batch in batches:
        expected = {key: value.numpy() for key, value in function(*(batch[n] for n in INPUT_NAMES)).items()}
        names = [output.name for output in session.get_outputs()]
        for name, value in zip(names, session.run(names, batch)):
            if np.issubdtype(value.dtype, np.integer):
                if not np.array_equal(value, expected[name]):
                    raise InputError(f"ONNX Runtime's {name} differs from TensorFlow's")
            else:
                worst = max(worst, float(np.max(np.abs(value - expected[name]))))
    return worst


def hf_config(model, info, pad_id):
    """config.json for Optimum and transformers: the encoder's ELECTRA sizes and the task's labels."""
    config = hf_lib.hf_config(model.encoder, ARCHITECTURES[info.kind], pad_id)
    labels = info.label_names if info.kind in ("classification", "tagging") else []
    if info.kind == "regression":
        labels = ["score"]
        config["problem_type"] = "regression"
    if labels:
        config.update(id2label={str(i): name for i, name in enumerate(labels)},
                      label2id={name: i for i, name in enumerate(labels)}, num_labels=len(labels))
    config["finetuning_task"] = info.task
    return config


def wordpiece_tokenizer_json(tokenizer, do_lower_case, path):
    """tokenizer.json of a WordPiece vocabulary, BERT's rules (what ElectraTokenizerFast builds itself from
    vocab.txt), [CLS] A [SEP] (B [SEP]) with segment ids 0 / 1."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    special = tokenizer.special_ids
    vocab = {token: i for i, token in enumerate(tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size)))}
    hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    hf.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                               lowercase=do_lower_case)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece(prefix="##")
    hf.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", special.cls), ("[SEP]", special.sep)])
    hf.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    hf.save(str(path), pretty=True)


def export_onnx(folder, output, overwrite=False):
    """Writes the folder (module docstring); returns (electra_onnx.json's values, the max abs difference)."""
    import onnx
    import onnxruntime

    from data.tokenization import load_tokenizer

    model, info = load_exportable(folder, "onnx")
    vocab_file = info.sp_model or info.vocab_file
    tokenizer = load_tokenizer(vocab_file=None if info.sp_model else info.vocab_file, spm_model=info.sp_model,
                               lower_case=info.do_lower_case)
    function = ids_function(model, info)
    proto, converter = convert(model, info, function)
    outputs = [output.name for output in proto.graph.output]
    with atomic_output_dir(output, overwrite) as temp:
        onnx.save(proto, str(temp / MODEL_FILE))
        session = onnxruntime.InferenceSession(str(temp / MODEL_FILE), providers=["CPUExecutionProvider"])
        difference = max_difference(function, session, check_inputs(info, tokenizer.vocab_size))
        if not difference <= TOLERANCE:
            raise InputError(f"{folder}: ONNX Runtime's outputs differ from TensorFlow's by {difference:.2e} "
                             f"(more than {TOLERANCE:g}); nothing was written, report it with the folder")
        hf_lib.write_tokenizer_files(temp, vocab_file, info.do_lower_case, info.max_seq_length)
        if not info.sp_model:  # a SentencePiece model's tokenizer.json came with the files
            wordpiece_tokenizer_json(tokenizer, info.do_lower_case, temp / hf_lib.TOKENIZER)
        config = hf_config(model, info, tokenizer.special_ids.pad)
        (temp / hf_lib.CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written_vocab = os.path.basename(vocab_file) if info.sp_model else "vocab.txt"  # write_tokenizer_files' name
        description = serving_info(info, outputs, vocab_file=written_vocab,
                                   sentencepiece=bool(info.sp_model), opset=OPSET, converter=converter,
                                   onnx_vs_tensorflow_max_abs_diff=difference)
        (temp / INFO_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    return description, difference
