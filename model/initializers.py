"""The original's initializers: truncated normal(0.02) where it set one, TF1's Glorot-uniform where not."""
import keras


def truncated_normal(stddev=0.02):
    """BERT's create_initializer: a normal truncated at two standard deviations."""
    return keras.initializers.TruncatedNormal(stddev=stddev)


def glorot_uniform():
    """What tf.layers.dense used when the original passed no kernel_initializer."""
    return keras.initializers.GlorotUniform()
