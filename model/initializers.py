"""The original's initializers: truncated normal(0.02) where it set one, TF1's Glorot-uniform where not.

Call these once per variable. An unseeded Keras 3 initializer draws its seed when it is created (from
Python's `random`, which keras.utils.set_random_seed seeds) and uses it at every call, so one instance
shared by two variables gives them the same values; TF1 drew each variable afresh.
"""
import keras


def truncated_normal(stddev=0.02):
    """BERT's create_initializer: a normal truncated at two standard deviations."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def glorot_uniform():
    """What tf.layers.dense used when the original passed no kernel_initializer."""
    return keras.initializers.GlorotUniform()
