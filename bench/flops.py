"""Analytic FLOPs of one ELECTRA pretraining step (generator + discriminator, forward + backward).

    python -m bench.flops [--model-size electra_small] [--seq-length 128] [--direct]

Method (docs/reproduction.md#flops): only matrix multiplications are counted, each as 2·m·n·k; the backward
pass is counted as 2× the forward (one matmul for the input gradient, one for the weight gradient).
Per sequence of length S, for a tower of L layers, hidden H, FFN F and embedding E:

  embeddings_project (when E ≠ H)  2·S·E·H
  per layer: Q, K, V, output       4 · 2·S·H·H
             scores q·kᵀ, probs·v   2 · 2·S·S·H          (all heads together: heads × S·S·(H/heads))
             FFN in, out           2 · 2·S·H·F
  generator head, at the N masked positions only:
             dense Hg→E            2·N·Hg·E
             tied vocabulary       2·N·E·V
  discriminator head, every position:
             dense H→H, dense H→1  2·S·H·H + 2·S·H
  a two-tower cloze generator (two_tower_generator): the generator's encoder twice (generator_ltr,
  generator_rtl; the causal masks do not change the matmuls, every score is computed and then masked),
  and its cloze head at every position instead of the masked ones:
             dense 2·Hg→E          2·S·2Hg·E
             tied vocabulary       2·S·E·V

Embedding lookups, LayerNorm, softmax, GELU, dropout, Gumbel sampling and the optimizer update are not
counted (elementwise work, a few percent at most). Padding is not subtracted: every position of the
[batch, S] tensor is computed, so the count is per padded sequence.

`--direct` checks the formula against the matmuls the model really runs: it traces the Keras model's
forward pass under JAX (`jax.make_jaxpr`, nothing is executed) and sums 2·m·n·k over every dot_general.
This module never imports TensorFlow.
"""
import argparse
import json
import os

from configs.flops import (  # noqa: F401  (the analytic count is the product's; its names stay here too)
    BACKWARD_FACTOR, Tower, matmul, encoder_forward_flops, generator_head_forward_flops,
    cloze_head_forward_flops, discriminator_head_forward_flops, step_breakdown, mlm_step_breakdown,
    forward_flops, train_flops, towers_for, config_breakdown, train_flops_per_sequence)


def format_breakdown(breakdown, title=""):
    """Human-readable table of the breakdown, with totals and the method."""
    total = forward_flops(breakdown)
    lines = [title] if title else []
    lines.append(f"  {'tower':<14}{'part':<44}{'forward FLOPs':>15}{'share':>8}")
    for (tower, part), value in breakdown.items():
        lines.append(f"  {tower:<14}{part:<44}{value:>15.4g}{value / total:>8.1%}")
    lines.append(f"  {'':<14}{'forward total':<44}{total:>15.4g}")
    lines.append(f"  {'':<14}{'train step (forward + backward = 3 x forward)':<44}{train_flops(breakdown):>15.4g}")
    lines.append("  (matmuls only, 2*m*n*k each; backward = 2 x forward; generator vocabulary projection at "
                 "the masked positions only, a two-tower generator's cloze head at every position)")
    return "\n".join(lines)


# ---------------------------------------------------------------------- direct count (JAX trace)
def _dot_general_flops(eqn):
    """2 · (product of lhs dims) · (product of rhs free dims) for one dot_general."""
    (_, rhs_contract), (_, rhs_batch) = eqn.params["dimension_numbers"]
    lhs_shape = eqn.invars[0].aval.shape
    rhs_shape = eqn.invars[1].aval.shape
    rhs_free = 1
    for axis, size in enumerate(rhs_shape):
        if axis not in rhs_contract and axis not in rhs_batch:
            rhs_free *= size
    lhs_size = 1
    for size in lhs_shape:
        lhs_size *= size
    return 2 * lhs_size * rhs_free


def _jaxpr_matmul_flops(jaxpr):
    """Sum over every dot_general in a (closed) jaxpr, sub-jaxprs included."""
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            total += _dot_general_flops(eqn)
        for param in eqn.params.values():
            subs = param if isinstance(param, (list, tuple)) else [param]
            for sub in subs:
                if hasattr(sub, "eqns"):  # a Jaxpr
                    total += _jaxpr_matmul_flops(sub)
                elif hasattr(getattr(sub, "jaxpr", None), "eqns"):  # a ClosedJaxpr
                    total += _jaxpr_matmul_flops(sub.jaxpr)
    return total


def direct_forward_flops(config, batch_size=2, seq_length=None):
    """Per-sequence matmul FLOPs of the real model's training forward pass, traced under JAX.

    Needs KERAS_BACKEND=jax (set before keras is imported). Nothing is executed, only traced.
    """
    import jax
    import jax.numpy as jnp
    import keras

    from pretrain.builder import build_pretrainer

    if keras.backend.backend() != "jax":
        raise RuntimeError("direct_forward_flops needs KERAS_BACKEND=jax")
    seq_length = seq_length or config.max_seq_length
    model = build_pretrainer(config)
    ids = jnp.full((batch_size, seq_length), 1000 % config.vocab_size, "int32")
    batch = {"input_ids": ids, "input_mask": jnp.ones_like(ids), "segment_ids": jnp.zeros_like(ids)}
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def forward(trainable, non_trainable):
        outputs, _ = model.stateless_call(trainable, non_trainable, batch, training=True)
        return outputs.total_loss

    jaxpr = jax.make_jaxpr(forward)(trainable, non_trainable)
    return _jaxpr_matmul_flops(jaxpr.jaxpr) / batch_size


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-size", default="electra_small")
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--generator-hidden-size", type=float, default=None,
                        help="generator fraction (default: the model size's)")
    parser.add_argument("--hparams", type=json.loads, default={},
                        help="JSON of further PretrainingConfig overrides, e.g. another objective: "
                             "'{\"electra_objective\": false}' (masked LM only), '{\"two_tower_generator\": true}'")
    parser.add_argument("--direct", action="store_true",
                        help="also trace the Keras model under JAX and count its dot_generals")
    args = parser.parse_args(argv)
    if args.direct:
        os.environ["KERAS_BACKEND"] = "jax"
    from configs.pretraining_config import PretrainingConfig

    hparams = {"model_size": args.model_size, "max_seq_length": args.seq_length}
    if args.generator_hidden_size is not None:
        hparams["generator_hidden_size"] = args.generator_hidden_size
    hparams.update(args.hparams)
    config = PretrainingConfig.create(hparams)
    breakdown = config_breakdown(config)
    print(format_breakdown(breakdown, f"{args.model_size}, seq {args.seq_length}, "
                                      f"{config.max_predictions_per_seq} masked slots, "
                                      f"generator fraction {config.generator_hidden_size}, per sequence:"))
    if args.direct:
        direct = direct_forward_flops(config)
        print(f"  direct count (dot_generals of the traced forward pass): {direct:.6g} per sequence "
              f"(analytic {forward_flops(breakdown):.6g}, ratio {direct / forward_flops(breakdown):.4f})")


if __name__ == "__main__":
    main()
