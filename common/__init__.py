"""What every layer of the project shares: the bad-input error, atomic writes and the quiet start (no TensorFlow,
no Keras)."""
