"""The learner process's lifecycle: gRPC server + batched inference + training thread + checkpoints + summaries.

It is algorithm-agnostic: the agent is built from the config's agent name and used only through the Agent
protocol (``seed_rl.types.Agent``): its ``feed`` says whether unrolls go to the training queue or to a replay
buffer (and with which settings), its ``schedule`` how many updates a batch gets. Checkpoints live in
``checkpoints.py``, the SavedModel export in ``export.py``, everything reported in ``summaries.py``. Threads:

* gRPC stream threads hand each actor message to the transport's batcher;
* the batcher thread runs the compiled inference step and puts completed unrolls on the bounded queue (blocking
  when it is full: back-pressure);
* the training thread takes ``batch_size`` unrolls, runs the train step and saves checkpoints on a period;
* the calling thread writes summaries, ``episodes.csv`` and the status line until training is done or stopped.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import shlex
import threading
import time
from typing import TYPE_CHECKING, Optional

import keras
import numpy as np
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.config import ActorConfig, Config, replace, replace_flat
from seed_rl.learner import data as data_lib
from seed_rl.learner import devices as devices_lib
from seed_rl.learner import play as play_lib
from seed_rl.learner import resume as resume_lib
from seed_rl.learner import summaries as summaries_lib
from seed_rl.learner.checkpoints import BestCheckpoint, RunCheckpoint, WeightHistory, all_variables
from seed_rl.learner.data import QueueClosed, UnrollQueue, frames_per_train_step
from seed_rl.learner.export import export_saved_model
from seed_rl.learner.inference import InferenceStep
from seed_rl.learner.tracking import WandbTracker
from seed_rl.learner.training import SkippedUpdatesError, SkipTracker, Trainer
from seed_rl.transport import tls as tls_lib
from seed_rl.transport.batcher import PartialAnswer
from seed_rl.transport.grpc_serving import refuse_busy_port
from seed_rl.transport.server import InferenceServer
from seed_rl.types import Agent, StepBatch

if TYPE_CHECKING:
    from seed_rl.learner import replay as replay_lib

log = logging.getLogger("seed_rl.learner")

REDACTED = "<redacted>"  # what config.json says instead of the auth token


def public_config(config: Config) -> Config:
    """``config`` as the run directory (often a shared bucket) and W&B get it: without the auth token."""
    token = REDACTED if config.run.transport.auth_token else ""
    return replace(config, run=replace_flat(config.run, auth_token=token))


MAX_CONSECUTIVE_INFERENCE_FAILURES = 50
"""The learner stops (run() raises) after this many inference batches in a row failed."""
BEST_CHECK_PERIOD_S = 0.2
"""The run loop checks the target and the best checkpoint as episodes arrive, at most this often."""
GREEDY_CHECK_SECONDS = 120.0
"""A greedy check of a target candidate (``--target_eval_episodes``) plays for at most this long."""
VIDEO_ENV_ID = 30_000
"""The env id of the learner's training-video env (``--video_period_secs``)."""
GREEDY_CHECK_ENV_ID = 20_000
"""The env id (and so the seed offset) of the learner's first greedy-check env (the others count up from it, at
most ``EVAL_ENVS``): none of the actors' ids, nor the closing evaluation's."""


def total_train_steps(config: Config, agent: Agent) -> int:
    """Training steps (batches) that spend the run's frame budget."""
    per_step = frames_per_train_step(agent.feed, config.run.batch_size, config.run.unroll_length,
                                     config.env.num_action_repeats)
    return int(math.ceil(config.run.total_environment_frames / per_step))


def _check_schedule(schedule, batch_size: int, unroll_length: int, devices) -> None:
    """Refuses a batch that the agent's update schedule cannot split into its minibatches over the replicas (the
    schedule's own check, `UpdateSchedule.check_minibatches`, before anything starts, naming the flags): the
    batch's transitions (a schedule of single transitions, split over the replicas) or its sequences."""
    transitions = schedule.splits_transitions
    units = batch_size * unroll_length if transitions else batch_size
    try:
        schedule.check_minibatches(units, devices.num_replicas if transitions else 1)
    except ValueError as e:
        flags = f"batch_size x unroll_length = {units}" if transitions else f"batch_size={batch_size}"
        raise ValueError(f"{flags}: {e}") from None
    if transitions:
        devices.check_batch(batch_size)
    else:
        devices.check_batch(batch_size, schedule.minibatches)


class Learner:
    """Builds everything from a Config; ``run()`` trains until the frame budget is spent or ``stop()``."""

    def __init__(self, config: Config, observation_spec=None, action_spec=None, status_stream=None):
        if not config.run.tracking.logdir:
            raise ValueError("config.run.tracking.logdir must be set (--logdir)")
        self.config = config
        run = config.run
        self._configure_tensorflow(run.devices)
        self.devices = devices_lib.from_run_config(run)
        """Which devices train and which one runs inference (``seed_rl/learner/devices.py``)."""
        if observation_spec is None or action_spec is None:
            from seed_rl.envs import env_specs

            observation_spec, action_spec = env_specs(config.env)
        self.observation_spec = observation_spec
        self.action_spec = action_spec
        public_json = public_config(config).to_json()
        # Nothing is written to the run directory before everything below is built: a config that cannot start,
        # or cannot resume this directory, leaves it as it was.
        changes = resume_lib.resume_changes(run.tracking.logdir, public_json)
        self._build_agent()
        self._build_trainer(changes)
        self._build_data_path()
        self.server = self._build_server(ActorConfig.of(config).to_json())

        try:  # a port another process listens on: one line, before the run directory is written
            refuse_busy_port(run.transport.server_address)
        except OSError as e:
            raise ValueError(str(e)) from None
        if run.tracking.video_period_secs > 0:
            try:
                play_lib.check_video_support()
            except ImportError as e:
                raise ValueError(f"--video_period_secs: {e}") from None
        os.makedirs(run.tracking.logdir, exist_ok=True)
        with open(os.path.join(run.tracking.logdir, resume_lib.CONFIG_FILE), "w") as f:
            f.write(public_json)
        resume_lib.record_changes(run.tracking.logdir, changes)
        resume_lib.clear_finished(run.tracking.logdir)  # resuming it with a larger budget or target: it trains on
        self._init_state(status_stream)

    @staticmethod
    def _configure_tensorflow(devices) -> None:
        """Threads and (virtual) devices, before TensorFlow's runtime starts."""
        if devices.tf_intra_op_threads:
            try:
                tf.config.threading.set_intra_op_parallelism_threads(devices.tf_intra_op_threads)
            except RuntimeError:  # TensorFlow already initialised in this process (e.g. a notebook)
                log.warning("tf_intra_op_threads=%d ignored: TensorFlow is already initialised",
                            devices.tf_intra_op_threads)
        devices_lib.configure_virtual_cpu_devices(devices.virtual_cpu_devices)

    def _build_agent(self) -> None:
        """The agent (seeded, under the devices' strategy and dtype policy), and its schedule checked against the
        batch and the replicas."""
        config, run = self.config, self.config.run
        # Keras 3 initializers draw from Keras's global seed, not TensorFlow's: this seeds both (and numpy's and
        # Python's global generators), so one seed gives one set of initial weights and one action stream.
        keras.utils.set_random_seed(run.seed)
        self.num_envs = run.resolved_num_envs
        with self.devices.scope(), devices_lib.dtype_policy(self.devices.dtype_policy()):
            self.agent: Agent = agents_lib.make_agent(config.agent_name, config.agent, self.observation_spec,
                                                      self.action_spec, num_envs=self.num_envs,
                                                      num_eval_envs=run.num_eval_envs)
        self.feed = self.agent.feed
        _check_schedule(self.agent.schedule, run.batch_size, run.unroll_length, self.devices)

    def _build_trainer(self, changes) -> None:
        """Counters, the optimizer over the run's updates, the trainer, and the checkpoints (restoring the latest:
        a checkpoint the agent does not fit is refused with the config's changes named)."""
        run = self.config.run
        self.frames_per_train_step = frames_per_train_step(self.feed, run.batch_size, run.unroll_length,
                                                           self.config.env.num_action_repeats)
        self.policy_version = tf.Variable(0, dtype=tf.int64, trainable=False, name="train_steps")
        self.env_frames_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_frames")
        self.total_train_steps = total_train_steps(self.config, self.agent)
        with self.devices.scope():
            optimizer = self.agent.make_optimizer(self.total_train_steps * self.agent.schedule.updates_per_batch)
        self.trainer = Trainer(self.agent, optimizer, self.policy_version, seed=run.seed, devices=self.devices)
        try:
            self.checkpoints = RunCheckpoint(
                run.tracking.logdir, dict(optimizer=optimizer, train_steps=self.policy_version,
                                          env_frames=self.env_frames_var, **self.agent.checkpoint_items()),
                max_to_keep=run.tracking.keep_checkpoints)
        except (ValueError, AssertionError, tf.errors.OpError) as e:  # shapes or variables that do not match
            raise resume_lib.checkpoint_mismatch(run.tracking.logdir, changes, e) from e
        self.restored_from: Optional[str] = self.checkpoints.restored_from
        self.best = self._build_best_checkpoint()
        self.env_frames = int(self.env_frames_var.numpy())

    def _build_best_checkpoint(self) -> BestCheckpoint:
        """The best checkpoint, written from a second copy of the agent (built once from the same config) that
        each save sets to a kept snapshot of the weights (`WeightHistory`): the version that played the window,
        not the live weights of the moment the window was read, which training has moved on from."""
        config, run = self.config, self.config.run
        live = all_variables(self.agent.checkpoint_items())
        with self.devices.scope(), devices_lib.dtype_policy(self.devices.dtype_policy()):
            copy = agents_lib.make_agent(config.agent_name, config.agent, self.observation_spec, self.action_spec,
                                         num_envs=self.num_envs, num_eval_envs=run.num_eval_envs)
            counters = (tf.Variable(0, dtype=tf.int64, trainable=False, name="train_steps"),
                        tf.Variable(0, dtype=tf.int64, trainable=False, name="env_frames"))
        items = dict(train_steps=counters[0], env_frames=counters[1], **copy.checkpoint_items())
        variables = all_variables(copy.checkpoint_items())
        if [(tuple(v.shape), v.dtype) for v in live] != [(tuple(v.shape), v.dtype) for v in variables]:
            raise AssertionError("a second copy of the agent does not have the agent's variables")
        self.history = WeightHistory(live)
        """Snapshots of the weights at recent policy versions (recorded by the training thread)."""
        self.history.record(int(self.policy_version.numpy()))  # the initial (or restored) weights
        return BestCheckpoint(run.tracking.logdir, tf.train.Checkpoint(**items), items, variables=variables,
                              counters=counters)

    def _build_data_path(self) -> None:
        """The inference step (per-env tables, unroll store), the unroll queue, and the data source the agent's
        feed declares (a replay is restored from the run directory when the feed checkpoints it)."""
        run = self.config.run
        with self.devices.inference_scope():
            self.inference = InferenceStep(
                self.agent, self.observation_spec, self.num_envs, run.unroll_length,
                self.config.env.num_action_repeats, self.policy_version,
                num_overlapping_steps=self.agent.num_overlapping_steps, num_eval_envs=run.num_eval_envs,
                fast_call=run.devices.fast_inference_call, action_spec=self.action_spec,
                device=self.devices.inference_device, jit_compile=run.devices.jit_compile,
                stagger_unrolls=run.stagger_unrolls)
        self.queue = UnrollQueue(run.resolved_unroll_queue_size)
        self.source = data_lib.build_source(self.feed, self.queue, self.inference.store, run.batch_size, run.seed)
        self.replay: Optional[replay_lib.PrioritizedReplay] = self.source.replay
        if self.source.checkpointed:
            self.checkpoints.replay = self.replay
            self.checkpoints.restore_replay()
        self._initial_priorities = self.source.initial_priorities

    def _build_server(self, actor_json: str) -> InferenceServer:
        """The gRPC server (and the same-host stream) that feeds the inference step; it listens once started.
        Actors are sent ``actor_json``, their part of the config."""
        run, transport = self.config.run, self.config.run.transport
        return InferenceServer(
            transport.server_address, self._handle, num_envs=self.num_envs, env_batch_size=run.env_batch_size,
            observation_spec=self.observation_spec, action_spec=self.action_spec, config_json=actor_json,
            inference_batch_size=run.resolved_inference_batch_size, max_batch_wait_ms=run.max_batch_wait_ms,
            wait_for_full_batch=run.wait_for_full_batch, auth_token=transport.auth_token,
            local_stream=transport.local_stream, server_kind=transport.resolved_grpc_server,
            stream_idle_timeout_s=transport.stream_idle_timeout_s, max_abs_reward=transport.max_abs_reward,
            max_abs_observation=transport.max_abs_observation, max_refused_in_a_row=transport.max_refused_in_a_row,
            server_credentials=tls_lib.server_credentials(transport.tls_cert_file, transport.tls_key_file))

    def _init_state(self, status_stream) -> None:
        """What the running learner keeps: events, episodes, metrics, failures, counters, the status line."""
        run = self.config.run
        self._stop = threading.Event()
        self._done = threading.Event()
        self._episodes_arrived = threading.Event()
        """Set by the inference thread when episodes end: the run loop checks the target and the best at once."""
        self._train_gate = threading.Event()
        """Cleared by the run loop to pause training (a greedy check of a target candidate); set: train."""
        self._train_gate.set()
        self._train_paused = threading.Event()
        """Set by the training thread while it waits at the gate (the weights do not change)."""
        self._next_target_check = 0
        """The episode count before which a failed greedy check of the target is not tried again."""
        self._best_confirmed = False
        """The best checkpoint holds weights a greedy check confirmed at the target: no window replaces them."""
        self._greedy_check_failed = False
        self._greedy_envs: list = []  # the greedy check's envs, made at its first call
        """The greedy check's env, made at the first check (its policy step is `play.policy_step`'s, cached)."""
        self.finished = False
        """Set when run() returns because training is finished (budget spent or target reached), not stopped."""
        self.closing_line_follows = False
        """Set by a launcher that prints the run's closing line itself after a finished run (with its greedy
        evaluation): the learner then leaves its own out, so that the words are not printed twice."""
        self._lock = threading.Lock()
        self._episodes: collections.deque = collections.deque()
        self._episode_start_versions = np.full(self.num_envs, int(self.policy_version.numpy()), dtype=np.int64)
        """Per env: the policy version when its current episode began (when its last one ended)."""
        self._metrics = summaries_lib.MetricAccumulator()
        self._train_error: Optional[BaseException] = None
        self.skips = SkipTracker(run.devices.max_skipped_updates, log)
        """Updates the trainer's guard skipped (not finite), and the stop rule (``--max_skipped_updates``)."""
        self._inference_error: Optional[BaseException] = None
        self._inference_failures = 0  # consecutive failed inference batches
        self.refused_rows = 0
        """Rows the inference step refused (their outputs not finite, or actions outside the spec)."""
        self._refusal_causes_logged: set = set()
        self._last_priorities: Optional[np.ndarray] = None
        self._start_time = time.time()
        self._last_checkpoint = time.monotonic()
        self._last_source_stats = time.monotonic()
        self.status = summaries_lib.StatusLine(status_stream)
        self.tracker: Optional[WandbTracker] = None  # W&B, created in start() when run.tracking.wandb_project is set
        self.videos: Optional[play_lib.PeriodicVideo] = None  # --video_period_secs, started in start()

    # -- inference (batcher thread) ------------------------------------------------------------------------
    def _handle(self, batch: StepBatch) -> np.ndarray | PartialAnswer:
        try:
            out = self.inference(batch.env_ids, batch.run_ids, batch.env_outputs, batch.raw_rewards, batch.life_lost)
        except Exception as e:
            # One failed batch is reported to its actors and training goes on; a step that fails every time
            # is a bug that no actor restart fixes, so the learner stops with it instead of serving errors forever.
            self._inference_failures += 1
            if self._inference_failures >= MAX_CONSECUTIVE_INFERENCE_FAILURES and self._inference_error is None:
                self._inference_error = e
                self._stop.set()
            raise
        self._inference_failures = 0
        frames = int(out.frames.numpy())
        with self._lock:
            self.env_frames += frames
            env_frames = self.env_frames
        if out.finished_env_ids.shape[0]:
            stats = tf.nest.map_structure(lambda t: t.numpy(), out.finished)
            now = time.time()
            first_eval = self.num_envs - self.config.run.num_eval_envs
            version = int(self.policy_version.numpy())
            for i, env_id in enumerate(out.finished_env_ids.numpy()):
                # The env's next episode begins now: its first version is this one.
                first, self._episode_start_versions[env_id] = int(self._episode_start_versions[env_id]), version
                self._episodes.append(summaries_lib.Episode(
                    env_frames, float(stats.episode_return[i]), float(stats.raw_return[i]),
                    int(stats.frames[i]), int(stats.steps[i]), int(env_id), now, bool(env_id >= first_eval),
                    first_policy_version=first, last_policy_version=version))
            self._episodes_arrived.set()
        if out.completed_env_ids.shape[0]:
            unrolls = tf.nest.map_structure(lambda t: t.numpy(), out.unrolls)
            priorities = None
            if self._initial_priorities is not None:
                priorities = self._initial_priorities(out.unrolls).numpy()  # the replay quarantines non-finite
            try:
                # One chunk: every unroll this step completed, with the envs they came from.
                self.queue.put(unrolls, priorities, out.completed_env_ids.numpy())
            except QueueClosed:
                pass  # stopping: the partial data is dropped, actors get UNAVAILABLE next
        actions = out.actions.numpy()
        refused = out.refused.numpy()
        if not refused.any():
            return actions
        return self._refuse_rows(batch, actions, refused)

    def _refuse_rows(self, batch: StepBatch, actions: np.ndarray, refused: np.ndarray) -> PartialAnswer:
        """The answer for a batch with refused rows (``InferenceOutput.refused``): the batcher refuses their
        messages only. Counted, and logged once per cause."""
        causes = {int(code): self.inference.cause(int(code)) for code in np.unique(refused[refused != 0])}
        with self._lock:
            self.refused_rows += int(np.count_nonzero(refused))
        for code, cause in causes.items():
            if code not in self._refusal_causes_logged:
                self._refusal_causes_logged.add(code)
                env_ids = np.asarray(batch.env_ids)[refused == code].tolist()
                log.warning("refused the rows of env ids %s: %s; their actors are told and the other rows of the "
                            "batch are served (logged once per cause)", env_ids, cause)
        return PartialAnswer(actions, [causes[int(code)] if code else "" for code in refused])

    # -- training (training thread) ------------------------------------------------------------------------
    def _train_loop(self) -> None:
        run = self.config.run
        try:
            while not self._stop.is_set() and not self._budget_spent():
                if not self._train_gate.is_set():
                    self._wait_at_gate()
                    continue
                batch, weights, indices, env_ids = self.source.next_batch()
                result = self.trainer.step(batch, weights)
                version = int(self.policy_version.numpy())  # this step's new weights
                self.history.record(version)
                self.source.after_step(indices, result.priorities)
                metrics = {k: float(v) for k, v in result.metrics.items()}
                skipped = int(metrics.pop("learner/skipped_updates", 0))  # the run's total is self.skips.total
                # A step with a skipped update keeps its metrics out of the summaries: they may be NaN and would
                # poison the means. Its checkpoint is still due (the weights are those of the applied updates).
                if not self.skips.record(skipped, self.trainer.schedule.updates_per_batch, metrics,
                                         version, batch, env_ids):
                    if result.priorities is not None:
                        self._last_priorities = result.priorities
                        metrics["replay/mean_priority"] = float(np.mean(result.priorities))
                    with self._lock:
                        self._metrics.add(metrics)
                if time.monotonic() - self._last_checkpoint >= run.tracking.save_checkpoint_secs:
                    self.save_checkpoint()
        except QueueClosed:
            pass
        except SkippedUpdatesError as e:  # surfaced by run(), in one line
            self._train_error = e
        except BaseException as e:  # surfaced by run()
            log.exception("training thread failed")
            self._train_error = e
        finally:
            self._done.set()
            self._episodes_arrived.set()

    def _wait_at_gate(self) -> None:
        """Training thread: waits (without training) while the run loop holds the gate, or until stopped."""
        self._train_paused.set()
        try:
            while not self._train_gate.wait(0.05) and not self._stop.is_set():
                pass
        finally:
            self._train_paused.clear()

    def _budget_spent(self) -> bool:
        """The run's train steps are done (the original's rule: the frame budget over the frames a step accounts
        for); with a replay feed, also when its env frames are. A replay's warm-up frames (those before it holds
        ``replay_buffer_min_size`` sequences) are accounted by no train step, so a run counting steps alone went on
        past its budget by all of them: 11.6K frames for a budget of 8K (docs/deviations.md)."""
        if int(self.policy_version.numpy()) >= self.total_train_steps:
            return True
        return self.agent.feed.replays and self.env_frames >= self.config.run.total_environment_frames

    def save_checkpoint(self) -> Optional[str]:
        """Writes a checkpoint; returns its path, or None when a variable was not finite (nothing written)."""
        with self._lock:
            self.env_frames_var.assign(self.env_frames)
        path = self.checkpoints.save(int(self.policy_version.numpy()))
        self._last_checkpoint = time.monotonic()
        return path

    def _maybe_save_best(self) -> None:
        """Keeps the weights of the best window of episodes so far in checkpoints/best (see BestCheckpoint): the
        mean of the last 20 episodes as they arrive, saved with the kept weights nearest to the version that
        played them (the median of their middle versions; the latest kept weights when a version is unknown)."""
        log_ = self.episode_log
        eval_ = self._report_eval
        version_now = int(self.policy_version.numpy())
        span = log_.window_policy_versions(eval_)
        if span is not None:  # keep snapshots that reach back over about two windows
            self.history.set_span(version_now - span[0])
        mean = log_.window_return(eval_)
        if mean <= self.best.value or self._best_confirmed:
            return
        wanted = log_.window_policy_version(eval_)
        found = self.history.nearest(version_now if wanted is None else wanted)
        if found is None:  # never: the history holds the initial (or restored) weights from the start
            return
        version, weights = found
        with self._lock:
            frames = self.env_frames
        path = self.best.maybe_save(mean, version, log_.window_end_frames(eval_), log_.window, eval_,
                                    saved_at_frames=frames, weights=weights, window_versions=span)
        if path:
            log.info("new best checkpoint %s: mean return %.2f over %d episodes (policy version %d)", path, mean,
                     log_.window, version)

    # -- main loop -------------------------------------------------------------------------------------------
    def start(self) -> int:
        """Starts serving and training; returns the bound port."""
        self.port = self.server.start()
        self.episode_log = summaries_lib.EpisodeLog(self.config.run.tracking.logdir)
        self.writer = summaries_lib.SummaryWriter(self.config.run.tracking.logdir)
        self.writer.text("learner/devices", self.devices.describe(), step=self.env_frames)
        run = self.config.run
        if run.tracking.wandb_project:
            tracking = run.tracking
            self.tracker = WandbTracker(tracking.logdir, tracking.wandb_project,
                                        json.loads(public_config(self.config).to_json()),
                                        entity=tracking.wandb_entity, mode=tracking.wandb_mode)
        self._train_thread = threading.Thread(target=self._train_loop, name="training", daemon=True)
        self._train_thread.start()
        if run.tracking.video_period_secs > 0:
            from seed_rl.envs import create_environment

            self.videos = play_lib.PeriodicVideo(
                self.agent, lambda: create_environment(self.config.env, VIDEO_ENV_ID),
                os.path.join(run.tracking.logdir, "videos"), run.tracking.video_period_secs, lambda: self.env_frames,
                self.config.env.num_action_repeats)
            self.videos.start()
        return self.port

    def stop(self) -> None:
        self._stop.set()

    def run(self, stop_event: Optional[threading.Event] = None) -> None:
        """Trains until the budget is spent or stop() is called; always cleans up and saves a checkpoint."""
        run = self.config.run
        if not hasattr(self, "_train_thread"):
            self.start()
        resumed = f", resumed from {self.restored_from}" if self.restored_from else ""
        print(f"seed_rl learner: {self.config.agent_name} on {self.config.env.family}:{self.config.env.name}, "
              f"{self.num_envs} envs, listening on port {self.port} of "
              f"{run.transport.server_address.rsplit(':', 1)[0]} "
              f"({self.server.server_kind} gRPC server), run directory {run.tracking.logdir}{resumed}",
              flush=True)
        print(f"seed_rl learner: devices: {self.devices.describe()}", flush=True)
        frame_rate = summaries_lib.RateMeter(self.env_frames)
        step_rate = summaries_lib.RateMeter(float(self.policy_version.numpy()))
        last_summary = time.monotonic()
        finished = False  # the budget is spent or the target reached (not stopped, not failed)
        reason = "budget"
        try:
            while not self._done.is_set():
                # Woken as episodes end (at most BEST_CHECK_PERIOD_S apart): the target and the best checkpoint
                # read the window the moment its episodes arrive; the best saves the version that played it.
                self._episodes_arrived.wait(timeout=min(1.0, run.tracking.summary_period_secs))
                self._episodes_arrived.clear()
                if self._stop.is_set() or (stop_event is not None and stop_event.is_set()):
                    break
                if self._drain_episodes():
                    self._maybe_save_best()
                    if self._target_reached() and self._target_confirmed():
                        finished, reason = True, "target"
                        break
                if time.monotonic() - last_summary >= run.tracking.summary_period_secs:
                    last_summary = time.monotonic()
                    self._write_summaries(frame_rate, step_rate)
                self._done.wait(BEST_CHECK_PERIOD_S)
            else:  # the training thread ended: the budget is spent, or it failed, or stop() ended it
                # stop() (Ctrl-C, SIGTERM) also ends the training thread, which may wake this loop before it sees
                # the stop: only a spent budget finishes the run (a stopped one resumes).
                finished = self._train_error is None and self._inference_error is None and self._budget_spent()
        finally:
            self.finished = finished
            self._shutdown(finished=finished)
            if finished:  # a rerun of the same command says so instead of starting again
                resume_lib.record_finished(run.tracking.logdir, self.env_frames, reason,
                                           run.total_environment_frames, run.target_return)
        if isinstance(self._train_error, SkippedUpdatesError):
            raise self._train_error  # its one line is the whole story (the CLI prints it alone)
        if self._train_error is not None:
            raise RuntimeError("the training thread failed") from self._train_error
        if self._inference_error is not None:
            raise RuntimeError(
                f"the inference step failed {MAX_CONSECUTIVE_INFERENCE_FAILURES} times in a row: "
                f"{type(self._inference_error).__name__}: {self._inference_error}") from self._inference_error

    @property
    def _report_eval(self) -> bool:
        """With eval envs, the target and the status line use their returns (as the original's eval/ curves)."""
        return self.config.run.num_eval_envs > 0

    def _target_reached(self) -> bool:
        target = self.config.run.target_return
        log_ = self.episode_log
        return bool(target) and log_.window_return(self._report_eval) >= target

    def _target_confirmed(self) -> bool:
        """Whether a training window at the target stops the run: at once without ``--target_eval_episodes``;
        with it, when a greedy evaluation of the weights of this moment (training paused meanwhile) reaches the
        target too. Then training stays paused, so the final and the best checkpoints hold those weights. A check
        that fails lets training go on, and the next one waits for a new window of episodes."""
        run = self.config.run
        log_ = self.episode_log
        kind = "evaluation episodes" if self._report_eval else "episodes"
        window = (f"mean of the last {log_.recent_count(self._report_eval)} {kind}: "
                  f"{log_.window_return(self._report_eval):.1f}")
        if run.target_eval_episodes <= 0 or self._greedy_check_failed:
            print(f"seed_rl learner: target return {run.target_return} reached ({window})", flush=True)
            return True
        if log_.total < self._next_target_check:
            return False
        self._next_target_check = log_.total + log_.window
        try:
            greedy = self._greedy_check(run.target_eval_episodes)
        except Exception as e:  # an env the learner cannot make, say: the window alone judges, as without the flag
            self._train_gate.set()
            print(f"seed_rl learner: the greedy check of the target failed ({type(e).__name__}: {e}); the training "
                  f"window alone stops the run", flush=True)
            self._greedy_check_failed = True
            return self._target_confirmed()
        if greedy is None:
            return False
        mean, count, version, frames = greedy
        if mean >= run.target_return:
            print(f"seed_rl learner: target return {run.target_return} reached ({window}; greedy evaluation of "
                  f"policy version {version}: {mean:.1f} over {count} episodes)", flush=True)
            self._save_confirmed_best(mean, count, version, frames)
            return True
        print(f"seed_rl learner: target candidate at {frames:,d} frames ({window}) played {mean:.1f} "
              f"greedily over {count} episodes, under the target; training on", flush=True)
        self._train_gate.set()
        return False

    def _greedy_check(self, num_episodes: int) -> Optional[tuple[float, int, int, int]]:
        """Pauses training and plays ``num_episodes`` greedy episodes with the live weights; returns (mean return,
        episodes played, policy version, env frames when training paused), training still paused, or None
        (training resumed) when training did not pause in time or no episode ended within
        ``GREEDY_CHECK_SECONDS``."""
        self._train_gate.clear()
        if not self._train_paused.wait(GREEDY_CHECK_SECONDS) and not self._done.is_set():
            self._train_gate.set()
            log.warning("the greedy check of the target was skipped: training did not pause within %.0f s",
                        GREEDY_CHECK_SECONDS)
            return None
        version = int(self.policy_version.numpy())
        with self._lock:
            frames = self.env_frames
        envs = play_lib.eval_envs(num_episodes)  # side by side, one batched policy step for all
        if len(self._greedy_envs) < envs:  # made once, kept for the next checks
            self._greedy_envs += play_lib.make_envs(self.config.env, GREEDY_CHECK_ENV_ID + len(self._greedy_envs),
                                                    envs - len(self._greedy_envs))
        returns = play_lib.play_episodes(self.agent, play_lib.policy_step(self.agent, greedy=True),
                                         self._greedy_envs[:envs], num_episodes, max_seconds=GREEDY_CHECK_SECONDS)
        if not returns:
            self._train_gate.set()
            log.warning("the greedy check of the target ended no episode within %.0f s", GREEDY_CHECK_SECONDS)
            return None
        return float(np.mean(returns)), len(returns), version, frames

    def _save_confirmed_best(self, greedy_mean: float, episodes: int, version: int, frames: int) -> None:
        """The weights that passed the greedy check (at ``frames``) become the best checkpoint, whatever window
        came before."""
        log_ = self.episode_log
        # Training is paused: the live weights are those of ``version``, the ones the greedy check played.
        weights = [np.array(v.numpy(), copy=True) for v in self.history.variables]
        self.best.save(log_.window_return(self._report_eval), version, log_.window_end_frames(self._report_eval),
                       log_.window, self._report_eval, saved_at_frames=frames,
                       greedy=(greedy_mean, episodes), weights=weights,
                       window_versions=log_.window_policy_versions(self._report_eval))
        self._best_confirmed = True

    def _drain_episodes(self) -> bool:
        """Writes the episodes that ended since the last call; returns whether there were any."""
        episodes = []
        while self._episodes:
            episodes.append(self._episodes.popleft())
        if episodes:
            self.episode_log.write(episodes)
            self.writer.episodes(episodes)
            if self.tracker is not None:
                self.tracker.episodes(episodes)
        return bool(episodes)

    def _write_summaries(self, frame_rate, step_rate) -> None:
        with self._lock:
            metrics = self._metrics.pop()
            frames = self.env_frames
        steps = int(self.policy_version.numpy())
        fps = frame_rate.rate(frames)
        steps_per_sec = step_rate.rate(steps)
        transport = self.server.stats()
        metrics.update({
            "learner/env_frames_per_sec": fps,
            "learner/train_steps_per_sec": steps_per_sec,
            # Frames the learner accounts for per second (R2D2: inserted sequences; V-trace: consumed unrolls).
            "learner/trained_frames_per_sec": steps_per_sec * self.frames_per_train_step,
            "learner/train_steps": steps,
            "learner/queue_depth": self.queue.qsize(),
            "learner/skipped_updates": self.skips.total,
            "learner/refused_rows": self.refused_rows,
            "episode/mean_return_last_20": self.episode_log.mean_recent_return(),
            "eval/mean_return_last_20": self.episode_log.mean_recent_return(eval=True),
        })
        metrics.update(self.source.stats())
        metrics.update({f"transport/{k}": v for k, v in transport.items()
                        if isinstance(v, (int, float))})
        self.writer.scalars(metrics, step=frames)
        if self.tracker is not None:
            self.tracker.scalars(metrics, frames)
        self.status.update(summaries_lib.format_status(
            frames, fps, self.episode_log.mean_recent_return(self._report_eval),
            float(transport.get("mean_batch_fill", 0.0)),
            steps, self.queue.qsize(), self.queue.capacity, self.episode_log.total,
            window_episodes=self.episode_log.recent_count(self._report_eval),
            elapsed_s=time.time() - self._start_time, budget_frames=self.config.run.total_environment_frames,
            skipped_updates=self.skips.total, refused_rows=self.refused_rows))

    def _shutdown(self, finished: bool = False) -> None:
        self._stop.set()
        self.queue.close()
        self.server.stop(grace=1.0, finished=finished)  # finished: the actors are told to exit
        self._train_thread.join(timeout=60)
        if self.videos is not None:
            self.videos.stop()
            if self.videos.written:
                print(f"seed_rl learner: {len(self.videos.written)} training videos in "
                      f"{os.path.dirname(self.videos.written[0])} (the last: "
                      f"{os.path.basename(self.videos.written[-1])})", flush=True)
        self._drain_episodes()
        self.status.finish()
        eval_hint = f"seed-rl eval --logdir={shlex.quote(self.config.run.tracking.logdir)}"
        path = self.save_checkpoint()
        if path is None:
            latest = self.checkpoints.manager.latest_checkpoint
            kept = f"the latest is still {latest}" if latest else "this run has none"
            print(f"seed_rl learner: no checkpoint written (variables not finite); {kept}", flush=True)
        else:
            print(f"seed_rl learner: saved checkpoint {path} at {self.env_frames:,d} frames, "
                  f"{int(self.policy_version.numpy())} train steps (the latest; {eval_hint})",
                  flush=True)
        self._maybe_save_best()
        best = self.best.record
        if best:
            kind = "evaluation episodes" if best["eval_episodes"] else "episodes"
            greedy = (f"; greedy evaluation at the target: {best['greedy_mean_return']:.1f} over "
                      f"{best['greedy_episodes']} episodes" if "greedy_mean_return" in best else "")
            print(f"seed_rl learner: best checkpoint {os.path.join(self.best.directory, best['path'])}: mean return "
                  f"{best['mean_return']:.2f} over {best['episodes']} consecutive {kind} at "
                  f"{best['env_frames']:,d} frames{greedy} ({eval_hint} --checkpoint=best)", flush=True)
        try:
            export_saved_model(self.agent, os.path.join(self.config.run.tracking.logdir, "saved_model"),
                               self.observation_spec)
        except Exception as e:  # never lose the checkpoint because the export failed
            log.warning("SavedModel export failed: %s", e)
        for env in self._greedy_envs:
            env.close()
        self.episode_log.close()
        self.writer.close()
        png = summaries_lib.plot_learning_curve(self.config.run.tracking.logdir)
        if png:
            print(f"seed_rl learner: learning curve written to {png}", flush=True)
        if self.tracker is not None:
            if png:
                self.tracker.image("learning_curve", png)
            self.tracker.finish()
        if not (finished and self.closing_line_follows):
            print(f"seed_rl learner: {self._summary_line(finished)}", flush=True)

    def _summary_line(self, finished: bool) -> str:
        """One closing line: how the run ended, its frames and time, the last window and the best one."""
        elapsed = time.time() - self._start_time
        kind = "evaluation episodes" if self._report_eval else "episodes"
        last = self.episode_log.mean_recent_return(self._report_eval)
        count = self.episode_log.recent_count(self._report_eval)
        line = (f"{'finished' if finished else 'stopped'} after {self.env_frames:,d} env frames in "
                f"{elapsed / 60:.1f} min ({self.episode_log.total:,d} episodes); "
                + (f"mean return of the last {count} {kind}: {last:.1f}" if count else f"no {kind} ended"))
        best = self.best.record
        if best:
            line += f"; best window {best['mean_return']:.1f} at {best['env_frames']:,d} frames"
        return line

    @property
    def done(self) -> bool:
        return self._done.is_set()

