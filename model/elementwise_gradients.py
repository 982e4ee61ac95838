"""LayerNorm and exact GELU with hand-written backward passes, for training under TensorFlow.

Why: TensorFlow (without XLA) runs each elementwise op of a graph as its own kernel, one pass over memory each,
and the gradients autodiff builds for LayerNorm (through mean, variance, rsqrt and the affine) and for the erf
GELU take more passes than their closed forms need. On the Zen 3 (2 threads, float32, forward and backward of
16,384 rows, `python -m bench.elementwise_grad_cpu`) the hand-written ones are 1.29x as fast for a 256-wide
LayerNorm and 1.22x for the FFN's 1,024-wide GELU, the electra_small pretraining step 1.03-1.05x and a fine-tuning
update 1.09x (docs/benchmarks.md, "LayerNorm and GELU with hand-written gradients").

The functions are the same: outputs and gradients equal autodiff's within float32 rounding
(tests/test_elementwise_gradients.py). LayerNorm's variance is that of the centred input, as the original's
`tf.contrib.layers.layer_norm` computes it.

Only under TensorFlow and only in training (a layer's `training` is true): evaluation, predictions and exports
keep Keras' own ops, and under JAX XLA fuses the elementwise ops of either form, so there the model is
unchanged. `ELECTRA_ELEMENTWISE_GRADIENTS=autodiff` turns it off (the benchmarks' side-by-side variant).

Model code: keras.ops only.
"""
import math

import keras
from keras import ops

from common.errors import environment_choice

ENV = "ELECTRA_ELEMENTWISE_GRADIENTS"
CHOICES = ("by-hand", "autodiff")
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def by_hand(training):
    """Whether a layer called with `training` takes this module's functions: TensorFlow, training, and ENV not
    `autodiff`. InputError (the scripts' one line and exit code 2) for a value of ENV not in CHOICES: the scripts
    ask before they write anything."""
    choice = environment_choice(ENV, CHOICES, "autodiff: LayerNorm's and GELU's gradients as autodiff builds them")
    return bool(training) and choice == CHOICES[0] and keras.backend.backend() == "tensorflow"


def layer_norm(x, gamma, beta, epsilon):
    """LayerNorm over the last axis: (x - mean) / sqrt(var + epsilon) * gamma + beta, with the closed-form
    gradient (dx = r * (g - mean(g) - x̂ * mean(g * x̂)) for g = dy * gamma)."""
    # Tensors, not variables (ops.convert_to_tensor leaves a variable one): an eager custom gradient that reads a
    # variable must return that variable's gradient separately; as inputs, they get theirs as the others do.
    return _layer_norm(epsilon)(x, ops.copy(gamma), ops.copy(beta))


def _layer_norm(epsilon):
    @ops.custom_gradient
    def forward(x, gamma, beta):
        mean = ops.mean(x, axis=-1, keepdims=True)
        centred = ops.subtract(x, mean)
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
        inverse = ops.rsqrt(ops.add(variance, epsilon))
        normed = ops.multiply(centred, inverse)

        def backward(upstream):
            leading = tuple(range(len(upstream.shape) - 1))
            scaled = ops.multiply(upstream, gamma)
            mean_scaled = ops.mean(scaled, axis=-1, keepdims=True)
            mean_projection = ops.mean(ops.multiply(scaled, normed), axis=-1, keepdims=True)
            dx = ops.multiply(inverse, ops.subtract(ops.subtract(scaled, mean_scaled),
                                                    ops.multiply(normed, mean_projection)))
            return dx, ops.sum(ops.multiply(upstream, normed), axis=leading), ops.sum(upstream, axis=leading)

        return ops.add(ops.multiply(normed, gamma), beta), backward

    return forward


@ops.custom_gradient
def gelu(x):
    """The exact (erf) GELU, x * Φ(x), with the gradient Φ(x) + x * φ(x) from the Φ(x) the forward computed."""
    cdf = ops.multiply(0.5, ops.add(1.0, ops.erf(ops.multiply(x, _INV_SQRT2))))

    def backward(upstream):
        density = ops.multiply(_INV_SQRT_2PI, ops.exp(ops.multiply(-0.5, ops.square(x))))
        return ops.multiply(upstream, ops.add(cdf, ops.multiply(x, density)))

    return ops.multiply(x, cdf), backward
