"""Dynamic batching across requests: one worker thread owns the pipeline and speaks the parts (sentences)
of every pending request in shared batches.

A request becomes a `Job` (its `Utterance`: parts + seed + controls).  When work is pending the worker waits
up to `max_wait_s` for more to arrive (unless `max_batch` parts are already waiting), then takes up to
`max_batch` parts round-robin over the jobs that share the first job's seed and controls (one part per job
per round, in each job's order) whose token lengths are within `max_pad_ratio` of the first one's (a
batch is padded to its longest part: on a CPU a short sentence padded to a long one costs more than batching
saves), speaks them with ONE `Pipeline.speak` call (either engine) and hands each wave to its job.  Part k of a request gets the noise of (seed, k) whatever batch it lands in, so a request sounds the
same alone or batched (tests/test_serve.py compares it with `Pipeline.synthesize`).  `max_batch=1` is the
one-at-a-time baseline the load test compares against.

Back-pressure: a job with a `window` is taken only while fewer than `window` of its parts are spoken and not
yet `consumed` (sent on by its request), so a client that stops reading pauses its own synthesis (its
audio does not pile up in the server) while the others go on.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tts.runtime.pipeline import Pipeline, Utterance


class BatcherBusy(RuntimeError):
    """More jobs are pending than the batcher accepts (the server answers 503)."""


@dataclass(eq=False)  # a job is itself: compared by identity
class Job:
    """One request's synthesis.  `deliver(k, wave)` gets part k's wave [N] (CPU float32) in order, then
    `deliver(-1, None)` when done, or `deliver(-1, error)` once if the batch it was in failed.  `deliver` is
    called on the worker thread: it must only hand the item over (e.g. loop.call_soon_threadsafe)."""

    utterance: "Utterance"
    deliver: Callable[[int, Any], None]
    # back-pressure: at most this many parts spoken and not yet `Batcher.consumed` (None: no bound).  A
    # client that stops reading stops taking its parts, so its synthesis pauses instead of queueing audio
    window: int | None = None
    next_part: int = 0  # the next part to put in a batch
    consumed: int = 0  # parts the request has passed on (sent); guarded by the batcher's lock
    cancelled: bool = False  # the client went away: its remaining parts are dropped
    submitted: float = field(default_factory=time.monotonic)

    def takeable(self) -> int:
        """How many parts could go into a batch now: 0 when cancelled, done, or its window is full."""
        if self.cancelled:
            return 0
        left = len(self.utterance.parts) - self.next_part
        return left if self.window is None else max(0, min(left, self.window - (self.next_part - self.consumed)))

    def ready(self) -> bool:
        return self.takeable() > 0

    @property
    def key(self) -> tuple:
        """Jobs batch together only with equal controls (one `mels` call takes one value of each): those of its
        next part (the request's, with that part's SSML prosody)."""
        return self.utterance.controls(self.next_part).batch_key()


@dataclass
class BatcherStats:
    batches: int = 0
    parts: int = 0
    largest_batch: int = 0
    busy_s: float = 0.0  # wall seconds inside Pipeline.speak

    def as_dict(self) -> dict[str, float]:
        return {"batches": self.batches, "parts": self.parts, "largest_batch": self.largest_batch,
                "mean_batch": self.parts / self.batches if self.batches else 0.0, "busy_s": round(self.busy_s, 3)}


class _Worker:
    """A queue of jobs and the one thread that speaks them (the model is never called from two threads)."""

    max_batch: int

    def __init__(self, pipeline: "Pipeline", max_jobs: int, name: str) -> None:
        if max_jobs < 1:
            raise ValueError(f"max_jobs must be >= 1, got {max_jobs}")
        self.pipeline, self.max_jobs = pipeline, max_jobs
        self.jobs: deque = deque()
        self.cond = threading.Condition()
        self.stats = BatcherStats()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        with self.cond:
            if self._stopped:
                raise BatcherBusy("the server is shutting down")
            for gone in [j for j in self.jobs if j.cancelled]:  # a client that went away frees its place
                self.jobs.remove(gone)
            if len(self.jobs) >= self.max_jobs:
                raise BatcherBusy(f"{len(self.jobs)} requests are already waiting (limit {self.max_jobs})")
            self.jobs.append(job)
            self.cond.notify()

    def pending(self) -> int:
        with self.cond:
            return len(self.jobs)

    def consumed(self, job: Job, parts: int = 1) -> None:
        """The request of `job` has passed on `parts` more parts (its window opens by as many); called from
        any thread."""
        with self.cond:
            job.consumed += parts
            self.cond.notify()

    def cancel(self, job: Job) -> None:
        """The request's client went away: none of its remaining parts is spoken; called from any thread."""
        with self.cond:
            job.cancelled = True
            self.cond.notify()  # the worker drops it from the queue

    def stop(self, timeout: float = 30.0) -> None:
        """No new batch starts; waits up to `timeout` s for the one in progress."""
        with self.cond:
            self._stopped = True
            self.cond.notify_all()
        self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while True:
            with self.cond:
                # jobs whose window is full (their clients are not reading) wait for `consumed`
                while not self._stopped and not self._has_work():
                    self.cond.wait()
                if self._stopped:
                    break
                work = self._take_work()  # under the lock; spoken outside it, so requests can still arrive
            if work:
                self._speak(work)
        with self.cond:
            for job in self.jobs:
                job.deliver(-1, BatcherBusy("the server is shutting down"))
            self.jobs.clear()

    def _has_work(self) -> bool:
        for gone in [j for j in self.jobs if j.cancelled]:
            self.jobs.remove(gone)
        return any(j.ready() for j in self.jobs)

    def _take_work(self) -> Any:
        raise NotImplementedError

    def _speak(self, work: Any) -> None:
        raise NotImplementedError


class Batcher(_Worker):
    def __init__(self, pipeline: "Pipeline", max_batch: int = 8, max_wait_s: float = 0.005, max_jobs: int = 256,
                 max_pad_ratio: float = 1.5) -> None:
        if max_batch < 1 or max_wait_s < 0 or max_pad_ratio < 1:
            raise ValueError(f"max_batch >= 1, max_wait_s >= 0 and max_pad_ratio >= 1 needed, got "
                             f"{max_batch}, {max_wait_s}, {max_pad_ratio}")
        self.max_batch, self.max_wait_s, self.max_pad_ratio = max_batch, max_wait_s, max_pad_ratio
        super().__init__(pipeline, max_jobs, "tts-batcher")

    def _waiting_parts(self) -> int:
        return sum(j.takeable() for j in self.jobs)

    def _take(self) -> list[tuple[Job, int]]:
        """Up to max_batch (job, part index) pairs, round-robin over the jobs sharing the first job's key;
        jobs with nothing left to take leave the queue, served ones move to its back (fairness)."""
        for job in [j for j in self.jobs if j.cancelled]:
            self.jobs.remove(job)
        first = next((j for j in self.jobs if j.ready()), None)
        if first is None:
            return []
        key = first.key
        anchor = len(first.utterance.parts[first.next_part].ids)  # tokens of the batch's first part
        taken: list[tuple[Job, int]] = []
        served: list[Job] = []
        while len(taken) < self.max_batch:
            progress = False
            for job in self.jobs:
                if len(taken) >= self.max_batch:
                    break
                if not job.ready() or job.key != key:
                    continue
                n = len(job.utterance.parts[job.next_part].ids)
                if n > anchor * self.max_pad_ratio or n * self.max_pad_ratio < anchor:
                    continue  # too unlike the batch's length: a later batch (this job keeps its order)
                taken.append((job, job.next_part))
                job.next_part += 1
                progress = True
                if job not in served:
                    served.append(job)
            if not progress:
                break
        for job in served:
            self.jobs.remove(job)
            if job.next_part < len(job.utterance.parts):
                self.jobs.append(job)
        return taken

    def _take_work(self) -> list[tuple[Job, int]]:
        # wait a few ms for other requests' sentences, unless a full batch is already waiting
        deadline = time.monotonic() + self.max_wait_s
        while self._waiting_parts() < self.max_batch and (left := deadline - time.monotonic()) > 0:
            self.cond.wait(left)
        return self._take()

    def _speak(self, taken: list[tuple[Job, int]]) -> None:
        t0 = time.perf_counter()
        try:
            waves = self.pipeline.speak([(job.utterance, k) for job, k in taken])
        except Exception as error:  # noqa: BLE001 - handed to each request of the batch, which reports it
            failed: list[Job] = []
            for job, _ in taken:
                if job not in failed:
                    failed.append(job)
                    job.cancelled = True
                    job.deliver(-1, error)
            return
        finally:
            self.stats.busy_s += time.perf_counter() - t0
        self.stats.batches += 1
        self.stats.parts += len(taken)
        self.stats.largest_batch = max(self.stats.largest_batch, len(taken))
        for (job, k), wave in zip(taken, waves):
            if job.cancelled:
                continue
            job.deliver(k, wave)
            if k == len(job.utterance.parts) - 1:
                job.deliver(-1, None)
