"""Optimisers and learning-rate schedules of the original ELECTRA release, in backend-neutral Keras 3.

What the original (google-research/electra `model/optimization.py`, itself BERT's) does and we keep:

* `AdamWeightDecay`: Adam **without bias correction**, decoupled weight decay added to the update
  (so it is scaled by the learning rate), no decay on LayerNorm and bias variables, global-norm
  clipping at 1.0 over all gradients before the update.
* `JointWarmupDecay`: polynomial decay to 0 starting at step 0, multiplied by a linear warmup factor
  (warmup and decay run at the same time).
* Layer-wise learning-rate decay for fine-tuning, with the original off-by-one (top layer gets d²).

Additions behind switches: `WarmupThenDecay` (warm up to the peak, then decay over the remaining
steps), LAMB (Keras' own, NVIDIA's β defaults), the intended layer-wise decay (top layer gets d).

Choices that differ from stock Keras, and why:

* Variables are told apart by `variable.path` (e.g. `electra/encoder/layer_3/attention/output/LayerNorm/gamma`),
  never by `variable.name`, because the original's patterns ("LayerNorm", "bias") name scopes. Stock
  Keras matches its exclusions against `variable.name`: the full path under TensorFlow (a tf.Variable's
  name) but only `gamma` under JAX, where LayerNorm weights would silently be decayed.
* Schedules are called with the number of optimizer *updates* (`optimizer.iterations`), not Keras'
  default of micro-batches, so `gradient_accumulation_steps` does not stretch warmup and decay.
  `optimizer._iterations` (what a checkpoint stores) still counts micro-batches.
* Under TensorFlow, global-norm clipping runs on the gradients *after* the cross-replica sum, so N
  replicas × batch b clip exactly like 1 replica × batch N·b. Stock Keras clips each replica's partial
  gradient before the sum (and so, on TPU, did the original: it clipped before CrossShardOptimizer's
  cross-replica sum). With gradient accumulation the clip applies to the averaged gradient.

Known limits (Keras 3.15): `gradient_accumulation_steps` fails under tf.distribute.MirroredStrategy
(Keras' accumulator update does a merge_call inside a cond), with stock optimisers too; it works on one
device (eager, tf.function, XLA) and under JAX. Under a LossScaleOptimizer, skipped (overflowed) steps
do not advance `iterations`, hence not the schedule either.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping

import keras
from keras import ops

# Substrings searched (re.search) in `variable.path`. The first three are the original's list; the
# last catches Keras LayerNormalization weights (always named gamma/beta) whatever their layer is called.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", r"(^|/)(gamma|beta)$")

ADAMW_BETAS = (0.9, 0.999)
# NVIDIA's TF2 ELECTRA port pretrains with LAMB at these betas.
LAMB_BETAS = (0.878, 0.974)

_SERIALIZATION_PACKAGE = "electra"


def variable_path(variable) -> str:
    """The name patterns match against: Keras' `path`, else a TF variable's name without `:0`."""
    path = getattr(variable, "path", None) or variable.name
    return path[:-2] if path.endswith(":0") else path


def clip_by_global_norm(gradients, clip_norm):
    """`tf.clip_by_global_norm`: one norm over all gradients; non-finite norms give NaN, as in TF."""
    present = [g for g in gradients if g is not None]
    if not present:
        return list(gradients)
    squares = [ops.sum(ops.square(ops.cast(g, "float32"))) for g in present]
    norm = ops.sqrt(ops.sum(ops.stack(squares)))
    scale = clip_norm / ops.maximum(norm, clip_norm) + (norm - norm)
    return [None if g is None else g * ops.cast(scale, g.dtype) for g in gradients]


# --------------------------------------------------------------------------------------------------
# Learning-rate schedules
# --------------------------------------------------------------------------------------------------


def _check_schedule_args(num_train_steps, num_warmup_steps, power):
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
    if num_warmup_steps < 0:
        raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
    if power < 0:
        raise ValueError(f"lr_decay_power must be >= 0, got {power}.")


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class JointWarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original schedule: `lr · (1 − min(step, T)/T)^power · min(1, step/warmup)`.

    Decay starts at step 0, so the peak actually reached is below `learning_rate`
    (lr · (1 − W/T) at the end of warmup). Step 0 gives 0, as in the original. warmup 0 = no warmup.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, power=1.0):
        _check_schedule_args(num_train_steps, num_warmup_steps, power)
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.power = float(power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        done = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        lr = self.learning_rate * ops.power(1.0 - done, self.power)
        if self.num_warmup_steps:
            lr = lr * ops.minimum(1.0, step / float(self.num_warmup_steps))
        return lr

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
        }


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class WarmupThenDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Large-batch (LAMB) recipe: `lr · step/W` up to W, then `lr · (1 − (step−W)/(T−W))^power`.

    The peak `learning_rate` is reached exactly at step W; 0 from step T on.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, power=1.0):
        _check_schedule_args(num_train_steps, num_warmup_steps, power)
        if num_warmup_steps >= num_train_steps:
            raise ValueError(
                f"num_warmup_steps ({num_warmup_steps}) must be below num_train_steps "
                f"({num_train_steps}) for the warmup_then_decay schedule."
            )
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.power = float(power)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = float(self.num_warmup_steps)
        decay_steps = float(self.num_train_steps - self.num_warmup_steps)
        done = ops.clip((step - warmup) / decay_steps, 0.0, 1.0)
        decayed = self.learning_rate * ops.power(1.0 - done, self.power)
        if not self.num_warmup_steps:
            return decayed
        warming = self.learning_rate * step / warmup
        return ops.where(step < warmup, warming, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
        }


SCHEDULES = {"joint": JointWarmupDecay, "warmup_then_decay": WarmupThenDecay}


# --------------------------------------------------------------------------------------------------
# Layer-wise learning-rate decay (fine-tuning)
# --------------------------------------------------------------------------------------------------

_LAYER_COMPONENT = re.compile(r"layer_(\d+)")
_EMBEDDING_SCOPES = ("embeddings", "embeddings_project")


def layer_depth(path: str, num_layers: int) -> int | None:
    """Depth of a variable for layer-wise decay: 0 embeddings, i + 1 encoder layer i, None otherwise.

    Matching rule (on `/`-separated components of the path):
    * a component that is exactly `layer_<i>` → encoder layer i (so `layer_norm`, `layer_10` vs
      `layer_1` cannot be confused);
    * else a scope component (not the last one, which is the variable's own name — a Keras
      Embedding's table is itself called `embeddings`) equal to `embeddings`, `embeddings_project` or
      ending in `_embeddings` → the embeddings;
    * anything else (task heads, discriminator head) → None, which callers treat as the top.
    """
    components = path.split("/")
    for component in components:
        match = _LAYER_COMPONENT.fullmatch(component)
        if match:
            index = int(match.group(1))
            if index >= num_layers:
                raise ValueError(
                    f"Variable {path!r} is in encoder layer {index} but num_layers={num_layers}; "
                    "pass the encoder's real number of layers."
                )
            return index + 1
    for component in components[:-1]:
        if component in _EMBEDDING_SCOPES or component.endswith("_embeddings"):
            return 0
    return None


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class LayerwiseLRDecay:
    """`path -> multiplier` for layer-wise LR decay; an object (not a dict) so the optimiser can be
    created before the model's variables exist, and still serialise.

    variant "original" (as coded in the release, needed to reproduce its numbers): head depth L + 2,
    multiplier d^(L + 2 − depth): head 1, top layer d², embeddings d^(L+2).
    variant "intended" (the authors' stated intent): head depth L + 1: head 1, top layer d,
    embeddings d^(L+1).
    """

    VARIANTS = ("original", "intended")

    def __init__(self, num_layers: int, decay: float, variant: str = "original"):
        if variant not in self.VARIANTS:
            raise ValueError(f"variant must be one of {self.VARIANTS}, got {variant!r}.")
        if num_layers <= 0:
            raise ValueError(f"num_layers must be positive, got {num_layers}.")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"layer-wise decay must be in (0, 1], got {decay}.")
        self.num_layers = int(num_layers)
        self.decay = float(decay)
        self.variant = variant

    def __call__(self, path: str) -> float:
        top = self.num_layers + (2 if self.variant == "original" else 1)
        depth = layer_depth(path, self.num_layers)
        if depth is None:
            depth = top
        return self.decay ** (top - depth)

    def get_config(self):
        return {"num_layers": self.num_layers, "decay": self.decay, "variant": self.variant}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def layerwise_lr_multipliers(
    variable_paths: Iterable[str], num_layers: int, decay: float, variant: str = "original"
) -> dict[str, float]:
    """`{path: multiplier}` for the given variable paths; see `LayerwiseLRDecay` for the rule."""
    rule = LayerwiseLRDecay(num_layers, decay, variant)
    return {path: rule(path) for path in variable_paths}


# --------------------------------------------------------------------------------------------------
# Optimisers
# --------------------------------------------------------------------------------------------------


class _PathRulesMixin:
    """Per-variable rules by path (weight decay, LR multiplier), update-counted schedules and
    post-all-reduce clipping, shared by our AdamW and LAMB. Must precede the Keras optimiser in the MRO.
    """

    def _init_path_rules(self, exclude_from_weight_decay, lr_multipliers):
        if exclude_from_weight_decay is None:
            exclude_from_weight_decay = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
        if isinstance(exclude_from_weight_decay, str):
            exclude_from_weight_decay = (exclude_from_weight_decay,)
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay)
        self._exclude_regexes = tuple(re.compile(p) for p in self.exclude_from_weight_decay_patterns)
        if isinstance(lr_multipliers, Mapping):
            lr_multipliers = {str(k): float(v) for k, v in lr_multipliers.items()}
        elif lr_multipliers is not None and not callable(lr_multipliers):
            raise TypeError("lr_multipliers must be a {path: float} mapping, a callable(path) or None.")
        self.lr_multipliers = lr_multipliers

    def decays_variable(self, path: str) -> bool:
        """Whether weight decay applies to the variable at `path`."""
        return not any(regex.search(path) for regex in self._exclude_regexes)

    def _build_path_rules(self, var_list):
        paths = [variable_path(v) for v in var_list]
        if isinstance(self.lr_multipliers, Mapping):
            unknown = sorted(set(self.lr_multipliers) - set(paths))
            if unknown:
                raise ValueError(
                    f"lr_multipliers names variables this optimizer is not training: {unknown[:5]}"
                    f"{' ...' if len(unknown) > 5 else ''}. Keys must be `variable.path` values."
                )
            multipliers = [self.lr_multipliers.get(p, 1.0) for p in paths]
        elif callable(self.lr_multipliers):
            multipliers = [float(self.lr_multipliers(p)) for p in paths]
        else:
            multipliers = [1.0] * len(paths)
        # Tuples of Python constants: read by index inside update_step, where TF hands us a tf.Variable
        # without `.path`.
        self._variable_paths = tuple(paths)
        self._variable_decays = tuple(self.decays_variable(p) for p in paths)
        self._variable_lr_multipliers = tuple(multipliers)

    def _lr_multiplier(self, variable) -> float:
        return self._variable_lr_multipliers[self._get_variable_index(variable)]

    def _use_weight_decay(self, variable):
        # Stock Keras matches `variable.name` ("gamma"); we match the path, by index.
        return self._variable_decays[self._get_variable_index(variable)]

    def _get_current_learning_rate(self):
        # Stock Keras calls schedules with micro-batches (`_iterations`); we count updates.
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def _clips_after_all_reduce(self) -> bool:
        return bool(self.global_clipnorm) and hasattr(super(), "_all_reduce_sum_gradients")

    def _clip_gradients(self, grads):
        if self.global_clipnorm and self.global_clipnorm > 0:
            if self._clips_after_all_reduce():
                return grads  # done in _all_reduce_sum_gradients, on the summed gradients
            return clip_by_global_norm(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # TensorFlow backend only: it sums replica gradients here, right before the update.
        grads_and_vars = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if not (self.global_clipnorm and self.global_clipnorm > 0):
            return grads_and_vars
        clipped = clip_by_global_norm([g for g, _ in grads_and_vars], self.global_clipnorm)
        return [(g, v) for g, (_, v) in zip(clipped, grads_and_vars)]

    def slot_variables(self) -> dict[str, dict[str, object]]:
        """`{variable path: {"adam_m": m, "adam_v": v}}`, for exporters writing `<var>/adam_m`."""
        first, second = self._moment_slots()
        return {
            path: {"adam_m": m, "adam_v": v}
            for path, m, v in zip(self._variable_paths, first, second)
            if m is not None
        }

    def _path_rules_config(self):
        multipliers = self.lr_multipliers
        if isinstance(multipliers, Mapping):
            multipliers = dict(multipliers)
        elif multipliers is not None:
            if not hasattr(multipliers, "get_config"):
                raise ValueError(
                    "lr_multipliers is a plain callable and cannot be serialised; pass a dict or a "
                    "LayerwiseLRDecay."
                )
            multipliers = keras.saving.serialize_keras_object(multipliers)
        return {
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay_patterns),
            "lr_multipliers": multipliers,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        multipliers = config.get("lr_multipliers")
        if isinstance(multipliers, dict) and isinstance(multipliers.get("class_name"), str):
            config["lr_multipliers"] = keras.saving.deserialize_keras_object(
                multipliers, custom_objects=custom_objects
            )
        return super().from_config(config, custom_objects=custom_objects)


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class AdamWeightDecay(_PathRulesMixin, keras.optimizers.Optimizer):
    """The original's AdamWeightDecayOptimizer (BERT, ELECTRA), as a Keras 3 optimiser.

    Per variable: `m = β1·m + (1−β1)·g`, `v = β2·v + (1−β2)·g²`, `u = m / (√v + ε)`,
    `u += weight_decay_rate · w` unless the path matches `exclude_from_weight_decay`,
    `w -= lr · multiplier(path) · u`. No bias correction: early updates are ~3× larger than Adam's
    (√(1−β2)/(1−β1) ≈ 0.32 in the denominator), which the original's warmup absorbs.

    `global_clipnorm` (1.0 in the original) clips by the norm over all gradients before the update.
    `lr_multipliers`: `{variable.path: float}` or a callable `path -> float` (e.g. `LayerwiseLRDecay`),
    resolved when the optimiser is built; it scales the whole update, decay included, as the original's
    per-layer learning rates did.
    """

    def __init__(
        self,
        learning_rate=1e-3,
        weight_decay_rate=0.01,
        beta_1=ADAMW_BETAS[0],
        beta_2=ADAMW_BETAS[1],
        epsilon=1e-6,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        lr_multipliers=None,
        global_clipnorm=None,
        name="adam_weight_decay",
        **kwargs,
    ):
        if kwargs.get("weight_decay") is not None:
            raise ValueError(
                "AdamWeightDecay applies weight_decay_rate inside its update; Keras' `weight_decay` "
                "would decay a second time. Use weight_decay_rate."
            )
        kwargs.pop("weight_decay", None)
        super().__init__(
            learning_rate=learning_rate, global_clipnorm=global_clipnorm, name=name, **kwargs
        )
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self._init_path_rules(exclude_from_weight_decay, lr_multipliers)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        # Keras names these `<path with _>_adam_m`; `slot_variables()` gives exporters the real path.
        self._adam_m, self._adam_v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        self._build_path_rules(var_list)

    def _moment_slots(self):
        return self._adam_m, self._adam_v

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._adam_m[index], self._adam_v[index]
        dtype = variable.dtype
        gradient = ops.cast(gradient, dtype)
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient)
        update = next_m / (ops.sqrt(next_v) + self.epsilon)
        if self.weight_decay_rate > 0 and self._variable_decays[index]:
            update = update + self.weight_decay_rate * variable
        lr = ops.cast(learning_rate, dtype)
        multiplier = self._variable_lr_multipliers[index]
        if multiplier != 1.0:
            lr = lr * multiplier
        self.assign(m, next_m)
        self.assign(v, next_v)
        self.assign_sub(variable, lr * update)

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            {
                "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
            }
        )
        config.update(self._path_rules_config())
        return config


@keras.saving.register_keras_serializable(package=_SERIALIZATION_PACKAGE)
class ElectraLamb(_PathRulesMixin, keras.optimizers.Lamb):
    """Keras' own LAMB with our path-based decay exclusion, update-counted schedules, LR multipliers
    and post-all-reduce clipping.

    Differs from NVIDIA's LAMB: Keras applies weight decay decoupled (`w -= lr·wd·w`, before and
    outside the trust ratio) and applies the trust ratio to every variable, LayerNorm and bias included.
    LR multipliers scale the LAMB step, not the decoupled decay.
    """

    def __init__(
        self,
        learning_rate=1e-3,
        beta_1=LAMB_BETAS[0],
        beta_2=LAMB_BETAS[1],
        epsilon=1e-6,
        weight_decay=0.01,
        exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
        lr_multipliers=None,
        global_clipnorm=None,
        name="electra_lamb",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            weight_decay=weight_decay or None,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )
        self._init_path_rules(exclude_from_weight_decay, lr_multipliers)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._build_path_rules(var_list)

    def _moment_slots(self):
        return self._momentums, self._velocities

    def update_step(self, gradient, variable, learning_rate):
        multiplier = self._lr_multiplier(variable)
        if multiplier != 1.0:
            learning_rate = learning_rate * multiplier
        super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        config = super().get_config()
        config.update(self._path_rules_config())
        return config


# --------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------


def create_optimizer(
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int,
    weight_decay_rate: float = 0.01,
    lr_decay_power: float = 1.0,
    optimizer: str = "adamw",
    epsilon: float = 1e-6,
    beta_1: float | None = None,
    beta_2: float | None = None,
    clip_norm: float | None = 1.0,
    gradient_accumulation_steps: int = 1,
    schedule: str = "joint",
    layerwise_lr_decay: float | None = None,
    num_layers: int | None = None,
    layerwise_variant: str = "original",
    exclude_from_weight_decay: Iterable[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
    lr_multipliers: Mapping[str, float] | Callable[[str], float] | None = None,
):
    """The optimiser a run script needs. Defaults reproduce the original pretraining setup.

    `num_train_steps`/`num_warmup_steps` count optimizer updates (not micro-batches).
    `beta_1`/`beta_2` None → the recipe's: (0.9, 0.999) for "adamw", NVIDIA's (0.878, 0.974) for "lamb".
    `layerwise_lr_decay` (fine-tuning; None or ≤ 0 = off, like the original's -1) needs `num_layers`;
    it cannot be combined with explicit `lr_multipliers`.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {sorted(SCHEDULES)}, got {schedule!r}.")
    lr_schedule = SCHEDULES[schedule](learning_rate, num_train_steps, num_warmup_steps, lr_decay_power)

    if layerwise_lr_decay is not None and layerwise_lr_decay > 0:
        if num_layers is None:
            raise ValueError("layerwise_lr_decay needs num_layers (the encoder's depth).")
        if lr_multipliers is not None:
            raise ValueError("Give either layerwise_lr_decay or lr_multipliers, not both.")
        lr_multipliers = LayerwiseLRDecay(num_layers, layerwise_lr_decay, layerwise_variant)

    if gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be >= 1, got {gradient_accumulation_steps}.")
    common = {
        "learning_rate": lr_schedule,
        "epsilon": epsilon,
        "exclude_from_weight_decay": tuple(exclude_from_weight_decay),
        "lr_multipliers": lr_multipliers,
        "global_clipnorm": clip_norm if clip_norm and clip_norm > 0 else None,
        "gradient_accumulation_steps": gradient_accumulation_steps if gradient_accumulation_steps > 1 else None,
    }
    if optimizer == "adamw":
        return AdamWeightDecay(
            weight_decay_rate=weight_decay_rate,
            beta_1=ADAMW_BETAS[0] if beta_1 is None else beta_1,
            beta_2=ADAMW_BETAS[1] if beta_2 is None else beta_2,
            **common,
        )
    if optimizer == "lamb":
        return ElectraLamb(
            weight_decay=weight_decay_rate,
            beta_1=LAMB_BETAS[0] if beta_1 is None else beta_1,
            beta_2=LAMB_BETAS[1] if beta_2 is None else beta_2,
            **common,
        )
    raise ValueError(f"optimizer must be 'adamw' or 'lamb', got {optimizer!r}.")
