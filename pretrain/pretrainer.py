"""ElectraPretrainer: masking → generator → Gumbel samples → discriminator → losses and metric stats.

It receives its networks (Model Garden style) so tests can pass 2-layer towers and the MLM-only
baseline reuses the same pieces. Every random draw comes from one keras.random.SeedGenerator, so a step
is deterministic given that generator's state (plus the dropout layers' seed generators).
"""
import keras
from keras import ops

from model.heads import DiscriminatorHead, GeneratorHead, gather_positions
from model.two_tower import TwoTowerEncoder
from pretrain import electric, losses, masking, metrics, sampling
from configs.objective import ObjectiveSettings
from pretrain.outputs import FakedData, HeadOutput, PretrainingOutputs

CLOZE_HEAD_NAME = "cloze_predictions"  # the original's scope of the two-tower generator's head


class ElectraPretrainer(keras.Model):
    """ELECTRA replaced-token detection, Electric, or MLM only, as `objective` says.

    Args:
      generator: a BertEncoder for the MLM generator (MLM-only: the main model, named "electra"); None
        with uniform_generator. Pass the discriminator itself for the original's untied_generator=False.
        A model.two_tower.TwoTowerEncoder makes it the original's two-tower cloze generator: it reads the
        unmasked input, its head (`cloze_predictions`) predicts every position, and its loss is the
        softmax cross-entropy over every candidate token (docs/reproduction.md#electric).
      discriminator: a BertEncoder named "electra"; None for the MLM-only objective.
      objective: a pretrain.objective.ObjectiveSettings (masking, sampling, loss weights, which
        objective; None: the original's defaults), e.g. PretrainingConfig.objective_settings(). With
        electric_objective the discriminator's logit is the energy head's output + stop_gradient(log
        q(token)) + log(mask_prob / (1 - mask_prob)), and every position a sample was written to is
        labelled fake, even when the sample is the original.
      dtype: the Keras dtype policy of the heads (build the encoders with the same one); losses and
        logits stay float32 under any.

    Networks and heads are built in the constructor, so every variable exists (with its TF1 path) before
    the first step.
    """

    def __init__(self, generator, discriminator, *, objective=None, name="electra_pretrainer", **kwargs):
        super().__init__(name=name, **kwargs)
        objective = ObjectiveSettings() if objective is None else objective
        if not isinstance(objective, ObjectiveSettings):
            raise TypeError(f"objective must be a pretrain.objective.ObjectiveSettings, not {type(objective)}")
        self.objective = objective
        if objective.electra_objective and discriminator is None:
            raise ValueError("the ELECTRA objective needs a discriminator")
        self.two_tower = isinstance(generator, TwoTowerEncoder)
        if objective.electric_objective and not self.two_tower:
            raise ValueError("the Electric objective needs a two-tower generator")
        if self.two_tower and not objective.electra_objective:
            raise ValueError("a two-tower generator needs a discriminator (the original has no MLM-only "
                             "two-tower objective)")
        if generator is None and not objective.uniform_generator:
            raise ValueError("a generator is required unless uniform_generator=True")
        self.generator = generator
        self.discriminator = discriminator if objective.electra_objective else None
        self.special_token_ids = objective.special_token_ids
        reference = generator if generator is not None else discriminator
        self.vocab_size = objective.vocab_size or reference.vocab_size
        self.seed_generator = keras.random.SeedGenerator(objective.seed, name="masking_seed_generator")
        self.generator_head = None
        if not objective.uniform_generator:
            self.generator_head = GeneratorHead(
                self.vocab_size, generator.embedding_size, generator.initializer_range,
                generator.layer_norm_epsilon, dtype=self.dtype_policy,
                name=CLOZE_HEAD_NAME if self.two_tower else "generator_predictions")
        self.discriminator_head = None
        if self.discriminator is not None:
            self.discriminator_head = DiscriminatorHead(
                self.discriminator.hidden_size, self.discriminator.initializer_range,
                dtype=self.dtype_policy, name="discriminator_predictions")
        self.metric_trackers = metrics.PretrainingMetrics(objective.electra_objective, cloze=self.two_tower)
        self._build_networks()

    def encoders(self):
        """Every BertEncoder once: the discriminator, then the generator (or its ltr and rtl towers)."""
        found = []
        for network in (self.discriminator, self.generator):
            for encoder in getattr(network, "towers", (network,)):
                if encoder is not None and not any(encoder is seen for seen in found):
                    found.append(encoder)
        return found

    def _build_networks(self):
        """Builds outside any model scope, shared embeddings first under the discriminator's name."""
        networks = self.encoders()
        for network in networks:
            if not network.embeddings.built:
                with keras.name_scope(network.name):
                    network.embeddings.build()
        for network in networks:
            if not network.built:
                network.build()
        if self.two_tower and not self.generator.built:
            self.generator.build()
        if self.generator_head is not None:
            self.generator_head.build((None, None, self.generator.hidden_size))
        if self.discriminator_head is not None:
            self.discriminator_head.build((None, None, self.discriminator.hidden_size))
        self.built = True

    # ------------------------------------------------------------------ pieces
    def mask(self, inputs, seed_generator=None):
        """The original's dynamic masking of a batch; see pretrain.masking.mask_inputs."""
        objective = self.objective
        return masking.mask_inputs(
            inputs["input_ids"], inputs["input_mask"], mask_prob=objective.mask_prob,
            max_predictions=objective.max_predictions_per_seq, mask_token_id=objective.mask_token_id,
            special_token_ids=self.special_token_ids, seed=seed_generator or self.seed_generator,
            dedup=objective.dedup_masking)

    def loss_denominators(self, inputs):
        """{"mlm", "rtd"}: this batch's loss denominators, a pure function of the batch (no randomness).

        "mlm" is the generator loss's: the masked slots, or with a two-tower generator the candidate
        tokens (its cloze loss covers every one). All-reduce (SUM) them across replicas before the step
        and pass the result to compute_losses.
        """
        input_ids = ops.cast(inputs["input_ids"], "int32")
        if self.two_tower:
            weights = masking.candidate_mask(input_ids, inputs["input_mask"], self.special_token_ids)
        else:
            objective = self.objective
            weights = masking.slot_weights(
                input_ids, inputs["input_mask"], mask_prob=objective.mask_prob,
                max_predictions=objective.max_predictions_per_seq, special_token_ids=self.special_token_ids,
                dedup=objective.dedup_masking)
        return {"mlm": ops.sum(ops.cast(weights, "float32")),
                "rtd": ops.sum(ops.cast(inputs["input_mask"], "float32"))}

    def cloze_logits(self, inputs, training=False):
        """A two-tower generator's float32 [batch, seq, V] logits at every position of `inputs`
        ({"input_ids", "input_mask", "segment_ids"}); position t's never depend on token t."""
        sequence = self.generator(inputs, training=training)
        return self.generator_head(sequence, None, self.generator.embedding_table, training=training)

    def energies(self, inputs, training=False):
        """Electric: the energy head's float32 [batch, seq] output on `inputs` (the discriminator alone)."""
        sequence = self.discriminator(
            {key: inputs[key] for key in ("input_ids", "input_mask", "segment_ids")}, training=training)
        return self.discriminator_head(sequence, training=training)

    def generator_logits(self, masked_inputs, segment_inputs, training):
        """float32 [batch, N, V] logits at the masked slots (a two-tower generator reads the ids given)."""
        positions = masked_inputs["masked_lm_positions"]
        if self.objective.uniform_generator:
            return sampling.uniform_generator_logits(ops.shape(positions)[0], ops.shape(positions)[1],
                                                     self.vocab_size)
        if self.two_tower:
            logits = self.cloze_logits({"input_ids": masked_inputs["input_ids"], **segment_inputs}, training)
            return gather_positions(logits, positions)
        sequence = self.generator(
            {"input_ids": masked_inputs["input_ids"], "input_mask": segment_inputs["input_mask"],
             "segment_ids": segment_inputs["segment_ids"]}, training=training)
        return self.generator_head(sequence, positions, self.generator.embedding_table, training=training)

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
        discriminator's logits and losses, and the faked input the discriminator saw (a two-tower
        generator adds its cloze logits and loss; Electric the energies).
        """
        objective = self.objective
        input_ids = ops.cast(inputs["input_ids"], "int32")
        input_mask = ops.cast(inputs["input_mask"], "int32")
        segment_ids = ops.cast(inputs["segment_ids"], "int32")
        segment_inputs = {"input_mask": input_mask, "segment_ids": segment_ids}
        if masked_inputs is None:
            masked_inputs = self.mask({"input_ids": input_ids, "input_mask": input_mask}, seed_generator)
        weights = masked_inputs["masked_lm_weights"]
        target_ids = masked_inputs["masked_lm_ids"]

        cloze = None
        if self.two_tower:  # the cloze model reads the unmasked input; the masked slots are a view of it
            cloze_logits = self.cloze_logits({"input_ids": input_ids, **segment_inputs}, training)
            candidates = masking.candidate_mask(input_ids, input_mask, self.special_token_ids)
            cloze_terms = losses.masked_lm_loss_terms(cloze_logits, input_ids, ops.cast(candidates, "float32"))
            cloze = HeadOutput(cloze_logits, losses.ratio(cloze_terms.numerator, cloze_terms.denominator),
                               cloze_terms)
            mlm_logits = gather_positions(cloze_logits, masked_inputs["masked_lm_positions"])
        else:
            mlm_logits = self.generator_logits(masked_inputs, segment_inputs, training)
        mlm_terms = losses.masked_lm_loss_terms(mlm_logits, target_ids, weights)
        mlm = HeadOutput(mlm_logits, losses.ratio(mlm_terms.numerator, mlm_terms.denominator), mlm_terms)
        generator_terms = cloze.terms if cloze is not None else mlm_terms
        mlm_denominator = generator_terms.denominator if denominators is None else denominators["mlm"]

        if not objective.electra_objective:
            return PretrainingOutputs(
                total_loss=losses.combine_losses(generator_terms.numerator, mlm_denominator, objective.gen_weight),
                stats=metrics.mlm_stats(mlm_terms.per_token, mlm_logits, target_ids, weights),
                masked_inputs=masked_inputs, mlm=mlm)

        if sampled_ids is None:
            disallow = target_ids if objective.disallow_correct else None
            sampled_ids = sampling.sample_tokens(mlm_logits, seed_generator or self.seed_generator,
                                                 objective.temperature, disallow)
        fake_ids, labels = sampling.corrupt_inputs(input_ids, sampled_ids,
                                                   masked_inputs["masked_lm_positions"],
                                                   every_written_is_fake=objective.electric_objective)
        sequence = self.discriminator({"input_ids": fake_ids, **segment_inputs}, training=training)
        disc_logits = self.discriminator_head(sequence, training=training)
        energies = None
        if objective.electric_objective:
            energies = disc_logits
            disc_logits = electric.discriminator_logits(energies, cloze.logits, fake_ids, objective.mask_prob)
        rtd = losses.replaced_token_loss_terms(disc_logits, labels, input_mask)
        rtd_denominator = rtd.denominator if denominators is None else denominators["rtd"]

        stats = metrics.mlm_stats(mlm_terms.per_token, mlm_logits, target_ids, weights, sampled_ids)
        stats.update(metrics.discriminator_stats(disc_logits, labels, input_mask, rtd.per_token))
        if cloze is not None:
            stats.update(metrics.cloze_stats(cloze.terms))
        return PretrainingOutputs(
            total_loss=losses.combine_losses(generator_terms.numerator, mlm_denominator, objective.gen_weight,
                                             objective.disc_weight, rtd.numerator, rtd_denominator),
            stats=stats, masked_inputs=masked_inputs, mlm=mlm,
            fake=FakedData(fake_ids, labels, sampled_ids),
            disc=HeadOutput(disc_logits, losses.ratio(rtd.numerator, rtd.denominator), rtd),
            cloze=cloze, energies=energies)

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
        return metrics.finalize_metrics(stats, self.objective.gen_weight, self.objective.disc_weight)

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
        """The objective's settings whole (as a dict) beside Keras' own; the generator and discriminator
        are not serialised (builders pass them to from_config)."""
        config = super().get_config()
        config["objective"] = self.objective.to_dict()
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """get_config()'s output plus "generator" and "discriminator" (the networks, built by the caller)."""
        config = dict(config)
        objective = config.pop("objective", None)
        if isinstance(objective, dict):
            objective = ObjectiveSettings.from_dict(objective)
        generator, discriminator = config.pop("generator"), config.pop("discriminator")
        return cls(generator, discriminator, objective=objective, **config)
