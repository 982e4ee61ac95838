"""LayerNorm as BERT's (epsilon 1e-12), always computed in float32 even under a mixed dtype policy."""
import keras


def layer_norm(name, epsilon=1e-12):
    """Variables read `<scope>/LayerNorm/{gamma,beta}` like the TF1 checkpoints."""
    return keras.layers.LayerNormalization(epsilon=epsilon, dtype="float32", name=name)
