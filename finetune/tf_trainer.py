"""The TensorFlow trainer run_finetuning.py uses: one tf.function per task for the update (one more for
batches that mix the tasks) and one per task for prediction.

Eager NumPy batches of varying length are fed through an input signature that leaves batch and length
free, so length-bucketed batches do not retrace (use_xla compiles each new shape instead).
"""
import tensorflow as tf

from finetune.loop import BaseTrainer, model_inputs


def _signature(batch):
    return {key: tf.TensorSpec([None] * value.ndim, tf.as_dtype(value.dtype))
            for key, value in model_inputs(batch).items()}


class TFTrainer(BaseTrainer):
    """Compiled train and predict steps for a FinetuningModel and its tasks under TensorFlow."""

    def __init__(self, model, tasks, optimizer, config):
        super().__init__(model, tasks, optimizer, config)
        self._train_steps, self._predict_steps = {}, {}

    def _train_fn(self, task, batch):
        if task.name not in self._train_steps:
            variables = self.trained_variables(task)

            def step(inputs):
                with tf.GradientTape() as tape:
                    loss = self.batch_loss(task, inputs)
                gradients = tape.gradient(loss, variables)
                self.optimizer.apply_gradients(zip(gradients, variables))
                return loss

            self._train_steps[task.name] = tf.function(step, input_signature=[_signature(batch)],
                                                       jit_compile=self.config.use_xla)
        return self._train_steps[task.name]

    def _predict_fn(self, task, batch):
        if task.name not in self._predict_steps:
            def step(inputs):
                return self.model(inputs, task_name=task.name, training=False)

            self._predict_steps[task.name] = tf.function(step, input_signature=[_signature(batch)],
                                                         jit_compile=self.config.use_xla)
        return self._predict_steps[task.name]

    def step(self, task, batch):
        return self._train_fn(task, batch)(model_inputs(batch))

    def predict_batch(self, task, batch):
        return self._predict_fn(task, batch)(model_inputs(batch))
