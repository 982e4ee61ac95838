"""ElectraPretrainer: masking → generator → Gumbel samples → discriminator → losses and metric stats.

It receives its networks (Model Garden style) so tests can pass 2-layer towers and the MLM-only
baseline reuses the same pieces. Every random draw comes from one keras.random.SeedGenerator, so a step
is deterministic given that generator's state (plus the dropout layers' seed generators).
"""
import keras
from keras import ops

from model.heads import DiscriminatorHead, GeneratorHead
from pretrain import losses, masking, metrics, sampling
from pretrain.outputs import FakedData, HeadOutput, PretrainingOutputs


class ElectraPretrainer(keras.Model):
    """ELECTRA replaced-token detection, or (electra_objective=False) MLM only.

    Args:
      generator: a BertEncoder for the MLM generator (MLM-only: the main model, named "electra"); None
        with uniform_generator. Pass the discriminator itself for the original's untied_generator=False.
      discriminator: a BertEncoder named "electra"; None for the MLM-only objective.
      mask_prob, max_predictions_per_seq: the masking rule (N slots per sequence).
      mask_token_id, cls_token_id, sep_token_id: from the vocabulary; [CLS]/[SEP]/[MASK] are never masked.
      gen_weight, disc_weight: total = gen_weight · MLM + disc_weight · RTD.
      temperature, disallow_correct, uniform_generator, dedup_masking: the original's options (dedup is ours).
      vocab_size: needed only with uniform_generator and no generator.
      seed: seeds the masking/sampling SeedGenerator.
      dtype: the Keras dtype policy of the heads (build the encoders with the same one); losses and
        logits stay float32 under any.

    Networks and heads are built in the constructor, so every variable exists (with its TF1 path) before
    the first step.
    """

    def __init__(self, generator, discriminator, *, mask_prob=0.15, max_predictions_per_seq=19,
                 mask_token_id=103, cls_token_id=101, sep_token_id=102, gen_weight=1.0, disc_weight=50.0,
                 temperature=1.0, disallow_correct=False, uniform_generator=False, electra_objective=True,
                 dedup_masking=False, vocab_size=None, seed=None, name="electra_pretrainer", **kwargs):
        super().__init__(name=name, **kwargs)
        if electra_objective and discriminator is None:
            raise ValueError("the ELECTRA objective needs a discriminator")
        if generator is None and not uniform_generator:
            raise ValueError("a generator is required unless uniform_generator=True")
        if not electra_objective and uniform_generator:
            raise ValueError("the MLM-only objective needs a real generator")
        self.generator = generator
        self.discriminator = discriminator if electra_objective else None
        self.mask_prob = mask_prob
        self.max_predictions_per_seq = max_predictions_per_seq
        self.mask_token_id = mask_token_id
        self.special_token_ids = (cls_token_id, sep_token_id, mask_token_id)
        self.gen_weight = gen_weight
        self.disc_weight = disc_weight
        self.temperature = temperature
        self.disallow_correct = disallow_correct
        self.uniform_generator = uniform_generator
        self.electra_objective = electra_objective
        self.dedup_masking = dedup_masking
        reference = generator if generator is not None else discriminator
        self.vocab_size = vocab_size or reference.vocab_size
        self.seed_generator = keras.random.SeedGenerator(seed, name="masking_seed_generator")
        self.generator_head = None
        if not uniform_generator:
            self.generator_head = GeneratorHead(
                self.vocab_size, generator.embedding_size, generator.initializer_range,
                generator.layer_norm_epsilon, dtype=self.dtype_policy, name="generator_predictions")
        self.discriminator_head = None
        if self.discriminator is not None:
            self.discriminator_head = DiscriminatorHead(
                self.discriminator.hidden_size, self.discriminator.initializer_range,
                dtype=self.dtype_policy, name="discriminator_predictions")
        self.metric_trackers = metrics.PretrainingMetrics(electra_objective)
        self._build_networks()

    def _build_networks(self):
        """Builds outside any model scope, shared embeddings first under the discriminator's name."""
        networks = [n for n in (self.discriminator, self.generator) if n is not None]
        for network in networks:
            if not network.embeddings.built:
                with keras.name_scope(network.name):
                    network.embeddings.build()
        for network in networks:
            if not network.built:
                network.build()
        if self.generator_head is not None:
            self.generator_head.build((None, None, self.generator.hidden_size))
        if self.discriminator_head is not None:
            self.discriminator_head.build((None, None, self.discriminator.hidden_size))
        self.built = True

    # ------------------------------------------------------------------ pieces
    def mask(self, inputs, seed_generator=None):
        """The original's dynamic masking of a batch; see pretrain.masking.mask_inputs."""
        return masking.mask_inputs(
            inputs["input_ids"], inputs["input_mask"], mask_prob=self.mask_prob,
            max_predictions=self.max_predictions_per_seq, mask_token_id=self.mask_token_id,
            special_token_ids=self.special_token_ids, seed=seed_generator or self.seed_generator,
            dedup=self.dedup_masking)

    def loss_denominators(self, inputs):
        """{"mlm", "rtd"}: this batch's loss denominators, a pure function of the batch (no randomness).

        All-reduce (SUM) them across replicas before the step and pass the result to compute_losses.
        """
        weights = masking.slot_weights(
            ops.cast(inputs["input_ids"], "int32"), inputs["input_mask"], mask_prob=self.mask_prob,
            max_predictions=self.max_predictions_per_seq, special_token_ids=self.special_token_ids,
            dedup=self.dedup_masking)
        return {"mlm": ops.sum(weights), "rtd": ops.sum(ops.cast(inputs["input_mask"], "float32"))}

    def generator_logits(self, masked_inputs, segment_inputs, training):
        """float32 [batch, N, V] logits at the masked slots."""
        positions = masked_inputs["masked_lm_positions"]
        if self.uniform_generator:
            return sampling.uniform_generator_logits(ops.shape(positions)[0], ops.shape(positions)[1],
                                                     self.vocab_size)
        sequence = self.generator(
            {"input_ids": masked_inputs["input_ids"], "input_mask": segment_inputs["input_mask"],
             "segment_ids": segment_inputs["segment_ids"]}, training=training)
        return self.generator_head(sequence, positions, self.generator.embedding_table)

    # ------------------------------------------------------------------ the step
    def compute_losses(self, inputs, training=False, masked_inputs=None, sampled_ids=None,
                       denominators=None, seed_generator=None):
        """One pretraining forward pass.

        inputs: {"input_ids", "input_mask", "segment_ids"} int32 [batch, seq] (extra keys ignored).
        masked_inputs: a pretrain.masking.mask_inputs result to use instead of drawing one (tests).
        sampled_ids: int32 [batch, N] generator samples to use instead of drawing them (tests).
        denominators: {"mlm", "rtd"} global denominators (see loss_denominators); default: this batch's.
        seed_generator: a keras.random.SeedGenerator for masking and sampling instead of the model's
          (e.g. one per replica, so replicas do not draw the same random numbers).

        Returns PretrainingOutputs (pretrain/outputs.py): total_loss (differentiable), stats (metric
        sufficient statistics, sums to all-reduce), masked_inputs, the generator's and the
        discriminator's logits and losses, and the faked input the discriminator saw.
        """
        input_ids = ops.cast(inputs["input_ids"], "int32")
        input_mask = ops.cast(inputs["input_mask"], "int32")
        segment_ids = ops.cast(inputs["segment_ids"], "int32")
        segment_inputs = {"input_mask": input_mask, "segment_ids": segment_ids}
        if masked_inputs is None:
            masked_inputs = self.mask({"input_ids": input_ids, "input_mask": input_mask}, seed_generator)
        weights = masked_inputs["masked_lm_weights"]
        target_ids = masked_inputs["masked_lm_ids"]

        mlm_logits = self.generator_logits(masked_inputs, segment_inputs, training)
        mlm_terms = losses.masked_lm_loss_terms(mlm_logits, target_ids, weights)
        mlm = HeadOutput(mlm_logits, losses.ratio(mlm_terms.numerator, mlm_terms.denominator), mlm_terms)
        mlm_denominator = mlm_terms.denominator if denominators is None else denominators["mlm"]

        if not self.electra_objective:
            return PretrainingOutputs(
                total_loss=losses.combine_losses(mlm_terms.numerator, mlm_denominator, self.gen_weight),
                stats=metrics.mlm_stats(mlm_terms.per_token, mlm_logits, target_ids, weights),
                masked_inputs=masked_inputs, mlm=mlm)

        if sampled_ids is None:
            disallow = target_ids if self.disallow_correct else None
            sampled_ids = sampling.sample_tokens(mlm_logits, seed_generator or self.seed_generator,
                                                 self.temperature, disallow)
        fake_ids, labels = sampling.corrupt_inputs(input_ids, sampled_ids,
                                                   masked_inputs["masked_lm_positions"])
        sequence = self.discriminator({"input_ids": fake_ids, **segment_inputs}, training=training)
        disc_logits = self.discriminator_head(sequence)
        rtd = losses.replaced_token_loss_terms(disc_logits, labels, input_mask)
        rtd_denominator = rtd.denominator if denominators is None else denominators["rtd"]

        stats = metrics.mlm_stats(mlm_terms.per_token, mlm_logits, target_ids, weights, sampled_ids)
        stats.update(metrics.discriminator_stats(disc_logits, labels, input_mask, rtd.per_token))
        return PretrainingOutputs(
            total_loss=losses.combine_losses(mlm_terms.numerator, mlm_denominator, self.gen_weight,
                                             self.disc_weight, rtd.numerator, rtd_denominator),
            stats=stats, masked_inputs=masked_inputs, mlm=mlm,
            fake=FakedData(fake_ids, labels, sampled_ids),
            disc=HeadOutput(disc_logits, losses.ratio(rtd.numerator, rtd.denominator), rtd))

    def train_loss_and_stats(self, inputs, denominators=None, seed_generator=None):
        """For a custom (distributed) loop: (total_loss, stats) of one training step.

        Differentiable w.r.t. self.trainable_variables. With global `denominators` the per-replica
        losses (and gradients) sum to the global batch's; all-reduce the stats with SUM.
        """
        outputs = self.compute_losses(inputs, training=True, denominators=denominators,
                                      seed_generator=seed_generator)
        return outputs.total_loss, outputs.stats

    def finalize_metrics(self, stats):
        """Summed stats → {metric name: float}, with this model's loss weights."""
        return metrics.finalize_metrics(stats, self.gen_weight, self.disc_weight)

    def merged_discriminator_embeddings(self):
        """The discriminator's word table for export (under GDES: shared + its residual)."""
        return self.discriminator.merged_word_embeddings()

    # ------------------------------------------------------------------ Keras fit/evaluate
    def call(self, inputs, training=False):
        return self.compute_losses(inputs, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = y_pred.total_loss
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        self.metric_trackers.update(y_pred.stats)
        return self.get_metrics_result()

    @property
    def metrics(self):
        return super().metrics + self.metric_trackers.metrics

    def get_config(self):
        """The scalar arguments; the generator and discriminator are not serialised (builders pass them)."""
        config = super().get_config()
        config.update({"mask_prob": self.mask_prob,
                       "max_predictions_per_seq": self.max_predictions_per_seq,
                       "mask_token_id": self.mask_token_id, "cls_token_id": self.special_token_ids[0],
                       "sep_token_id": self.special_token_ids[1], "gen_weight": self.gen_weight,
                       "disc_weight": self.disc_weight, "temperature": self.temperature,
                       "disallow_correct": self.disallow_correct, "uniform_generator": self.uniform_generator,
                       "electra_objective": self.electra_objective, "dedup_masking": self.dedup_masking,
                       "vocab_size": self.vocab_size})
        return config
