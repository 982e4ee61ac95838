"""What every layer of the project shares: the bad-input error and atomic writes (no TensorFlow, no Keras)."""
