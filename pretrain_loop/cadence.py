"""When a pretraining run logs, saves and evaluates: the steps of its events, and the next one."""
import dataclasses
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Cadence:
    """The event steps of a `total`-step run. Logs every `log_every` steps and at the end; saves every
    `save_every` steps (0: never by count) and at `save_steps`; evaluates every `eval_every` steps (0: never
    by count) and at `eval_steps`; pauses after `pause_at` (0: never). A run that evaluates by count
    evaluates at the end too."""
    total: int
    log_every: int
    save_every: int = 0
    save_steps: Sequence[int] = ()
    eval_every: int = 0
    eval_steps: Sequence[int] = ()
    pause_at: int = 0

    def logs(self, step):
        return step % self.log_every == 0 or step == self.total

    def saves(self, step):
        return bool(self.save_every) and step % self.save_every == 0 or step in self.save_steps

    def evaluates(self, step):
        return bool(self.eval_every) and (step % self.eval_every == 0 or step == self.total) or step in self.eval_steps

    def next_event(self, step):
        """The first step after `step` at which something happens (the end at the latest)."""
        events = [self.total, (step // self.log_every + 1) * self.log_every]
        events += [(step // every + 1) * every for every in (self.save_every, self.eval_every) if every]
        events += [s for s in (*self.save_steps, *self.eval_steps) if s > step]
        if self.pause_at > step:
            events.append(self.pause_at)
        return min(events)
