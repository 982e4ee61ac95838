"""Is our discriminator's AUC what ELECTRA gives at this scale? A reference trained with transformers.

Trains the same pair of towers with Hugging Face's PyTorch ELECTRA classes (ElectraForMaskedLM as the
generator sharing the embedding module of ElectraForPreTraining; the original's masking, Gumbel
sampling, 1·MLM + 50·RTD, bias-free AdamW with weight decay 0.01, joint warmup × linear decay, clipping
1.0) on the same dataset, and prints the held-out discriminator AUC, recall, precision and the
generator's accuracy every --eval-every steps: the figures to hold next to run_pretraining.py's eval
lines for the same model size and hyperparameters (README.md has the side-by-side run).

    python -m studies.disc_auc_reference --dataset-dir electra_data/pretrain_tfrecords --steps 2000

The batches are read with TensorFlow in a child process (so this one holds only PyTorch), the last
shard is held out for evaluation, as run_pretraining.py's do_eval does.
"""
import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def dump_batches(dataset_dir, batch_size, train_batches, eval_batches, out_path, seed):
    """Writes train/eval int32 arrays to an .npz, reading the shards with our own tf.data reader."""
    code = f"""
import numpy as np
from data import tfrecords
meta = tfrecords.load_metadata({str(dataset_dir)!r})
files = tfrecords.shard_files({str(dataset_dir)!r}, meta)
def take(files, n, training):
    ds = tfrecords.pretraining_dataset({str(dataset_dir)!r}, {batch_size}, files=files, training=training,
                                       seed={seed}, metadata=meta)
    rows = {{"input_ids": [], "input_mask": [], "segment_ids": []}}
    for i, batch in enumerate(ds):
        if i == n: break
        for k in rows: rows[k].append(batch[k].numpy())
    return {{k: np.stack(v).astype("int32") for k, v in rows.items()}}
train = take(files[:-1], {train_batches}, True)
evaluation = take(files[-1:], {eval_batches}, False)
np.savez({str(out_path)!r}, **{{"train_" + k: v for k, v in train.items()}},
         **{{"eval_" + k: v for k, v in evaluation.items()}},
         special=np.array([meta["vocab"]["special_ids"][k] for k in ("cls", "sep", "mask")]),
         vocab_size=np.array(meta["vocab"]["size"]))
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,  # -c: the repository is on the path
                   env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""})


def mask_batch(torch, input_ids, input_mask, special_ids, mask_id, mask_prob, max_predictions, generator):
    """The original's masking: fixed count per sequence, positions with replacement, 85% [MASK]."""
    candidates = input_mask.bool()
    for token in special_ids:
        candidates &= input_ids != token
    count = torch.clamp(torch.round(input_mask.sum(-1).float() * mask_prob).long(), 1, max_predictions)
    count = torch.where(candidates.sum(-1) > 0, count, torch.zeros_like(count))
    weights = (torch.arange(max_predictions)[None, :] < count[:, None]).float()
    probs = candidates.float() + 1e-12 * (~candidates).float()
    positions = torch.multinomial(probs, max_predictions, replacement=True, generator=generator)
    positions = positions * weights.long()
    targets = torch.gather(input_ids, 1, positions) * weights.long()
    use_mask = torch.rand(positions.shape, generator=generator) < 0.85
    masked = input_ids.clone()
    rows = torch.arange(input_ids.shape[0])[:, None].expand_as(positions)
    chosen = (positions > 0) & use_mask
    masked[rows[chosen], positions[chosen]] = mask_id
    return masked, positions, targets, weights


def corrupt(torch, input_ids, positions, sampled):
    fake = input_ids.clone()
    rows = torch.arange(input_ids.shape[0])[:, None].expand_as(positions)
    written = positions > 0
    fake[rows[written], positions[written]] = sampled[written]
    labels = (fake != input_ids).long()
    return fake, labels


def original_adamw(torch, params, lr, decay_mask, state, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=0.01):
    """The original AdamWeightDecayOptimizer: no bias correction, decoupled decay except LayerNorm/bias."""
    with torch.no_grad():
        for p, decays in zip(params, decay_mask):
            if p.grad is None:
                continue
            m, v = state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
            m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            update = m / (v.sqrt() + eps)
            if decays:
                update = update + weight_decay * p
            p.sub_(lr * update)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m studies.disc_auc_reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset-dir", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--embedding", type=int, default=32)
    parser.add_argument("--generator-fraction", type=float, default=0.5)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", help="write every evaluation as JSON lines here")
    args = parser.parse_args(argv)

    import torch
    from sklearn.metrics import roc_auc_score
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        npz = pathlib.Path(scratch) / "batches.npz"
        dump_batches(args.dataset_dir, args.batch_size, args.steps, args.eval_batches, npz, args.seed)
        arrays = dict(np.load(npz))
    cls_id, sep_id, mask_id = (int(x) for x in arrays["special"])
    vocab_size = int(arrays["vocab_size"])
    seq_length = arrays["train_input_ids"].shape[-1]
    max_predictions = int((0.15 + 0.005) * seq_length)

    gen_hidden = int(round(args.hidden * args.generator_fraction))
    common = dict(vocab_size=vocab_size, embedding_size=args.embedding, max_position_embeddings=512,
                  num_hidden_layers=args.layers)
    discriminator = ElectraForPreTraining(ElectraConfig(hidden_size=args.hidden, num_attention_heads=args.heads,
                                                        intermediate_size=4 * args.hidden, **common))
    generator = ElectraForMaskedLM(ElectraConfig(hidden_size=gen_hidden, num_attention_heads=max(1, gen_hidden // 64),
                                                 intermediate_size=4 * gen_hidden, **common))
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    named = {}
    for model in (discriminator, generator):
        for name, p in model.named_parameters():
            named.setdefault(id(p), (name, p))
    params = [p for _, p in named.values()]
    decay_mask = [not ("LayerNorm" in name or name.endswith("bias")) for name, _ in named.values()]
    state = {}
    rng = torch.Generator().manual_seed(args.seed)

    def step_tensors(prefix, index):
        return [torch.from_numpy(arrays[f"{prefix}_{k}"][index]).long()
                for k in ("input_ids", "input_mask", "segment_ids")]

    def forward(ids, mask, segments, generator_rng):
        masked, positions, targets, weights = mask_batch(torch, ids, mask, (cls_id, sep_id, mask_id), mask_id,
                                                         0.15, max_predictions, generator_rng)
        hidden = generator.electra(masked, attention_mask=mask, token_type_ids=segments).last_hidden_state
        gathered = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
        logits = generator.generator_lm_head(generator.generator_predictions(gathered)).float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        mlm_loss = (nll * weights).sum() / (weights.sum() + 1e-6)
        uniform = torch.rand(logits.shape, generator=generator_rng)
        sampled = torch.argmax(logits.detach() - torch.log(-torch.log(uniform + 1e-9) + 1e-9), -1)
        fake, labels = corrupt(torch, ids, positions, sampled)
        disc_logits = discriminator(fake, attention_mask=mask, token_type_ids=segments).logits
        bce = torch.nn.functional.binary_cross_entropy_with_logits(disc_logits, labels.float(), reduction="none")
        disc_loss = (bce * mask).sum() / (mask.sum() + 1e-6)
        return mlm_loss, disc_loss, dict(logits=logits, targets=targets, weights=weights, sampled=sampled,
                                         disc_logits=disc_logits, labels=labels, mask=mask)

    def evaluate(step):
        discriminator.eval()
        generator.eval()
        eval_rng = torch.Generator().manual_seed(1234)
        scores, labels, mlm_hits, sampled_hits, slots, mlm_losses = [], [], 0.0, 0.0, 0.0, []
        with torch.no_grad():
            for index in range(arrays["eval_input_ids"].shape[0]):
                mlm_loss, _, out = forward(*step_tensors("eval", index), eval_rng)
                keep = out["mask"].bool()
                scores.append(out["disc_logits"][keep].numpy())
                labels.append(out["labels"][keep].numpy())
                mlm_hits += float(((out["logits"].argmax(-1) == out["targets"]).float() * out["weights"]).sum())
                sampled_hits += float(((out["sampled"] == out["targets"]).float() * out["weights"]).sum())
                slots += float(out["weights"].sum())
                mlm_losses.append(float(mlm_loss))
        discriminator.train()
        generator.train()
        scores, labels = np.concatenate(scores), np.concatenate(labels)
        predicted = scores > 0
        positives = labels == 1
        return {"step": step, "disc_auc": float(roc_auc_score(labels, scores)),
                "disc_recall": float((predicted & positives).sum() / max(1, positives.sum())),
                "disc_precision": float((predicted & positives).sum() / max(1, predicted.sum())),
                "disc_accuracy": float((predicted == positives).mean()),
                "fake_fraction": float(positives.mean()),
                "masked_lm_accuracy": mlm_hits / slots, "sampled_masked_lm_accuracy": sampled_hits / slots,
                "masked_lm_loss": float(np.mean(mlm_losses))}

    out = open(args.json_out, "w") if args.json_out else None
    start = time.time()
    for step in range(args.steps):
        if step % args.eval_every == 0:
            result = evaluate(step)
            result["elapsed_s"] = round(time.time() - start, 1)
            print(json.dumps(result), flush=True)
            if out:
                out.write(json.dumps(result) + "\n")
                out.flush()
        lr = args.lr * (1 - step / args.steps) * min(1.0, step / max(1, args.warmup))
        mlm_loss, disc_loss, _ = forward(*step_tensors("train", step), rng)
        loss = mlm_loss + 50.0 * disc_loss
        for p in params:
            p.grad = None
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        original_adamw(torch, params, lr, decay_mask, state)
        if not math.isfinite(loss.item()):
            raise SystemExit(f"loss became {loss.item()} at step {step}")
    result = evaluate(args.steps)
    result["elapsed_s"] = round(time.time() - start, 1)
    print(json.dumps(result), flush=True)
    if out:
        out.write(json.dumps(result) + "\n")
        out.close()


if __name__ == "__main__":
    main()
