"""Identical layers run as one keras.ops.scan over their weights stacked per variable.

A compiled program then holds the layer's body once instead of once per layer: its compile time does not grow
with depth, and it launches one loop instead of a copy of every kernel per layer. Each layer keeps its own
variables (and so its checkpoint names); only the call changes. Layer 0 is the template: the scan body calls it
inside a keras.StatelessScope that maps every variable it reads (trainable and not: the Dropout layers' seed
states) to the current layer's slice. The seed states the body advances come out of the scan and are assigned
back to each layer's own seed variables, as the unrolled layers would have advanced them.
"""
import keras
from keras import ops


class _WithoutAutocast(keras.layers.Layer):
    """Calls `function` with the caller's autocast scope cleared (a layer with autocast=False clears it): variables
    read there give their values as the enclosing StatelessScope maps them (or as stored), so that float32
    LayerNorm weights read inside a bfloat16 encoder are not rounded to bfloat16 (each layer then casts what it
    reads itself, as unrolled). `anchor`: any tensor (a layer's call takes one)."""

    def __init__(self):
        super().__init__(autocast=False, name="without_autocast")

    def call(self, anchor, function):
        return function()


def check_identical(layers):
    """ValueError unless every layer has the template's variables, shape for shape and dtype for dtype."""
    def signature(layer):
        return [(tuple(v.shape), v.dtype, v.trainable) for v in layer.variables]

    template = signature(layers[0])
    for index, layer in enumerate(layers[1:], start=1):
        if signature(layer) != template:
            raise ValueError(f"layer {index} ({layer.name}) has other variables than layer 0: cannot scan them")


def scan_layers(layers, hidden, *args, training=False, **kwargs):
    """The output of every layer ([num_layers, ...] stacked) of hidden → layers[0](hidden, *args) → ... →
    layers[-1](...), computed by one scan of layers[0]'s call over the layers' stacked variables. With
    `training`, each layer's non-trainable variables (dropout seed states) end advanced as the unrolled call
    would leave them."""
    check_identical(layers)
    template = layers[0]
    per_layer = [layer.variables for layer in layers]
    stacked = _WithoutAutocast()(hidden, function=lambda: [ops.stack([w[index].value for w in per_layer])
                                                           for index in range(len(per_layer[0]))])
    states = [index for index, variable in enumerate(template.variables) if not variable.trainable]

    def body(carry, values):
        hidden, _ = carry  # the states of the layer before: each layer advances its own (its slice of `values`)
        with keras.StatelessScope(state_mapping=list(zip(template.variables, values))) as scope:
            hidden = template(hidden, *args, training=training, **kwargs)
        carry = hidden, [scope.get_current_value(template.variables[index]) for index in states]
        return carry, carry  # TensorFlow's ops.scan stacks outputs shaped as the carry

    _, (outputs, advanced) = ops.scan(body, (hidden, [stacked[index][0] for index in states]), stacked)
    if training:
        for position, index in enumerate(states):
            for layer_index, variables in enumerate(per_layer):
                variables[index].assign(advanced[position][layer_index])
    return outputs
