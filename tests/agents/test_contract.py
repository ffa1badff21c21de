"""The agent contract suite: what the learner, the SavedModel export and ``seed-rl eval`` rely on, checked for
every registered agent on the kinds of specs it takes: a vector observation with discrete actions, an image
observation with discrete actions, a vector observation with continuous actions in [-1, 1].

A new agent is tested by being registered (``seed_rl.agents.register_agent``) with a preset per kind it takes:
``classic_<name>`` (vector), ``atari_<name>`` (image), ``mujoco_<name>`` (continuous); the suite takes the agent's
hyperparameters from those presets and builds its random batches from the specs alone. A kind an agent does not
take is listed in ``NOT_TAKEN``, and the agent must refuse it with a clear error.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from seed_rl import agents as agents_lib
from seed_rl.configs import PRESETS, get_preset
from seed_rl.learner.training import Trainer
from seed_rl.ops.specs import env_output_spec
from seed_rl.types import ArraySpec, EnvOutput, LossResult, QueueFeed, ReplayFeed, Unroll, UpdateSchedule

SPECS = {
    # Observation spec, action spec, preset family (whose preset gives the agent's hyperparameters).
    "vector": (ArraySpec((4,), "float32"), ArraySpec((), "int32", num_values=3), "classic"),
    "image": (ArraySpec((84, 84, 1), "uint8"), ArraySpec((), "int32", num_values=6), "atari"),
    "continuous": (ArraySpec((5,), "float32"), ArraySpec((2,), "float32", minimum=-1.0, maximum=1.0), "mujoco"),
}
NOT_TAKEN = {
    # (agent, kind): what the agent's refusal says.
    ("r2d2", "continuous"): "discrete action space",
    ("sac", "vector"): "takes continuous actions",
    ("sac", "image"): "vector observation",
}
BATCH_COUPLED = {
    # Agents whose loss normalises over the minibatch's steps, so that a batch's loss is not the mean of its
    # halves' (under --strategy=mirrored each replica normalises over its slice; docs/devices.md).
    "vmpo": "V-MPO's top half of the advantages and its softmax weights are over the minibatch",
}
CASES = [(agent, kind) for agent in agents_lib.agent_names() for kind in SPECS
         if (agent, kind) not in NOT_TAKEN and f"{SPECS[kind][2]}_{agent}" in PRESETS]
# The default suite keeps the image cases of the tests that train or compute a loss; the image cases of the
# checkpoint and seed tests (two Atari networks built eagerly each, CI's time) run with the slow ones.
IMAGE_SLOW = [pytest.param(case, marks=pytest.mark.slow) if case[1] == "image" else case for case in CASES]
B = 3  # env rows / sequences
T = 4  # unroll length of the random batches
NUM_ENVS = 8


def _ids(case):
    return f"{case[0]}-{case[1]}"


def _build(agent_name: str, kind: str, seed: int = 0):
    obs_spec, act_spec, family = SPECS[kind]
    preset = f"{family}_{agent_name}"
    assert preset in PRESETS, f"agent {agent_name!r} has no preset {preset!r} for the contract suite"
    keras.utils.set_random_seed(seed)  # Keras 3 initializers draw from Keras's seed, not TensorFlow's
    return agents_lib.make_agent(agent_name, get_preset(preset).agent, obs_spec, act_spec, num_envs=NUM_ENVS,
                                 num_eval_envs=1)


@pytest.fixture(scope="module")
def built():
    cache: dict = {}

    def get(agent_name, kind):
        if (agent_name, kind) not in cache:
            cache[agent_name, kind] = _build(agent_name, kind)
        return cache[agent_name, kind]

    return get


def _random_like(spec: tf.TensorSpec, shape, rng: np.random.Generator):
    dtype = spec.dtype
    if dtype == tf.bool:
        return tf.constant(rng.random(shape) < 0.2)
    if dtype == tf.uint8:
        return tf.constant(rng.integers(0, 256, shape), tf.uint8)
    if dtype.is_integer:
        return tf.constant(rng.integers(0, 50, shape), dtype)
    return tf.constant(rng.normal(size=shape), dtype)


def _env_outputs(obs_spec, shape, rng) -> EnvOutput:
    spec = env_output_spec(obs_spec)
    out = tf.nest.map_structure(lambda s: _random_like(s, [*shape, *s.shape[1:]], rng), spec)
    abandoned = tf.logical_and(out.abandoned, out.done)  # abandoned implies done
    return out._replace(abandoned=abandoned)


def _actions(act_spec: ArraySpec, shape, rng):
    if act_spec.num_values > 0:
        return tf.constant(rng.integers(0, act_spec.num_values, [*shape, *act_spec.shape]), tf.int32)
    return tf.constant(rng.uniform(-1.0, 1.0, [*shape, *act_spec.shape]), tf.float32)


def _assert_valid_actions(act_spec: ArraySpec, action: np.ndarray, batch_shape) -> None:
    assert action.shape == (*batch_shape, *act_spec.shape), action.shape
    assert action.dtype == np.dtype(act_spec.dtype), action.dtype
    if act_spec.num_values > 0:
        assert np.all((action >= 0) & (action < act_spec.num_values))
    else:
        assert np.all(np.isfinite(action))
        assert np.all((action >= act_spec.minimum) & (action <= act_spec.maximum))


def _random_unroll(agent, kind: str, rng, batch_major: bool = False, batch: int = B) -> Unroll:
    """A time-major [L, B, ...] (or batch-major [B, L, ...]) batch from the specs; L = T + 1 + overlap."""
    B = batch  # noqa: N806 - the module's batch size, overridden
    obs_spec, act_spec, _ = SPECS[kind]
    length = T + 1 + agent.num_overlapping_steps
    outputs_spec = agent.agent_output_spec()
    agent_outputs = tf.nest.map_structure(lambda s: _random_like(s, [length, B, *s.shape[1:]], rng), outputs_spec)
    agent_outputs = agent_outputs._replace(action=_actions(act_spec, [length, B], rng))
    env_outputs = _env_outputs(obs_spec, [length, B], rng)
    if act_spec.num_values <= 0:
        # Continuous actions: random distribution parameters and actions give importance ratios of e^100s; the
        # behaviour's outputs are the agent's own (feed-forward agents: the state is ()).
        assert agent.initial_state(1) == ()
        flat = tf.nest.map_structure(lambda t: tf.reshape(t, [length * B, *t.shape[2:]]), env_outputs)
        acted, _ = agent.act(tf.reshape(_actions(act_spec, [length, B], rng), [length * B, *act_spec.shape]),
                             flat, ())
        agent_outputs = tf.nest.map_structure(lambda t: tf.reshape(t, [length, B, *t.shape[1:]]), acted)
    unroll = Unroll(agent_state=agent.initial_state(B), prev_actions=_actions(act_spec, [length, B], rng),
                    env_outputs=env_outputs, agent_outputs=agent_outputs,
                    policy_version=tf.zeros([length, B], tf.int64))
    if batch_major:
        def swap(t):
            return tf.transpose(t, [1, 0, *range(2, t.shape.rank)])
        unroll = unroll._replace(prev_actions=swap(unroll.prev_actions),
                                 env_outputs=tf.nest.map_structure(swap, unroll.env_outputs),
                                 agent_outputs=tf.nest.map_structure(swap, unroll.agent_outputs),
                                 policy_version=swap(unroll.policy_version))
    return unroll


def _act(agent, kind, rng, env_ids=None, state=None):
    obs_spec, act_spec, _ = SPECS[kind]
    state = agent.initial_state(B) if state is None else state
    return agent.act(_actions(act_spec, [B], rng), _env_outputs(obs_spec, [B], rng), state, env_ids)


def _same_structure_and_shapes(a, b):
    tf.nest.assert_same_structure(a, b)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        assert x.shape == y.shape and x.dtype == y.dtype


def test_every_registered_agent_is_covered():
    assert set(agents_lib.agent_names()) >= {"vtrace", "r2d2", "ppo", "sac"}
    for name in agents_lib.agent_names():
        assert any(agent == name for agent, _ in CASES), f"agent {name!r} takes none of the suite's spec kinds"
    assert set(kind for _, kind in CASES) == set(SPECS)


@pytest.mark.parametrize("case", sorted(NOT_TAKEN), ids=_ids)
def test_specs_an_agent_does_not_take_are_refused_clearly(case):
    agent_name, kind = case
    obs_spec, act_spec, _ = SPECS[kind]
    presets = [p for p in (f"classic_{agent_name}", f"mujoco_{agent_name}", f"atari_{agent_name}") if p in PRESETS]
    with pytest.raises(ValueError, match=NOT_TAKEN[case]):
        agents_lib.make_agent(agent_name, get_preset(presets[0]).agent, obs_spec, act_spec, num_envs=NUM_ENVS)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_declarations(case, built):
    agent = built(*case)
    assert isinstance(agent.feed, (QueueFeed, ReplayFeed))
    assert isinstance(agent.schedule, UpdateSchedule)
    assert isinstance(agent.num_overlapping_steps, int) and agent.num_overlapping_steps >= 0
    # Training single transitions is declared, and an agent that declares it has the methods a split schedule calls.
    assert isinstance(agent.trains_transitions, bool)
    assert agent.trains_transitions or not agent.schedule.splits_transitions
    if agent.trains_transitions:
        assert callable(agent.prepare_transitions) and callable(agent.transition_loss)
    trainable = {id(v) for v in agent.trainable_variables}
    assert trainable, "an agent with nothing to train"
    assert agent.policy_variables and all(isinstance(v, tf.Variable) for v in agent.policy_variables)
    assert all(np.isfinite(v.numpy()).all() for v in agent.policy_variables)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_initial_state_has_a_batch_dimension(case, built):
    agent = built(*case)
    one, five = agent.initial_state(1), agent.initial_state(5)
    tf.nest.assert_same_structure(one, five)
    for a, b in zip(tf.nest.flatten(one), tf.nest.flatten(five)):
        assert a.shape[0] == 1 and b.shape[0] == 5 and a.shape[1:] == b.shape[1:]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_act_on_a_batch_matches_the_declared_specs(case, built):
    agent = built(*case)
    _, act_spec, _ = SPECS[case[1]]
    rng = np.random.default_rng(0)
    for env_ids in (tf.constant([0, 3, NUM_ENVS - 1], tf.int32), None):  # training envs, an eval env; no ids
        outputs, state = _act(agent, case[1], rng, env_ids)
        spec = agent.agent_output_spec(B)
        tf.nest.assert_same_structure(outputs, spec)
        for t, s in zip(tf.nest.flatten(outputs), tf.nest.flatten(spec)):
            assert s.is_compatible_with(t), (t, s)
        _same_structure_and_shapes(state, agent.initial_state(B))
        _assert_valid_actions(act_spec, outputs.action.numpy(), (B,))
        assert all(np.isfinite(x.numpy()).all() for x in tf.nest.flatten(outputs) if x.dtype.is_floating)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_greedy_action_is_valid_and_independent_of_the_sampling(case, built):
    agent = built(*case)
    obs_spec, act_spec, _ = SPECS[case[1]]
    rng = np.random.default_rng(1)
    inputs = (_actions(act_spec, [B], rng), _env_outputs(obs_spec, [B], rng), agent.initial_state(B))
    env_ids = tf.constant([0, 1, 2], tf.int32)  # training envs: the most exploratory acting policy
    greedy = []
    for seed in (11, 12):
        tf.random.set_seed(seed)
        outputs, _ = agent.act(*inputs, env_ids)
        action = agent.greedy_action(outputs)
        assert action.dtype == outputs.action.dtype and action.shape == outputs.action.shape
        greedy.append(action.numpy())
    _assert_valid_actions(act_spec, greedy[0], (B,))
    # Whatever the acting policy sampled, the greedy action of the same inputs is the same.
    np.testing.assert_array_equal(greedy[0], greedy[1])


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_loss_is_finite_and_gradients_reach_every_trainable_variable(case, built):
    agent = built(*case)
    unroll = _random_unroll(agent, case[1], np.random.default_rng(2))
    weights = tf.constant([1.0, 0.5, 2.0]) if isinstance(agent.feed, ReplayFeed) else None
    with tf.GradientTape() as tape:
        result = agent.loss(unroll, weights)
    assert isinstance(result, LossResult)
    assert result.loss.shape == [] and np.isfinite(float(result.loss))
    assert result.metrics and all(v.shape == [] and np.isfinite(float(v)) for v in result.metrics.values())
    if isinstance(agent.feed, ReplayFeed):
        priorities = result.priorities.numpy()
        assert priorities.shape == (B,) and np.all(np.isfinite(priorities)) and np.all(priorities >= 0)
    grads = tape.gradient(result.loss, agent.trainable_variables)
    missing = [v.name for v, g in zip(agent.trainable_variables, grads) if g is None]
    assert not missing, f"no gradient reaches {missing}"
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    assert sum(float(tf.reduce_sum(tf.abs(g))) for g in grads) > 0


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_loss_is_a_mean_over_the_sequences(case, built):
    """The loss of a batch is the mean of its halves' losses, and so are its gradients: what lets the learner's
    device layer train a batch as replicas that each take a slice (seed_rl/learner/devices.py)."""
    if case[0] in BATCH_COUPLED:
        pytest.skip(BATCH_COUPLED[case[0]])
    agent = built(*case)
    unroll = _random_unroll(agent, case[1], np.random.default_rng(5), batch=4)
    # No truncated episodes: a mean over the valid steps of a slice weighs its sequences by their valid steps.
    unroll = unroll._replace(env_outputs=unroll.env_outputs._replace(
        abandoned=tf.zeros_like(unroll.env_outputs.abandoned)))
    weights = tf.constant([1.0, 0.5, 2.0, 0.25]) if isinstance(agent.feed, ReplayFeed) else None

    state = _checkpointed_variables(agent.checkpoint_items())
    saved = [v.numpy() for v in state]

    def loss_and_grads(rows):
        part = Unroll(agent_state=tf.nest.map_structure(lambda t: t[rows], unroll.agent_state),
                      **{name: tf.nest.map_structure(lambda t: t[:, rows], getattr(unroll, name))
                         for name in ("prev_actions", "env_outputs", "agent_outputs", "policy_version")})
        with tf.GradientTape() as tape:
            loss = agent.loss(part, None if weights is None else weights[rows]).loss
        grads = [g.numpy() for g in tape.gradient(loss, agent.trainable_variables)]
        for v, value in zip(state, saved):  # a loss may update statistics (normalisers): each call starts equal
            v.assign(value)
        return float(loss), grads

    tf.random.set_seed(1)
    once = loss_and_grads(slice(0, 4))[0]
    tf.random.set_seed(2)
    stochastic = once != loss_and_grads(slice(0, 4))[0]  # a loss that samples actions (SAC)
    if not stochastic:
        whole, whole_grads = loss_and_grads(slice(0, 4))
        first, first_grads = loss_and_grads(slice(0, 2))
        second, second_grads = loss_and_grads(slice(2, 4))
        np.testing.assert_allclose(whole, (first + second) / 2, rtol=1e-4, atol=1e-6)
        for g, a, b in zip(whole_grads, first_grads, second_grads):
            np.testing.assert_allclose(g, (a + b) / 2, rtol=1e-3, atol=1e-6)
        return

    # A sampling loss is a mean over the sequences in expectation: compare averages over many draws (a sum over
    # the sequences would be off by a factor of 2 here, far outside these bounds). Compiled: each call draws anew.
    @tf.function(autograph=False)
    def compiled(part):
        with tf.GradientTape() as tape:
            loss = agent.loss(part).loss
        return loss, tape.gradient(loss, agent.trainable_variables)

    def averaged(rows, draws=16):
        part = Unroll(agent_state=tf.nest.map_structure(lambda t: t[rows], unroll.agent_state),
                      **{name: tf.nest.map_structure(lambda t: t[:, rows], getattr(unroll, name))
                         for name in ("prev_actions", "env_outputs", "agent_outputs", "policy_version")})
        losses, grads = [], None
        for _ in range(draws):
            loss, g = compiled(part)
            for v, value in zip(state, saved):
                v.assign(value)
            losses.append(float(loss))
            g = [x.numpy() for x in g]
            grads = g if grads is None else [x + y for x, y in zip(grads, g)]
        return np.mean(losses), np.concatenate([x.ravel() / draws for x in grads])

    whole, whole_grads = averaged(slice(0, 4))
    first, first_grads = averaged(slice(0, 2))
    second, second_grads = averaged(slice(2, 4))
    np.testing.assert_allclose(whole, (first + second) / 2, rtol=0.05)
    halves = (first_grads + second_grads) / 2
    assert np.linalg.norm(whole_grads - halves) < 0.2 * np.linalg.norm(whole_grads)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_initial_priorities_of_a_replay_feed(case, built):
    agent = built(*case)
    if not isinstance(agent.feed, ReplayFeed):
        assert agent.feed == QueueFeed()
        return
    assert agent.feed.capacity >= agent.feed.min_size >= 0 and agent.feed.insertions_per_step(32) >= 1
    if agent.feed.initial_priorities is None:
        return
    unrolls = _random_unroll(agent, case[1], np.random.default_rng(3), batch_major=True)
    p = agent.feed.initial_priorities(unrolls).numpy()
    assert p.shape == (B,) and np.all(np.isfinite(p)) and np.all(p >= 0)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_one_training_step_changes_the_weights(case):
    agent = _build(*case)
    optimizer = agent.make_optimizer(100)
    trainer = Trainer(agent, optimizer, tf.Variable(0, dtype=tf.int64))
    before = [v.numpy().copy() for v in agent.trainable_variables]
    rows = B * agent.schedule.minibatches  # the schedule's minibatches split the batch's sequences
    unroll = _random_unroll(agent, case[1], np.random.default_rng(4), batch_major=True, batch=rows)
    weights = np.ones([rows], np.float32) if isinstance(agent.feed, ReplayFeed) else None
    result = trainer.step(unroll, weights)
    assert all(np.isfinite(float(v)) for v in result.metrics.values())
    assert (result.priorities is not None) == isinstance(agent.feed, ReplayFeed)
    after = [v.numpy() for v in agent.trainable_variables]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))
    assert all(np.isfinite(a).all() for a in after)
    assert int(trainer.policy_version.numpy()) == 1
    assert agent.update_targets(tf.constant(1, tf.int64)).dtype == tf.bool


def _checkpointed_variables(items: dict) -> list:
    """Every tf.Variable the checkpoint items hold (lists of variables, modules, variables), in a fixed order."""
    out = []
    for key in sorted(items):
        item = items[key]
        if isinstance(item, tf.Variable):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.extend(item)
        else:
            out.extend(item.variables)
    return out


@pytest.mark.parametrize("case", IMAGE_SLOW, ids=_ids)
def test_checkpoint_items_round_trip(case, tmp_path):
    a = _build(*case, seed=1)
    b = _build(*case, seed=2)
    for v in _checkpointed_variables(b.checkpoint_items()):
        v.assign(v + tf.ones_like(v) if v.dtype.is_floating else v)  # differ from `a` everywhere
    saved = _checkpointed_variables(a.checkpoint_items())
    saved_ids = {id(v) for v in saved}
    # What training changes and what acting reads is all in the checkpoint (Keras variables wrap a tf.Variable).
    for v in [*a.trainable_variables, *a.policy_variables]:
        inner = getattr(v, "value", None)
        raw = inner if isinstance(inner, tf.Variable) else v
        assert id(raw) in saved_ids, f"{v.name} is not checkpointed"
    path = tf.train.Checkpoint(**a.checkpoint_items()).save(str(tmp_path / "ckpt"))
    tf.train.Checkpoint(**b.checkpoint_items()).restore(path).assert_existing_objects_matched()
    restored = _checkpointed_variables(b.checkpoint_items())
    assert len(restored) == len(saved)
    for x, y in zip(saved, restored):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    outputs_a, _ = _act(a, case[1], np.random.default_rng(5))
    outputs_b, _ = _act(b, case[1], np.random.default_rng(5))
    np.testing.assert_array_equal(a.greedy_action(outputs_a).numpy(), b.greedy_action(outputs_b).numpy())


@pytest.mark.parametrize("case", IMAGE_SLOW, ids=_ids)
def test_deterministic_under_a_seed(case):
    runs = []
    for _ in range(2):
        agent = _build(*case, seed=7)
        outputs, _ = _act(agent, case[1], np.random.default_rng(6), tf.constant([0, 1, 2], tf.int32))
        runs.append(([v.numpy() for v in agent.policy_variables], tf.nest.map_structure(np.asarray, outputs)))
    for x, y in zip(runs[0][0], runs[1][0]):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(tf.nest.flatten(runs[0][1]), tf.nest.flatten(runs[1][1])):
        np.testing.assert_array_equal(x, y)
