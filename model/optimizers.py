"""The optimizers of the original ELECTRA release, in backend-neutral Keras 3, and the factory run
scripts call.

What the original (google-research/electra `model/optimization.py`, itself BERT's) does and we keep:
`AdamWeightDecay`, Adam **without bias correction**, decoupled weight decay added to the update (so
scaled by the learning rate), no decay on LayerNorm and bias variables, global-norm clipping at 1.0
over all gradients before the update. Behind a switch: LAMB (Keras' own, NVIDIA's β defaults).
How both differ from stock Keras optimizers (path-based rules, update-counted schedules, clipping after
the all-reduce) is model.optimizer_rules; the schedules are model.lr_schedules; layer-wise decay is
model.layerwise_decay. Registered as `electra>AdamWeightDecay` and `electra>ElectraLamb`.
"""
from typing import Callable, Iterable, Mapping

import keras
import numpy as np
from keras import ops

from model.layerwise_decay import LayerwiseLRDecay
from model.lr_schedules import SCHEDULES
from model.optimizer_rules import DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, PathRulesMixin

SERIALIZATION_PACKAGE = "electra"  # registered names are electra>ClassName: keep them so

ADAMW_BETAS = (0.9, 0.999)
# NVIDIA's TF2 ELECTRA port pretrains with LAMB at these betas.
LAMB_BETAS = (0.878, 0.974)


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class AdamWeightDecay(PathRulesMixin, keras.optimizers.Optimizer):
    """The original's AdamWeightDecayOptimizer (BERT, ELECTRA), as a Keras 3 optimiser.

    Per variable: `m = β1·m + (1−β1)·g`, `v = β2·v + (1−β2)·g²`, `u = m / (√v + ε)`,
    `u += weight_decay_rate · w` unless the path matches `exclude_from_weight_decay`,
    `w -= lr · multiplier(path) · u`. No bias correction: early updates are ~3× larger than Adam's
    (√(1−β2)/(1−β1) ≈ 0.32 in the denominator), which the original's warmup absorbs.

    `global_clipnorm` (1.0 in the original) clips by the norm over all gradients before the update.
    `lr_multipliers`: `{variable.path: float}` or a callable `path -> float` (e.g. `LayerwiseLRDecay`),
    resolved when the optimiser is built; it scales the whole update, decay included, as the original's
    per-layer learning rates did.
    `fused`: update the variables that share a rule (decay or not, multiplier) as one flat vector, and clip
    by one norm over all gradients at once: a few large kernels instead of several per variable (hundreds
    of launches on an accelerator). The same update element for element; the norm sums in another order.
    Not under tf.distribute, whose per-variable update it would bypass (the JAX path sets it).
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
        fused=False,
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
        self.fused = bool(fused)
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

    def _clip_gradients(self, grads):
        if self.fused:
            return grads  # by one norm over the flat gradients, in _backend_update_step
        return super()._clip_gradients(grads)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not self.fused:
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        indices = [self._get_variable_index(v) for v in trainable_variables]
        flat_grads = [ops.reshape(ops.cast(g, v.dtype), (-1,)) for g, v in zip(grads, trainable_variables)]
        if self.global_clipnorm and self.global_clipnorm > 0:
            norm = ops.sqrt(ops.sum(ops.stack([ops.sum(ops.square(g)) for g in _concatenated_by_dtype(flat_grads)])))
            scale = self.global_clipnorm / ops.maximum(norm, self.global_clipnorm) + (norm - norm)
            flat_grads = [g * ops.cast(scale, g.dtype) for g in flat_grads]
        groups = {}
        for position, (index, variable) in enumerate(zip(indices, trainable_variables)):
            rule = (variable.dtype, self._variable_decays[index], self._variable_lr_multipliers[index])
            groups.setdefault(rule, []).append(position)
        for (dtype, decays, multiplier), positions in groups.items():
            members = [trainable_variables[p] for p in positions]
            m_slots = [self._adam_m[indices[p]] for p in positions]
            v_slots = [self._adam_v[indices[p]] for p in positions]
            flat = lambda values: ops.concatenate([ops.reshape(x, (-1,)) for x in values])  # noqa: E731
            gradient, variable = ops.concatenate([flat_grads[p] for p in positions]), flat(members)
            next_m = self.beta_1 * flat(m_slots) + (1.0 - self.beta_1) * gradient
            next_v = self.beta_2 * flat(v_slots) + (1.0 - self.beta_2) * ops.square(gradient)
            update = next_m / (ops.sqrt(next_v) + self.epsilon)
            if self.weight_decay_rate > 0 and decays:
                update = update + self.weight_decay_rate * variable
            lr = ops.cast(learning_rate, dtype)
            if multiplier != 1.0:
                lr = lr * multiplier
            new_variable = variable - lr * update
            offset = 0
            for member, m, v in zip(members, m_slots, v_slots):
                size, shape = int(np.prod(member.shape)), member.shape
                piece = slice(offset, offset + size)
                self.assign(m, ops.reshape(next_m[piece], shape))
                self.assign(v, ops.reshape(next_v[piece], shape))
                self.assign(member, ops.reshape(new_variable[piece], shape))
                offset += size

    def get_config(self):
        config = super().get_config()
        config.pop("weight_decay", None)
        config.update(
            {
                "fused": self.fused,
                "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
            }
        )
        config.update(self._path_rules_config())
        return config


def _concatenated_by_dtype(flat_values):
    """One vector per dtype of the flat values (the global norm's sum of squares: one reduction each)."""
    by_dtype = {}
    for value in flat_values:
        by_dtype.setdefault(str(value.dtype), []).append(value)
    return [ops.concatenate(values) for values in by_dtype.values()]


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class ElectraLamb(PathRulesMixin, keras.optimizers.Lamb):
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
