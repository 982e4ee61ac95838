"""Learning-rate schedules: the original's joint one (polynomial decay from step 0 times a linear warmup,
so warmup and decay run at the same time) and, behind a switch, the LAMB recipe's warmup-then-decay.

Both are called with the number of optimizer *updates* (our optimizers pass `optimizer.iterations`),
so gradient accumulation does not stretch warmup and decay. Registered as `electra>JointWarmupDecay`
and `electra>WarmupThenDecay`: saved optimizer configs name them so.
"""
import keras
from keras import ops

SERIALIZATION_PACKAGE = "electra"  # registered names are electra>ClassName: keep them so


class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
    """What both schedules share: a peak rate, T training updates, W warmup updates, a decay power."""

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, power=1.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}.")
        if power < 0:
            raise ValueError(f"lr_decay_power must be >= 0, got {power}.")
        self.learning_rate = float(learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.power = float(power)

    def __call__(self, step):
        return self.rate(step, float(self.num_train_steps), float(self.num_warmup_steps))

    def rate(self, step, num_train_steps, num_warmup_steps):
        """The rate at `step` for T and W given as numbers or tensors: one formula for the config's own
        T and W and for a JAX run that sets them after compiling (training_jax.step.SizedSchedule)."""
        raise NotImplementedError

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
        }


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class JointWarmupDecay(WarmupDecaySchedule):
    """The original schedule: `lr · (1 − min(step, T)/T)^power · min(1, step/warmup)`.

    Decay starts at step 0, so the peak actually reached is below `learning_rate`
    (lr · (1 − W/T) at the end of warmup). Step 0 gives 0, as in the original. warmup 0 = no warmup.
    """

    def rate(self, step, num_train_steps, num_warmup_steps):
        step = ops.cast(step, "float32")
        done = ops.minimum(step, num_train_steps) / num_train_steps
        lr = self.learning_rate * ops.power(1.0 - done, self.power)
        # warmup 0: no warmup (the where, not an if, so that W may be a traced value)
        return lr * ops.where(num_warmup_steps > 0, ops.minimum(1.0, step / ops.maximum(num_warmup_steps, 1.0)), 1.0)


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class WarmupThenDecay(WarmupDecaySchedule):
    """Large-batch (LAMB) recipe: `lr · step/W` up to W, then `lr · (1 − (step−W)/(T−W))^power`.

    The peak `learning_rate` is reached exactly at step W; 0 from step T on.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, power=1.0):
        super().__init__(learning_rate, num_train_steps, num_warmup_steps, power)
        if num_warmup_steps >= num_train_steps:
            raise ValueError(
                f"num_warmup_steps ({num_warmup_steps}) must be below num_train_steps "
                f"({num_train_steps}) for the warmup_then_decay schedule."
            )

    def rate(self, step, num_train_steps, num_warmup_steps):
        step = ops.cast(step, "float32")
        done = ops.clip((step - num_warmup_steps) / (num_train_steps - num_warmup_steps), 0.0, 1.0)
        decayed = self.learning_rate * ops.power(1.0 - done, self.power)
        warming = self.learning_rate * step / ops.maximum(num_warmup_steps, 1.0)
        return ops.where(step < num_warmup_steps, warming, decayed)


SCHEDULES = {"joint": JointWarmupDecay, "warmup_then_decay": WarmupThenDecay}
