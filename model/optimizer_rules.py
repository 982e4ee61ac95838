"""What our optimizers (model.optimizers: AdamWeightDecay, ElectraLamb) do differently from stock Keras.

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
import re
from typing import Mapping

import keras
from keras import ops

# Substrings searched (re.search) in `variable.path`. The first three are the original's list; the
# last catches Keras LayerNormalization weights (always named gamma/beta) whatever their layer is called.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", r"(^|/)(gamma|beta)$")


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


class PathRulesMixin:
    """Per-variable rules by path (weight decay, LR multiplier), update-counted schedules and
    post-all-reduce clipping, shared by our AdamW and LAMB. Must precede the Keras optimiser in the MRO.

    Subclasses call `_init_path_rules` in `__init__`, `_build_path_rules` in `build`, add
    `_path_rules_config()` to their config and define `_moment_slots()` (first, second moments).
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
