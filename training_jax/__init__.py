"""Pretraining and fine-tuning under KERAS_BACKEND=jax, for accelerator machines that hold JAX but no
TensorFlow.

TensorFlow (tf.data, tokenizers, checkpoint files) prepares the work elsewhere and writes it as NumPy
arrays; this package trains on them with the same model/, pretrain/ and finetune/ pieces that the
TensorFlow scripts use, keeps a resumable state, and writes weights, metrics and results that the
TensorFlow side imports. Nothing here imports TensorFlow (a test enforces it).
"""
