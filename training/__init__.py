"""The TensorFlow side of pretraining: strategy, the distributed step, checkpoints, logging, collapse checks.

model/ and pretrain/ stay backend-neutral; everything tf.distribute- or file-specific lives here.
"""
