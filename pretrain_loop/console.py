"""The console lines of a pretraining run: a log window's (rate and ETA) and a held-out evaluation's."""
from data.progress import format_duration

CONSOLE_METRICS = (("loss", "total_loss", 3), ("cloze_loss", "cloze_loss", 3), ("mlm_loss", "masked_lm_loss", 3),
                   ("disc_loss", "disc_loss", 4), ("mlm_acc", "masked_lm_accuracy", 3), ("disc_auc", "disc_auc", 3))
EVAL_METRICS = ("total_loss", "cloze_loss", "masked_lm_loss", "masked_lm_accuracy", "disc_loss", "disc_auc",
                "disc_accuracy", "disc_precision", "disc_recall")


def train_line(step, total_steps, metrics, steps_per_second, tokens_per_second):
    """`step 200/2000 (10%) | loss … | 3.1 steps/s | 9,900 tokens/s | ETA 0:09:40`."""
    parts = [f"step {step}/{total_steps} ({100 * step / max(total_steps, 1):.0f}%)"]
    parts += [f"{label} {metrics[key]:.{digits}f}" for label, key, digits in CONSOLE_METRICS if key in metrics]
    eta = (total_steps - step) / steps_per_second if steps_per_second > 0 else float("nan")
    parts += [f"{steps_per_second:.2f} steps/s", f"{tokens_per_second:,.0f} tokens/s",
              f"ETA {format_duration(eta) if eta == eta else '?'}"]
    return " | ".join(parts)


def eval_line(step, metrics, num_batches):
    values = ", ".join(f"{key} {metrics[key]:.4f}" for key in EVAL_METRICS if key in metrics)
    return f"eval at step {step} ({num_batches} batches): {values}"
