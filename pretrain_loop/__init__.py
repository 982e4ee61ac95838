"""The pretraining loop that both backends share: its cadence, its files and its console lines.

The TensorFlow run (training.loop) and the JAX run (training_jax.pretrain) compute their updates
differently and do everything around them the same way: log windows, held-out evaluations, save points,
pauses and time limits, the resume bookkeeping, metrics.jsonl with its run record, TensorBoard scalars
and the curves PNG. That part lives here, once, as fine-tuning's finetune.loop.BaseTrainer serves both
of its trainers.

Why a package of its own: it must sit below training/ and training_jax/ (training_jax never imports
training/), and it is no model code, so not pretrain/ (Keras only). It imports no backend at all (no
TensorFlow, no JAX, no Keras; tests/test_import_layers.py checks it): the standard library, common/ and
data.progress. matplotlib is imported only to draw.
"""
