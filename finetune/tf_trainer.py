"""The TensorFlow trainer run_finetuning.py uses: one tf.function per task for the update (one more for
batches that mix the tasks) and one per task for prediction.

Eager NumPy batches of varying length are fed through an input signature that leaves batch and length
free, so length-bucketed batches do not retrace (use_xla compiles each new shape instead).

`compiled_update` (on by default): the optimizer's update (clipping, schedule, AdamW, the moments) runs
as one XLA-compiled function inside the step. Its inputs are the variables and their dense gradients,
whose shapes never change, so it compiles once per task whatever the batch shapes; XLA fuses each
variable's chain of elementwise ops (about ten passes over memory each) into one. The forward and
backward passes stay TensorFlow's (oneDNN matmuls; XLA's CPU matmuls are slower, docs/benchmarks.md).
Same numbers within float32 rounding (XLA sums the clipping norm in another order), tested.

No tf.function here uses autograph: the model, the losses and the optimizer branch only on Python values
(tf.cond where a tensor decides), so converting their code would only cost tracing time (docs/benchmarks.md,
"Tracing without autograph").

On a CPU, ELECTRA_MATMUL_GRADIENTS=eigen puts the wide weight gradients on TensorFlow's Eigen kernels
(common/matmul_gradients.py, off by default: 1.03x per update on a Zen 3, within the noise).
"""
import tensorflow as tf

from finetune.loop import BaseTrainer, model_inputs
from common.matmul_gradients import route_weight_gradients


def _signature(batch):
    return {key: tf.TensorSpec([None] * value.ndim, tf.as_dtype(value.dtype))
            for key, value in model_inputs(batch).items()}


class TFTrainer(BaseTrainer):
    """Compiled train and predict steps for a FinetuningModel and its tasks under TensorFlow."""

    def __init__(self, model, tasks, optimizer, config, compiled_update=True):
        super().__init__(model, tasks, optimizer, config)
        self.compiled_update = compiled_update and not config.use_xla  # use_xla compiles the whole step
        self._train_steps, self._predict_steps, self._updates = {}, {}, {}
        self.eigen_weight_gradients = not tf.config.list_logical_devices("GPU") and route_weight_gradients()

    def _update_fn(self, variables):
        """apply_gradients on `variables`: one XLA function (compiled_update), else inline in the step."""
        def update(gradients):
            self.optimizer.apply_gradients(zip(gradients, variables))

        return tf.function(update, jit_compile=True, autograph=False) if self.compiled_update else update

    def update_tracing_counts(self):
        """{task name: times its compiled update was traced} (each trace is one XLA compile)."""
        return {name: update.experimental_get_tracing_count() for name, update in self._updates.items()}

    def _train_fn(self, task, batch):
        if task.name not in self._train_steps:
            variables = self.trained_variables(task)
            update = self._updates[task.name] = self._update_fn(variables)

            def step(inputs):
                with tf.GradientTape() as tape:
                    loss = self.batch_loss(task, inputs)
                update(tape.gradient(loss, variables))
                return loss

            self._train_steps[task.name] = tf.function(step, input_signature=[_signature(batch)],
                                                       jit_compile=self.config.use_xla, autograph=False)
        return self._train_steps[task.name]

    def _predict_fn(self, task, batch):
        if task.name not in self._predict_steps:
            def step(inputs):
                return self.model(inputs, task_name=task.name, training=False)

            self._predict_steps[task.name] = tf.function(step, input_signature=[_signature(batch)],
                                                         jit_compile=self.config.use_xla, autograph=False)
        return self._predict_steps[task.name]

    def step(self, task, batch):
        return self._train_fn(task, batch)(model_inputs(batch))

    def predict_batch(self, task, batch):
        return self._predict_fn(task, batch)(model_inputs(batch))
