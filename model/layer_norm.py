"""LayerNorm as BERT's (epsilon 1e-12), always computed in float32 even under a mixed dtype policy."""
import keras
from keras import ops

from model import elementwise_gradients
from model.matmul import SERIALIZATION_PACKAGE


@keras.saving.register_keras_serializable(package=SERIALIZATION_PACKAGE)
class LayerNorm(keras.layers.LayerNormalization):
    """keras.layers.LayerNormalization over the last axis; in training under TensorFlow it takes
    model.elementwise_gradients' backward pass (the same function, fewer passes over memory)."""

    def call(self, inputs, training=None):
        axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        last_axis_only = list(axes) in ([-1], [len(inputs.shape) - 1])
        if not last_axis_only or self.rms_scaling or not elementwise_gradients.by_hand(training):
            return super().call(inputs)
        # float32 whatever the input (a mixed policy's residual sums are 16-bit), as Keras' own call computes it
        inputs = ops.cast(inputs, self.compute_dtype)
        return elementwise_gradients.layer_norm(inputs, self.gamma, self.beta, self.epsilon)


def layer_norm(name, epsilon=1e-12):
    """Variables read `<scope>/LayerNorm/{gamma,beta}` like the TF1 checkpoints."""
    return LayerNorm(epsilon=epsilon, dtype="float32", name=name)
