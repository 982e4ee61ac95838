"""The check every TensorFlow-only entry point makes first: Keras must run on its tensorflow backend
(tf.distribute, tf.data and TensorFlow checkpoints); the JAX path is training_jax/."""
from common.errors import InputError


def require_tensorflow_backend(tool):
    import keras

    if keras.backend.backend() != "tensorflow":
        raise InputError(f"KERAS_BACKEND={keras.backend.backend()}: {tool} needs the tensorflow backend (it reads "
                         "and writes TensorFlow checkpoints); unset KERAS_BACKEND, or use training_jax for JAX")
