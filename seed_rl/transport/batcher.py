"""Dynamic batching of actor requests into inference batches.

Every actor message (a :class:`seed_rl.types.StepBatch` of k rows) is submitted to one :class:`DynamicBatcher`,
whose single thread concatenates the rows of several waiting requests, calls the learner's inference step once,
and splits the actions back per request.

The batching rule (see docs/transport.md):

* A batch runs when at least ``inference_batch_size`` rows are waiting, or when the oldest waiting request has
  waited ``max_batch_wait_ms`` (with ``wait_for_full_batch``, the original's behaviour, only full batches run).
* Requests join a batch in arrival order. A batch never exceeds ``inference_batch_size`` rows, except a single
  request that is bigger on its own (it then runs alone); a request that does not fit ends the batch, so later,
  smaller requests cannot overtake it.
* An env id never appears twice in one batch. A dying actor and its restarted replacement can both have a message
  in flight for the same env ids (the original crashed on this); the later request waits for the next batch, and so
  does every later request that shares an env id with a request that waits, so each env's messages reach the
  handler in arrival order.
* A request whose future is cancelled before its batch starts (the caller went away) never reaches the handler.
* A handler exception fails the futures of that batch only; the batcher keeps running.
* The handler may refuse single rows (:class:`PartialAnswer`: rows it could not act on, with their causes): a
  request with a refused row resolves to :class:`RefusedRows` (its actions, which env ids were refused and why),
  every other request of the batch to its actions, as usual.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from seed_rl.transport.errors import LearnerUnavailableError
from seed_rl.types import EnvOutput, StepBatch

__all__ = ["DynamicBatcher", "Handler", "PartialAnswer", "RefusedRows"]

_log = logging.getLogger(__name__)

class PartialAnswer(NamedTuple):
    """What a handler returns for a batch where it refused rows (otherwise it returns the actions alone)."""

    actions: np.ndarray
    """``[n, ...]``: the actions of the rows acted on (a refused row's action is meaningless)."""
    causes: Sequence[str]
    """``[n]``: "" for a row acted on, else why it was refused (one line)."""


class RefusedRows(NamedTuple):
    """The result of a request some of whose rows the handler refused (the others were acted on)."""

    actions: np.ndarray
    """``[k, ...]``: the request's actions; a refused row's action is zero and must not be used."""
    env_ids: list[int]
    """The refused rows' env ids, in the request's row order."""
    causes: list[str]
    """Why each of them was refused (aligned with ``env_ids``)."""

    def describe(self) -> str:
        """One line: the refused env ids, grouped by cause."""
        by_cause: dict[str, list[int]] = {}
        for env_id, cause in zip(self.env_ids, self.causes):
            by_cause.setdefault(cause, []).append(env_id)
        return "; ".join(f"env ids {ids}: {cause}" for cause, ids in by_cause.items())


Handler = Callable[[StepBatch], "np.ndarray | PartialAnswer"]
"""The learner's inference step: a StepBatch of n rows in, actions ``[n, ...]`` out, or a :class:`PartialAnswer`
when it refused rows. It may block (back-pressure)."""

_STOPPED_MESSAGE = "the inference batcher is stopped: the learner is stopping"


class _Request:
    __slots__ = ("arrival", "env_ids", "future", "rows", "step_batch")

    def __init__(
        self, step_batch: StepBatch, rows: int, env_ids: frozenset, future, arrival: float
    ):
        self.step_batch = step_batch
        self.rows = rows
        self.env_ids = env_ids
        self.future: concurrent.futures.Future = future
        self.arrival = arrival


def _concat_step_batches(batches: Sequence[StepBatch]) -> StepBatch:
    """Concatenates StepBatches row-wise (dict observations per key)."""
    if len(batches) == 1:
        return batches[0]

    def cat(arrays):
        return np.concatenate(arrays, axis=0)

    first_obs = batches[0].env_outputs.observation
    observations = [b.env_outputs.observation for b in batches]
    if isinstance(first_obs, dict):
        observation = {key: cat([o[key] for o in observations]) for key in first_obs}
    else:
        observation = cat(observations)
    outputs = [b.env_outputs for b in batches]
    return StepBatch(
        env_ids=cat([b.env_ids for b in batches]),
        run_ids=cat([b.run_ids for b in batches]),
        env_outputs=EnvOutput(
            reward=cat([o.reward for o in outputs]),
            done=cat([o.done for o in outputs]),
            observation=observation,
            abandoned=cat([o.abandoned for o in outputs]),
            episode_step=cat([o.episode_step for o in outputs]),
        ),
        raw_rewards=cat([b.raw_rewards for b in batches]),
        life_lost=None if all(b.life_lost is None for b in batches) else cat(
            [np.zeros(len(b.env_ids), np.bool_) if b.life_lost is None else b.life_lost for b in batches]),
    )


def _resolve(
    future: concurrent.futures.Future, result=None, exception: BaseException | None = None
) -> None:
    """Sets a future's outcome unless it already has one (stop() may have failed it first)."""
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class DynamicBatcher:
    """Gathers the rows of concurrent requests into inference batches (see the module docstring for the rule).

    Args:
      handler: the inference step, called from the batcher's thread only, one batch at a time.
      inference_batch_size: the target number of rows per batch (>= 1).
      max_batch_wait_ms: run a partial batch once its oldest request has waited this long (ignored with
        ``wait_for_full_batch``).
      wait_for_full_batch: the original's behaviour: run only full batches (a single request of at least
        ``inference_batch_size`` rows counts as full).
    """

    def __init__(
        self,
        handler: Handler,
        inference_batch_size: int,
        max_batch_wait_ms: float,
        wait_for_full_batch: bool = False,
        *,
        name: str = "seed_rl-batcher",
    ) -> None:
        if inference_batch_size < 1:
            raise ValueError(f"inference_batch_size must be >= 1, got {inference_batch_size}")
        if max_batch_wait_ms < 0:
            raise ValueError(f"max_batch_wait_ms must be >= 0, got {max_batch_wait_ms}")
        self._handler = handler
        self.inference_batch_size = int(inference_batch_size)
        self.max_batch_wait_s = float(max_batch_wait_ms) / 1000.0
        self.wait_for_full_batch = bool(wait_for_full_batch)
        self._cond = threading.Condition()
        self._pending: collections.deque[_Request] = collections.deque()
        self._pending_rows = 0
        self._running: list[_Request] = []
        self._stopped = False
        self._reset_window()
        self._total_batches = 0
        self._total_rows = 0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------------------------ public

    def submit(self, step_batch: StepBatch) -> concurrent.futures.Future:
        """Queues the rows of one request; the future resolves to its actions (a ``[k, ...]`` slice).

        The future fails with the handler's exception if the batch fails, and with
        :class:`LearnerUnavailableError` if the batcher is (or gets) stopped. Cancelling the future before its
        batch starts withdraws the request.
        """
        rows = len(step_batch.env_ids)
        env_ids = frozenset(np.asarray(step_batch.env_ids).tolist())
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._stopped:
                future.set_exception(LearnerUnavailableError(_STOPPED_MESSAGE))
                return future
            self._pending.append(_Request(step_batch, rows, env_ids, future, time.monotonic()))
            self._pending_rows += rows
            # Wake the batcher only when this request changes its plan: a new oldest request (a new deadline) or
            # enough rows for a batch. Otherwise it is already waiting for the head's deadline.
            if len(self._pending) == 1 or self._pending_rows >= self.inference_batch_size:
                self._cond.notify()
        return future

    def stop(self, timeout: float | None = 1.0) -> None:
        """Fails pending and running requests and every later submit with :class:`LearnerUnavailableError`.

        Waits up to ``timeout`` seconds for the batcher thread to end; a handler that blocks longer is left to
        finish on its own (its results are dropped).
        """
        with self._cond:
            already = self._stopped
            self._stopped = True
            doomed = list(self._pending) + list(self._running)
            self._pending.clear()
            self._pending_rows = 0
            self._cond.notify_all()
        if not already:
            for request in doomed:
                _resolve(request.future, exception=LearnerUnavailableError(_STOPPED_MESSAGE))
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stats(self) -> dict[str, float]:
        """Counters since the previous call (the window) plus totals; resets the window.

        Keys: ``batches``, ``rows``, ``requests``, ``failed_batches``, ``mean_batch_rows``, ``mean_batch_fill``
        (rows / inference_batch_size, averaged over batches), ``mean_wait_ms`` (arrival to batch start, averaged
        over requests), ``mean_handler_ms``, ``pending_rows`` (rows waiting now, withdrawn requests excluded), ``total_batches``,
        ``total_rows``.
        """
        with self._cond:
            batches, rows, requests = self._w_batches, self._w_rows, self._w_requests
            out = {
                "batches": batches,
                "rows": rows,
                "requests": requests,
                "failed_batches": self._w_failed,
                "mean_batch_rows": rows / batches if batches else 0.0,
                "mean_batch_fill": rows / (batches * self.inference_batch_size) if batches else 0.0,
                "mean_wait_ms": 1000.0 * self._w_wait_s / requests if requests else 0.0,
                "mean_handler_ms": 1000.0 * self._w_handler_s / batches if batches else 0.0,
                "pending_rows": sum(r.rows for r in self._pending if not r.future.cancelled()),
                "total_batches": self._total_batches,
                "total_rows": self._total_rows,
            }
            self._reset_window()
        return out

    # ------------------------------------------------------------------------------------------------ thread

    def _reset_window(self) -> None:
        self._w_batches = 0
        self._w_rows = 0
        self._w_requests = 0
        self._w_failed = 0
        self._w_wait_s = 0.0
        self._w_handler_s = 0.0

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch = None
                while batch is None:
                    if self._stopped:
                        return
                    batch, timeout = self._take_batch_locked()
                    if batch is None:
                        self._cond.wait(timeout)
                self._running = batch
            self._execute(batch)

    def _take_batch_locked(self) -> tuple[list[_Request] | None, float | None]:
        """Returns (the next batch, None) if one should run now, else (None, seconds to wait or None)."""
        if any(r.future.cancelled() for r in self._pending):
            self._pending = collections.deque(r for r in self._pending if not r.future.cancelled())
            self._pending_rows = sum(r.rows for r in self._pending)
        if not self._pending:
            return None, None
        size = self.inference_batch_size
        now = time.monotonic()
        if self.wait_for_full_batch:
            if self._pending_rows < size:
                return None, None
        elif self._pending_rows < size:
            wait = self._pending[0].arrival + self.max_batch_wait_s - now
            if wait > 0:
                return None, wait

        batch: list[_Request] = []
        rows = 0
        blocked: set = set()  # env ids of the batch and of requests that wait for a later batch
        for request in self._pending:
            if not request.env_ids.isdisjoint(blocked):
                blocked |= request.env_ids
                continue
            if batch and rows + request.rows > size:
                break
            batch.append(request)
            rows += request.rows
            blocked |= request.env_ids
            if rows >= size:
                break
        if self.wait_for_full_batch and rows < size:
            return None, None  # overlapping env ids kept it short: wait for more requests

        taken = {id(r) for r in batch}
        self._pending = collections.deque(r for r in self._pending if id(r) not in taken)
        self._pending_rows -= rows

        # A future cancelled since the scan above drops out here; set_running also makes later cancels no-ops.
        batch = [r for r in batch if r.future.set_running_or_notify_cancel()]
        if not batch:
            return None, 0.0
        for request in batch:
            self._w_wait_s += now - request.arrival
        return batch, None

    def _execute(self, batch: list[_Request]) -> None:
        rows = sum(r.rows for r in batch)
        start = time.monotonic()
        failure: BaseException | None = None
        actions = None
        causes: Sequence[str] | None = None
        try:
            answer = self._handler(_concat_step_batches([r.step_batch for r in batch]))
            if isinstance(answer, PartialAnswer):
                actions, causes = np.asarray(answer.actions), answer.causes
                if len(causes) != rows:
                    raise ValueError(f"the inference handler gave {len(causes)} row causes for {rows} rows")
            else:
                actions = np.asarray(answer)
            if actions.ndim == 0 or actions.shape[0] != rows:
                raise ValueError(
                    f"the inference handler returned actions of shape {actions.shape} for a batch of {rows} "
                    f"rows; expected a leading dimension of {rows}"
                )
        except BaseException as e:  # noqa: BLE001 - the failure goes to the callers, the batcher survives
            failure = e
        elapsed = time.monotonic() - start

        with self._cond:
            self._running = []
            self._w_batches += 1
            self._w_rows += rows
            self._w_requests += len(batch)
            self._w_handler_s += elapsed
            self._total_batches += 1
            self._total_rows += rows
            if failure is not None:
                self._w_failed += 1

        if failure is not None:
            if isinstance(failure, Exception):
                _log.warning(
                    "inference batch of %d rows failed: %r", rows, failure, exc_info=failure
                )
            for request in batch:
                _resolve(request.future, exception=failure)
            if not isinstance(failure, Exception):
                raise failure
            return
        assert actions is not None
        offset = 0
        for request in batch:
            end = offset + request.rows
            mine = actions[offset:end]
            if causes is not None and any(causes[offset:end]):
                _resolve(request.future, _refused_rows(request, mine, causes[offset:end]))
            else:
                _resolve(request.future, mine)
            offset = end


def _refused_rows(request: _Request, actions: np.ndarray, causes: Sequence[str]) -> RefusedRows:
    refused = np.array([bool(c) for c in causes])
    actions = actions.copy()
    actions[refused] = 0
    env_ids = np.asarray(request.step_batch.env_ids)[refused].tolist()
    return RefusedRows(actions, env_ids, [c for c in causes if c])
