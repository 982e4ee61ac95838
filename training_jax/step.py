"""One pretraining update as a pure function of its state, for jax.jit.

The step is what run_pretraining.py's loop computes: model.loss_denominators + model.train_loss_and_stats
inside a keras.StatelessScope (so the masking/sampling seed state and dropout seeds advance functionally),
the gradient by jax.value_and_grad, and the optimizer's update by optimizer.stateless_apply.
"""
import jax
import keras


def make_step_fn(model, optimizer):
    """The un-jitted update: (state, batch) → (state, loss, stats), state = (trainable, non-trainable,
    optimizer variables) as lists of arrays. training_jax.pretrain wraps it in its own jit."""
    trainable_vars = model.trainable_variables
    non_trainable_vars = model.non_trainable_variables

    def loss_fn(trainable, non_trainable, batch):
        mapping = list(zip(trainable_vars, trainable)) + list(zip(non_trainable_vars, non_trainable))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            denominators = model.loss_denominators(batch)
            loss, stats = model.train_loss_and_stats(batch, denominators)
        new_non_trainable = [scope.get_current_value(v) for v in non_trainable_vars]
        return loss, (stats, new_non_trainable)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def train_step(state, batch):
        trainable, non_trainable, optimizer_vars = state
        (loss, (stats, non_trainable)), grads = grad_fn(trainable, non_trainable, batch)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return (trainable, non_trainable, optimizer_vars), loss, stats

    return train_step


def use_layer_scan(model, on=True):
    """Every encoder of the pretrainer runs its transformer layers as one scan over their stacked weights
    (BertEncoder's scan_layers, model/layer_scan.py) or unrolled: the same step within float32 rounding
    (tests/test_scan_layers.py), a program that holds each encoder's layer once. Set before the step is traced."""
    for encoder in model.encoders():
        encoder.scan_layers = on


def use_compute_dtype_softmax(model, on=True):
    """Every self-attention of the pretrainer's encoders keeps its scores, softmax and dropout in the compute dtype
    (bfloat16 under mixed_bfloat16: no float32 [batch, heads, seq, seq]; model/attention.py) or in float32 as the
    original: the same within bfloat16 rounding (tests/test_attention_dtype.py). Set before the step is traced."""
    for encoder in model.encoders():
        for layer in encoder.transformer_layers:
            layer.attention_self.compute_dtype_softmax = on


def use_fused_attention(model, on=True, mesh=None):
    """Every self-attention of the pretrainer's encoders trains with attention dropout through the Pallas flash
    attention (training_jax/flash_attention.py: no [batch, heads, seq, seq] kept for the backward pass) or through
    the explicit path (off); causal layers keep the explicit path either way. The same function with its own dropout
    bits (tests/test_flash_attention.py). Set before the step is traced. Any other Keras model:
    training_jax.flash_attention.use_fused_attention_in. `mesh`: the data-parallel mesh of a step over several
    devices, whose batch axis the kernels are split along (flash_attention's)."""
    from training_jax.flash_attention import fused_attention_fn

    for encoder in model.encoders():
        for layer in encoder.transformer_layers:
            layer.attention_self.fused_attention_fn = fused_attention_fn(mesh) if on else None


class SizedSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The config's schedule with its T (training steps) and W (warmup steps) given to the jitted step as
    arrays instead of compiled in: a run that sets its length from its own measured speed after compiling
    (training_jax.fit) keeps the program it compiled. The formula is the config's schedule's own
    (`rate`); `steps` holds the traced [T, W] while the step is traced."""

    def __init__(self, schedule):
        self.schedule, self.steps = schedule, None

    def __call__(self, step):
        if self.steps is None:
            return self.schedule(step)
        return self.schedule.rate(step, self.steps[0], self.steps[1])

    def get_config(self):
        return self.schedule.get_config()


def with_sized_schedule(optimizer):
    """Puts a SizedSchedule in place of the optimizer's schedule; returns it (None for a constant rate)."""
    schedule = optimizer._learning_rate
    if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        return None
    sized = SizedSchedule(schedule)
    optimizer._learning_rate = sized
    return sized
