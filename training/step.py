"""The distributed pretraining step: global denominators, summed gradients, one clip, one update.

Per optimizer update, each replica reads K micro-batches (gradient accumulation, K ≥ 1) and:

1. computes the loss denominators of its K micro-batches and all-reduces them (SUM): the global batch's;
2. for each micro-batch, computes its SHARE of the global loss (numerators / global denominators) and
   the gradients of that share (the forward/backward pass is the only XLA-compiled part), adding them up;
3. hands the sum to the optimizer, which all-reduces (SUM) across replicas and clips by the global norm
   of that sum, once (AdamWeightDecay / ElectraLamb clip after the all-reduce), then updates.

So N replicas × K micro-batches of b equal 1 replica × 1 batch of N·K·b in loss, gradients and update,
and `optimizer.iterations` counts updates, which is what the schedule reads.

Under mixed_float16 the loss is scaled by a dynamic loss scale (ours, not keras' LossScaleOptimizer,
whose per-replica finiteness check and conditional update do not compose with the cross-replica sum):
gradients are unscaled before the all-reduce; when any replica's gradient is not finite, no replica
updates, the scale halves, and the step does not count (the run loop counts optimizer updates); after
loss_scale_growth_interval (2000) good updates in a row the scale doubles.
"""
import tensorflow as tf

from pretrain.metrics import add_stats
from training.seeds import StepSeedGenerator, step_base_seed

TOKENS = "train/tokens"  # extra stats: non-padding tokens and sequences seen
EXAMPLES = "train/examples"
SKIPPED = "train/skipped_updates"
INITIAL_LOSS_SCALE = 2.0 ** 15
LOSS_SCALE_GROWTH_INTERVAL = 2000
EVAL_STREAM_OFFSET = 7_777_777


def default_loss_fn(pretrainer):
    def loss_fn(batch, denominators, seed_generator):
        return pretrainer.train_loss_and_stats(batch, denominators=denominators,
                                               seed_generator=seed_generator)
    return loss_fn


def _sum_dicts(dicts):
    total = dicts[0]
    for other in dicts[1:]:
        total = {key: total[key] + other[key] for key in total}
    return total


def _dense(gradient):
    return None if gradient is None else tf.convert_to_tensor(gradient)


class PretrainingSteps:
    """Builds the tf.functions a run calls: `train(iterator, num_steps)` and `evaluate(batch, index)`.

    loss_fn(batch, denominators, seed_generator) → (loss share, stats); default: the pretrainer's
    train_loss_and_stats (tests replace it to take the randomness out).
    """

    def __init__(self, strategy, pretrainer, optimizer, *, seed=0, accumulation_steps=1, jit_compile=False,
                 dynamic_loss_scale=False, loss_fn=None, initial_loss_scale=INITIAL_LOSS_SCALE,
                 loss_scale_growth_interval=LOSS_SCALE_GROWTH_INTERVAL):
        self.strategy = strategy
        self.pretrainer = pretrainer
        self.optimizer = optimizer
        self.seed = int(seed)
        self.accumulation_steps = int(accumulation_steps)
        self.loss_fn = loss_fn or default_loss_fn(pretrainer)
        self.variables = list(pretrainer.trainable_variables)
        self.dynamic_loss_scale = dynamic_loss_scale
        self.loss_scale_growth_interval = int(loss_scale_growth_interval)
        if dynamic_loss_scale:
            with strategy.scope():
                agg = tf.VariableAggregation.ONLY_FIRST_REPLICA
                self.loss_scale = tf.Variable(float(initial_loss_scale), trainable=False, dtype=tf.float32,
                                              aggregation=agg, name="loss_scale")
                self.good_steps = tf.Variable(0, trainable=False, dtype=tf.int64, aggregation=agg,
                                              name="loss_scale_good_steps")
        # No autograph: the loop over steps is written as a while_loop and the rest branches only on Python
        # values (tf.cond where a tensor decides), so converting the model's code would only cost tracing time.
        self._forward_backward = tf.function(self._forward_backward_fn, jit_compile=jit_compile,
                                             reduce_retracing=True, autograph=False)
        self._train = tf.function(self._train_fn, autograph=False)
        self._zeros = None
        self.evaluate = tf.function(self._evaluate_fn, autograph=False)

    def trackables(self):
        """Extra state to checkpoint (the loss scale), as {name: trackable}."""
        if self.dynamic_loss_scale:
            return {"loss_scale": self.loss_scale, "loss_scale_good_steps": self.good_steps}
        return {}

    # ------------------------------------------------------------------ per replica
    def _forward_backward_fn(self, batch, denominators, base_seed, scale):
        with tf.GradientTape() as tape:
            loss, stats = self.loss_fn(batch, denominators, StepSeedGenerator(base_seed))
            scaled = tf.cast(loss, tf.float32) * scale
        gradients = [_dense(g) for g in tape.gradient(scaled, self.variables)]
        return gradients, stats

    def _replica_train(self, batches):
        context = tf.distribute.get_replica_context()
        replica_id = context.replica_id_in_sync_group
        local = _sum_dicts([self.pretrainer.loss_denominators(b) for b in batches])
        denominators = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
        step = self.optimizer.iterations
        scale = self.loss_scale.read_value() if self.dynamic_loss_scale else tf.constant(1.0)
        total_gradients, total_stats = None, None
        for index, batch in enumerate(batches):
            base = step_base_seed(self.seed, replica_id, step, index, self.accumulation_steps)
            gradients, stats = self._forward_backward(batch, denominators, base, scale)
            stats = dict(stats)
            mask = tf.cast(batch["input_mask"], tf.float32)
            stats[TOKENS] = tf.reduce_sum(mask)
            stats[EXAMPLES] = tf.cast(tf.shape(mask)[0], tf.float32)
            if total_gradients is None:
                total_gradients, total_stats = gradients, stats
            else:
                total_gradients = [a if b is None else a + b for a, b in zip(total_gradients, gradients)]
                total_stats = add_stats(total_stats, stats)
        if not self.dynamic_loss_scale:
            total_stats[SKIPPED] = tf.constant(0.0)
            total_stats = context.all_reduce(tf.distribute.ReduceOp.SUM, total_stats)
            self.optimizer.apply(total_gradients, self.variables)
            return total_stats
        total_gradients = [None if g is None else g / scale for g in total_gradients]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in total_gradients if g is not None])
        total_stats[SKIPPED] = 1.0 - tf.cast(finite, tf.float32)
        total_stats = context.all_reduce(tf.distribute.ReduceOp.SUM, total_stats)
        all_finite = total_stats[SKIPPED] < 0.5

        def apply():
            self.optimizer.apply(total_gradients, self.variables)
            grow = self.good_steps + 1 >= self.loss_scale_growth_interval
            self.loss_scale.assign(tf.where(grow, scale * 2.0, scale))
            self.good_steps.assign(tf.where(grow, tf.constant(0, tf.int64), self.good_steps + 1))
            return tf.constant(True)

        def skip():
            self.loss_scale.assign(tf.maximum(scale / 2.0, 1.0))
            self.good_steps.assign(0)
            return tf.constant(False)

        tf.cond(all_finite, apply, skip)
        return total_stats

    def _replica_evaluate(self, batch, index):
        context = tf.distribute.get_replica_context()
        base = step_base_seed(self.seed + EVAL_STREAM_OFFSET, context.replica_id_in_sync_group, index)
        outputs = self.pretrainer.compute_losses(batch, training=False,
                                                 seed_generator=StepSeedGenerator(base))
        stats = dict(outputs.stats)
        stats[TOKENS] = tf.reduce_sum(tf.cast(batch["input_mask"], tf.float32))
        stats[EXAMPLES] = tf.cast(tf.shape(batch["input_mask"])[0], tf.float32)
        return context.all_reduce(tf.distribute.ReduceOp.SUM, stats)

    # ------------------------------------------------------------------ host calls
    def _first_local(self, per_replica):
        return tf.nest.map_structure(lambda v: self.strategy.experimental_local_results(v)[0], per_replica)

    def _one_step(self, iterator):
        batches = tuple(next(iterator) for _ in range(self.accumulation_steps))
        return self._first_local(self.strategy.run(self._replica_train, args=(batches,)))

    def _zero_stats(self, max_seq_length):
        """Zeros shaped like a step's stats (one eager forward pass on a dummy row), so the step loop's
        body is the only place the step is traced."""
        ids = tf.ones([1, max_seq_length], tf.int32) * 5
        dummy = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
        stats = dict(self.pretrainer.compute_losses(dummy, training=False,
                                                    seed_generator=StepSeedGenerator([0, 0])).stats)
        stats.update({TOKENS: 0.0, EXAMPLES: 0.0, SKIPPED: 0.0})
        return {k: tf.zeros_like(tf.cast(v, tf.float32)) for k, v in stats.items()}

    def train(self, iterator, num_steps, max_seq_length=8):
        """Runs num_steps (≥ 1) updates; returns their stats, summed over replicas and steps."""
        if self._zeros is None:
            self._zeros = self._zero_stats(max_seq_length)
        return self._train(iterator, tf.constant(num_steps, tf.int64), self._zeros)

    def _train_fn(self, iterator, num_steps, zeros):
        def body(step, stats):
            return step + 1, add_stats(stats, self._one_step(iterator))

        _, stats = tf.while_loop(lambda step, _: step < num_steps, body, (tf.constant(0, tf.int64), dict(zeros)))
        return stats

    def _evaluate_fn(self, batch, index):
        return self._first_local(self.strategy.run(self._replica_evaluate, args=(batch, index)))
