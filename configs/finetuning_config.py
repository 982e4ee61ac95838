"""Every fine-tuning hyperparameter of the original (configure_finetuning.py, with the paper's recipe),
plus our named options.

Precedence: the defaults below < the recipe for the model's size and the tasks (learning rate,
layer-wise decay, epochs, sequence length, left as None here) < --hparams. The paper's recipe, not the
code's own defaults, is the default: weight decay 0 (the code had 0.01) and the per-size learning rate.
"""
import dataclasses
from typing import Optional

from configs import loading
from common.errors import InputError

LAYERWISE_VARIANTS = ("original", "intended")
LOSS_REDUCTIONS = ("sum", "mean")  # the batch's loss: the original's sum of example losses, or their mean
# With several tasks: "mixed" (the original) draws every batch from all tasks' examples together, each head
# computed on the whole batch and each example's loss taken from its own task's head; "per_task" makes
# every batch one task's and shuffles the tasks' batches together (what this code did before).
MULTITASK_BATCHES = ("mixed", "per_task")
MRQA_ANSWER_ENDS = ("text_length", "char_span")  # the rules: finetune/mrqa/reader.py
# How chunking's predicted tags become chunks for its F1: the original's decoder (get_span_labels) or
# conlleval's boundary rules; they differ on ill-formed predictions (finetune/tagging/spans.py).
CHUNK_SCORERS = ("original", "conlleval")
# Learning rate and layer-wise decay per size (paper, Table 7).
SIZE_RECIPES = {"small": (3e-4, 0.8), "base": (1e-4, 0.8), "large": (5e-5, 0.9)}
# Which tasks get SQuAD's recipe (512 tokens, 2 epochs): "original", the original's rule
# (configure_finetuning.py): a name holding "squad" or "qa" (squad, squadv1, newsqa, triviaqa, searchqa,
# mrqa:<name>), so naturalqs gets the default 128 tokens and 3 epochs; "every_span_task": every
# question-answering task (QA_TASKS and mrqa:<name>), naturalqs too.
QA_RECIPES = ("original", "every_span_task")
QA_TASKS = ("squad", "squadv1", "newsqa", "naturalqs", "triviaqa", "searchqa")
# The dtype of the dense projections' matmul operands (model/matmul.py): "float32", the original's arithmetic, or
# "bfloat16": each product of the Q/K/V, attention output, FFN, embeddings projection and head dense layers takes
# bfloat16 operands and its result goes back to float32; weights, GELU, LayerNorm, softmax, dropout, losses and
# the optimizer stay float32, and the weights save under the same names either way. The fast option on CPUs with
# AMX or avx512_bf16 (docs/benchmarks.md, "Intel with AMX"). Under a 16-bit compute policy (JAX fine-tuning's
# --bf16, mixed_bfloat16) the matmuls already take bfloat16 operands and the option changes nothing.
MATMUL_DTYPES = ("float32", "bfloat16")


def gets_qa_recipe(task_name: str, rule: str = "original") -> bool:
    """Whether the task gets SQuAD's 512 tokens and 2 epochs under the QA_RECIPES `rule`."""
    if rule == "original":
        return "squad" in task_name or "qa" in task_name
    return task_name in QA_TASKS or task_name.startswith("mrqa:")


@dataclasses.dataclass(frozen=True)
class FinetuningConfig:
    # --- optimisation (None: from the size recipe)
    learning_rate: Optional[float] = None
    layerwise_lr_decay: Optional[float] = None  # 0 switches it off
    layerwise_lr_variant: str = "original"  # "original": top layer d² (as coded); "intended": top layer d
    weight_decay_rate: float = 0.0
    adam_epsilon: float = 1e-6
    warmup_proportion: float = 0.1
    lr_decay_power: float = 1.0
    clip_norm: float = 1.0
    loss_reduction: str = "sum"  # the original sums the examples' losses over the batch; "mean" averages
    train_batch_size: int = 32
    eval_batch_size: int = 32
    num_train_epochs: Optional[float] = None  # None: 3, 10 for RTE or STS alone, 2 for QA (qa_recipe)
    max_train_steps: int = 0  # > 0: stop after this many updates (quick runs); the schedule follows
    head_dropout: float = 0.1
    multitask_batches: str = "mixed"  # several tasks: "mixed" batches as the original, or "per_task"
    # MRQA training targets: "text_length" (the original's: the detected text's length from its span's
    # start) or "char_span" (the span's own end; keeps answers MRQA detected by normalised match)
    mrqa_answer_end: str = "text_length"
    chunk_scorer: str = "original"  # chunk F1 by the original's span decoder, or "conlleval"'s rules

    # --- inputs
    max_seq_length: Optional[int] = None  # None: 128, 512 for QA (qa_recipe), 256 for chunk alone
    qa_recipe: str = "original"  # which tasks get the 512 and 2 above: QA_RECIPES
    double_unordered: bool = True  # MRPC and STS training pairs also in swapped order
    # False: the original's fixed batches (random, padded to max_seq_length). True, the fast option: each batch
    # padded to its longest example, one task's training batches cut from length-sorted pools, which changes
    # which examples share an update (with the summed loss and the clip), so it is not the original's training
    length_bucketing: bool = False
    bucket_pool_batches: int = 50  # training batches drawn from one length-sorted pool (1: the fixed batches)
    pad_to_multiple: int = 0  # > 0: bucketed lengths rounded up to a multiple (few shapes for JAX's jit)
    # the encoder's per-position work on the real tokens' rows only, not the padding (model/unpadding.py): the same
    # function within float32 rounding, its dropout masks drawn for the rows. None: on under TensorFlow, off under
    # JAX (whose jitted step needs fixed shapes; True there is refused); False: every position, as the original
    skip_padding: Optional[bool] = None
    skip_bad_rows: bool = False  # a row that cannot be parsed: stop (False) or skip it, reported per file

    # --- question answering
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    beam_size: int = 20
    answerable_weight: float = 0.5
    qa_na_threshold: float = -2.75
    qa_hidden_size: int = 512

    # --- runs
    num_trials: int = 1
    seed: int = 0  # trial k uses seed + k
    iterations_per_loop: int = 100  # updates per progress line and TensorBoard point
    save_finetuned_models: bool = True
    use_xla: bool = False
    matmul_dtype: str = "float32"  # MATMUL_DTYPES: "bfloat16" for bfloat16 matmul operands, the rest float32

    def __post_init__(self):
        if self.loss_reduction not in LOSS_REDUCTIONS:
            raise InputError(f"fine-tuning config: loss_reduction {self.loss_reduction!r} is not one of "
                             f"{', '.join(LOSS_REDUCTIONS)}")
        if self.multitask_batches not in MULTITASK_BATCHES:
            raise InputError(f"fine-tuning config: multitask_batches {self.multitask_batches!r} is not one of "
                             f"{', '.join(MULTITASK_BATCHES)}")
        if self.mrqa_answer_end not in MRQA_ANSWER_ENDS:
            raise InputError(f"fine-tuning config: mrqa_answer_end {self.mrqa_answer_end!r} is not one of "
                             f"{', '.join(MRQA_ANSWER_ENDS)}")
        if self.qa_recipe not in QA_RECIPES:
            raise InputError(f"fine-tuning config: qa_recipe {self.qa_recipe!r} is not one of {', '.join(QA_RECIPES)}")
        if self.chunk_scorer not in CHUNK_SCORERS:
            raise InputError(f"fine-tuning config: chunk_scorer {self.chunk_scorer!r} is not one of "
                             f"{', '.join(CHUNK_SCORERS)}")
        if self.matmul_dtype not in MATMUL_DTYPES:
            raise InputError(f"fine-tuning config: matmul_dtype {self.matmul_dtype!r} is not one of "
                             f"{', '.join(MATMUL_DTYPES)}")
        if self.layerwise_lr_variant not in LAYERWISE_VARIANTS:
            raise InputError(f"fine-tuning config: layerwise_lr_variant {self.layerwise_lr_variant!r} is not "
                             f"one of {', '.join(LAYERWISE_VARIANTS)}")
        for name in ("train_batch_size", "eval_batch_size", "num_trials", "iterations_per_loop",
                     "doc_stride", "max_query_length", "max_answer_length", "n_best_size", "beam_size",
                     "bucket_pool_batches"):
            if getattr(self, name) < 1:
                raise InputError(f"fine-tuning config: {name} {getattr(self, name)} must be at least 1")
        if self.pad_to_multiple < 0:
            raise InputError(f"fine-tuning config: pad_to_multiple {self.pad_to_multiple} must be 0 (off) or "
                             "positive")
        if not 0.0 <= self.warmup_proportion <= 1.0:
            raise InputError(f"fine-tuning config: warmup_proportion {self.warmup_proportion} must be in [0, 1]")
        if self.layerwise_lr_decay is not None and not 0.0 <= self.layerwise_lr_decay <= 1.0:
            raise InputError(f"fine-tuning config: layerwise_lr_decay {self.layerwise_lr_decay} must be in "
                             "[0, 1] (0 switches it off)")
        if self.max_seq_length is not None and self.max_seq_length < 8:
            raise InputError(f"fine-tuning config: max_seq_length {self.max_seq_length} must be at least 8")

    @classmethod
    def create(cls, hparams=None, size="small", task_names=(), source="--hparams",
               overrides=None) -> "FinetuningConfig":
        """--hparams (a dict, inline JSON or a .json path) over the recipe for `size` and the tasks;
        `overrides` (the command line's own flags, such as --num-trials) over --hparams."""
        values = {**loading.parse_hparams(hparams, source), **(overrides or {})}
        config = loading.dataclass_from_dict(cls, values, source)
        return config.with_recipe(size, task_names)

    def with_recipe(self, size, task_names) -> "FinetuningConfig":
        """Fills what is still None from the paper's recipe for this size and these tasks."""
        if size not in SIZE_RECIPES:
            raise InputError(f"fine-tuning config: size {size!r} is not one of {', '.join(SIZE_RECIPES)}")
        learning_rate, decay = SIZE_RECIPES[size]
        task_names = list(task_names)
        is_squad = any(gets_qa_recipe(name, self.qa_recipe) for name in task_names)
        if task_names in (["rte"], ["sts"]):
            epochs = 10.0
        elif is_squad:
            epochs = 2.0
        else:
            epochs = 3.0
        changes = {}
        if self.learning_rate is None:
            changes["learning_rate"] = learning_rate
        if self.layerwise_lr_decay is None:
            changes["layerwise_lr_decay"] = decay
        if self.num_train_epochs is None:
            changes["num_train_epochs"] = epochs
        if self.max_seq_length is None:  # the original's configure_finetuning: chunk alone gets 256
            changes["max_seq_length"] = 512 if is_squad else 256 if task_names == ["chunk"] else 128
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def size_of(model_size_name: str, hidden_size: int) -> str:
    """The recipe size of a pretrained model: from its size name when it says, else from its width."""
    name = (model_size_name or "").lower()
    for size in ("large", "base", "small"):
        if size in name:
            return size
    if hidden_size <= 256:
        return "small"
    return "base" if hidden_size <= 768 else "large"
