"""Preset configurations. Each number says where it comes from.

"original" = google-research/seed_rl at its last functional commit (see docs/deviations.md for where we differ).
"""

from __future__ import annotations

import dataclasses

from seed_rl.agents.policy_gradient.config import AWRConfig, PPOConfig, VMPOConfig
from seed_rl.agents.r2d2.config import R2D2Config
from seed_rl.agents.sac.config import SACConfig
from seed_rl.agents.vtrace.config import VTraceConfig
from seed_rl.config import Config, DevicesConfig, EnvConfig, OptimizerConfig, RunConfig, TrackingConfig
from seed_rl.envs.atari import AtariOptions
from seed_rl.envs.dmlab import DmLabOptions
from seed_rl.envs.football import FootballOptions


def classic_vtrace() -> Config:
    """V-trace on CartPole-v1: the fast default of ./run_local.sh; reaches a mean return >= 400 in a few
    hundred thousand frames on two CPU cores.

    The original has no CartPole preset. Network and optimizer follow its MuJoCo V-trace main file (MLP 2 x 64,
    no LSTM, Adam); tuned here for CartPole: a separate value torso (with a shared torso the value gradients
    of returns up to ~100 swamp the policy and the return plateaus near 200-300), learning rate 1e-3 with the
    original's linear decay (at 2e-3 runs often collapsed after reaching 300-360: docs/presets.md), entropy cost
    0.01, unroll 20, batch 16.
    """
    return Config(
        env=EnvConfig(family="classic", name="CartPole-v1", num_action_repeats=1),
        run=RunConfig(num_actors=2, env_batch_size=16, unroll_length=20, batch_size=16,
                      total_environment_frames=1_000_000, target_return=450.0, target_eval_episodes=10,
                      tracking=TrackingConfig(save_checkpoint_secs=120.0, summary_period_secs=5.0),
                      devices=DevicesConfig(tf_intra_op_threads=1)),
        agent_name="vtrace",
        agent=VTraceConfig(network="mlp", mlp_sizes=(64, 64), lstm_size=0, use_reward_and_action=False,
                           separate_value_network=True, entropy_cost=0.01, discounting=0.99, baseline_cost=0.5,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=1e-3, lr_schedule="linear",
                                                     adam_epsilon=1e-7)),
    )


def classic_ppo() -> Config:
    """PPO on CartPole-v1. The original has no CartPole PPO; the PPO paper's and OpenAI baselines' settings (clip
    0.2, GAE lambda 0.95, Adam 3e-4 with epsilon 1e-5, gradient norm 0.5, value cost 0.5, entropy 0.01, 4 epochs of
    4 minibatches), with the MLP 2 x 64 and separate value torso of classic_vtrace; 32 envs x unroll 32 as in
    classic_vtrace's actors, batch 16 unrolls (512 steps, 4 minibatches of 128)."""
    return Config(
        env=EnvConfig(family="classic", name="CartPole-v1", num_action_repeats=1),
        run=RunConfig(num_actors=2, env_batch_size=16, unroll_length=32, batch_size=16,
                      total_environment_frames=1_000_000, target_return=450.0,
                      tracking=TrackingConfig(save_checkpoint_secs=120.0, summary_period_secs=5.0),
                      devices=DevicesConfig(tf_intra_op_threads=1)),
        agent_name="ppo",
        agent=PPOConfig(network="mlp", mlp_sizes=(64, 64), separate_value_network=True, epochs=4, minibatches=4,
                        optimizer=OptimizerConfig(learning_rate=3e-4, adam_epsilon=1e-5, clip_norm=0.5)),
    )


def atari_ppo() -> Config:
    """PPO on Atari with the PPO paper's Atari settings (3 epochs, clip 0.1, lr 2.5e-4 decayed linearly, entropy
    0.01, value cost 1 -> 0.5 here as OpenAI baselines, rewards clipped to [-1, 1]) and the IMPALA shallow torso
    (feed-forward); unroll 128 as the paper, batch 32 unrolls in 4 minibatches. Not measured on Atari yet."""
    return Config(
        env=_atari_env("Pong"),
        run=RunConfig(num_actors=4, env_batch_size=8, unroll_length=128, batch_size=32,
                      total_environment_frames=200_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name="ppo",
        agent=PPOConfig(network="impala_shallow", lstm_size=0, epsilon=0.1, epochs=3, minibatches=4, max_abs_reward=1.0,
                        optimizer=OptimizerConfig(learning_rate=2.5e-4, lr_schedule="linear", adam_epsilon=1e-5,
                                                  clip_norm=0.5)),
    )


def atari_ppo_fast() -> Config:
    """PPO on Atari sized for two CPU cores, with CleanRL's Atari PPO optimiser and batch size (ppo_atari.py: 1,024
    agent steps per update, clip 0.1, Adam 2.5e-4 eps 1e-5, gradient norm 0.5, entropy 0.01, GAE 0.95, advantages
    computed once per batch and normalised per minibatch of single transitions, 4 stacked frames, the game's
    minimal action set, rewards clipped to [-1, 1]). What differs from CleanRL, and why (docs/presets.md,
    "atari_ppo_fast"): 2 actors x 16 envs with unrolls of 32 (CleanRL: 8 envs x 128 steps), so that inference
    batches are larger and frames cheaper; 2 epochs of 8 minibatches of 128 transitions (CleanRL: 4 of 4 of 256),
    the same 16 updates per batch at half the learner's compute, which on two cores is what limits frames/s;
    GAE bootstraps every 32 steps (CleanRL: 128); SEED's asynchronous actors (they fill the next batch while the
    learner trains, so a batch may be a policy version or two old, where CleanRL's PPO is synchronous); IMPALA's
    shallow torso (as ``atari_ppo`` and ``atari_vtrace_fast``) with Keras' initialisation (CleanRL's is orthogonal:
    ``--initializer=orthogonal``, measured on one seed in docs/presets.md); a constant learning rate (CleanRL's decays linearly
    over 40M frames, to 75% of its start at 10M); the family's PPO losses with the original's ratio bounds
    [1/1.1, 1.1], a value loss of 0.5 x the squared error (CleanRL's weighs it 0.25) and no value clipping (CleanRL
    clips at 0.1; ``--value_clip_eps`` would); no fire-on-reset, and no life-loss episode ends unless
    ``--terminal_on_life_loss`` (the original's Atari env has neither); the 108K-frame episode cap. Measured on Pong
    (docs/presets.md, "atari_ppo_fast")."""
    config = atari_ppo()
    env = config.env
    return dataclasses.replace(
        config,
        env=dataclasses.replace(env, options=dataclasses.replace(env.options, frame_stack=4, full_action_space=False)),
        run=dataclasses.replace(config.run, num_actors=2, env_batch_size=16, unroll_length=32, batch_size=32,
                                total_environment_frames=50_000_000,
                                tracking=TrackingConfig(save_checkpoint_secs=300.0, summary_period_secs=30.0)),
        agent=dataclasses.replace(config.agent, epochs=2, minibatches=8, batch_mode="split",
                                  normalize_advantages=True,
                                  optimizer=dataclasses.replace(config.agent.optimizer, lr_schedule="constant")),
    )


def atari_vtrace() -> Config:
    """V-trace on Atari (Pong by default) with the IMPALA deep ResNet + LSTM 256.

    The original ships no Atari V-trace main file; the learner flags are agents/vtrace/learner.py's defaults
    (unroll 100, batch 32, discount 0.99, baseline cost 0.5, entropy cost 0.00025 -> we use 0.01 as IMPALA's
    Atari experiments, see docs/presets.md), the network and optimizer are dmlab/vtrace_main.py's (ImpalaDeep,
    RMSprop lr 3.19e-4 decay .99 eps .1, linear decay). Atari settings are atari/env.py's with action repeat 4
    (the original's default of 1 freezes observations, see docs/deviations.md) and rewards clipped to [-1, 1]
    as in IMPALA's Atari runs. Unroll length 20 as IMPALA's Atari experiments (Espeholt et al. 2018, table G.1).
    """
    return Config(
        env=_atari_env("Pong"),
        run=RunConfig(num_actors=4, env_batch_size=8, unroll_length=20, batch_size=32,
                      total_environment_frames=200_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="impala_deep", lstm_size=256, use_reward_and_action=True, entropy_cost=0.01,
                           max_abs_reward=1.0, discounting=0.99,
                           optimizer=OptimizerConfig(kind="rmsprop", learning_rate=0.00031866995608948655,
                                                     lr_schedule="linear", rms_decay=0.99, rms_momentum=0.0,
                                                     rms_epsilon=0.1)),
    )


def test_vtrace() -> Config:
    """Tiny V-trace config on a deterministic test env, for smoke tests."""
    return Config(
        env=EnvConfig(family="test", name="correct_action"),
        # smoke tests: no greedy evaluation at the end
        run=RunConfig(num_actors=1, env_batch_size=2, unroll_length=5, batch_size=2, total_environment_frames=2_000,
                      final_eval_episodes=0,
                      tracking=TrackingConfig(save_checkpoint_secs=3600.0, summary_period_secs=1.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="mlp", mlp_sizes=(16,), lstm_size=0, use_reward_and_action=False,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=1e-3, lr_schedule="constant")),
    )


def atari_vtrace_fast() -> Config:
    """V-trace on Atari sized to learn Pong on two CPU cores within a working session (benchmarks/atari_learning.py).

    What differs from ``atari_vtrace`` and why (docs/presets.md): IMPALA's *shallow* network (Espeholt et al. 2018,
    figure 3, left; about a tenth of the deep ResNet's cost per frame) without the LSTM, on the last 4 frames
    stacked in the env (``frame_stack=4``, as the Nature DQN and CleanRL's PPO; a feed-forward core needs the
    motion), the game's minimal action set (6 for Pong instead of 18, as CleanRL and Sample Factory), no
    reward/action inputs (the recurrent core's). Entropy cost 0.01, unroll 20, rewards clipped to [-1, 1],
    discount 0.99 as IMPALA's Atari experiments (table G.1).
    Optimisation as CleanRL's Atari PPO and OpenAI baselines: orthogonal initialisation (gain sqrt(2), policy head
    0.01, value head 1), Adam with learning rate 2.5e-4 and epsilon 1e-5, gradients clipped to a global norm of
    0.5. With Keras' default (glorot) initialisation, Adam at 6e-4 and no clipping, the torso died within a few
    hundred updates: 6.6M frames later its features did not depend on the observation at all (std 1e-7 across
    Pong frames) and the policy stayed uniform (docs/presets.md, "Why atari_vtrace_fast changed"). Constant
    learning rate (a linear decay to 0 needs a fixed horizon, and a time-bounded run has none).
    Batch 4 unrolls of 20 (IMPALA: 32): 80 agent steps per update, as OpenAI baselines' A2C on Atari (16 envs x 5
    steps). 2 actors x 8 envs, double-buffered, keep both cores busy next to the learner.
    """
    env = _atari_env("Pong")
    return Config(
        env=dataclasses.replace(env, options=dataclasses.replace(env.options, frame_stack=4,
                                                                 full_action_space=False)),
        run=RunConfig(num_actors=2, env_batch_size=8, unroll_length=20, batch_size=4, unroll_queue_size=16,
                      total_environment_frames=50_000_000,
                      tracking=TrackingConfig(save_checkpoint_secs=300.0, summary_period_secs=30.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="impala_shallow", lstm_size=0, use_reward_and_action=False, initializer="orthogonal",
                           entropy_cost=0.01, max_abs_reward=1.0, discounting=0.99, baseline_cost=0.5,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=2.5e-4, adam_epsilon=1e-5,
                                                     clip_norm=0.5, lr_schedule="constant")),
    )


def _atari_env(game: str = "Pong") -> EnvConfig:
    # atari/env.py: NoFrameskip-v4, full action set, 30 no-ops, 108K frames. Action repeat 4, not the original's
    # default of 1, which freezes every observation at the reset frame (docs/deviations.md).
    return EnvConfig(family="atari", name=game, num_action_repeats=4,
                     options=AtariOptions(max_random_noops=30, sticky_actions=False, max_episode_frames=108_000))


def atari_r2d2() -> Config:
    """R2D2 on Atari with the defaults of the original's main file and learner flags (agents/r2d2/learner.py,
    atari/r2d2_main.py): batch 64, unroll 100, burn-in 40, replay 100 sequences (min 10), replay ratio 1.5,
    n-step 5, discount 0.997, Adam lr 4.8e-4 eps 1e-3, clip 40, target copy every 2500 steps, stack 4.
    Fits one machine; ``atari_r2d2_gcp`` is the published Google Cloud configuration."""
    return Config(
        env=_atari_env(),
        run=RunConfig(num_actors=4, env_batch_size=8, unroll_length=100, batch_size=64, unroll_queue_size=100,
                      total_environment_frames=1_000_000_000, tracking=TrackingConfig(save_checkpoint_secs=1800.0)),
        agent_name="r2d2",
        agent=R2D2Config(),
    )


def atari_r2d2_fast() -> Config:
    """R2D2 on Atari sized for two CPU cores (benchmarks/atari_learning.py --agent=r2d2); see docs/presets.md.

    The original's network shape (CNN, LSTM, dueling heads, 4 frames stacked on the learner) with IMPALA's shallow
    CNN (16 and 32 channels, dense 256) instead of the Nature CNN (32, 64, 64, dense 512): about a third of the
    cost per frame, and the torso dominates the cost of a train step; half the width elsewhere (LSTM 256, heads
    256), short sequences and small batches (burn-in 8, unroll 20, batch 8; the original 40, 100 and 64) so that a
    two-hour run makes over ten thousand updates instead of about a thousand, a replay of 4000 sequences (min
    500) replayed 4 times, discount 0.99 (0.997 in the original), and a target copy every 400 updates (the
    original's 2500 would copy a handful of times). Adam lr 4.8e-4 eps 1e-3, clip 40, n-step 5, Ape-X epsilons
    over 2 actors x 8 envs as the original.
    """
    env = _atari_env("Pong")
    return Config(
        env=dataclasses.replace(env, options=dataclasses.replace(env.options, full_action_space=False)),
        run=RunConfig(num_actors=2, env_batch_size=8, unroll_length=20, batch_size=8, unroll_queue_size=64,
                      total_environment_frames=50_000_000,
                      tracking=TrackingConfig(save_checkpoint_secs=300.0, summary_period_secs=30.0)),
        agent_name="r2d2",
        agent=R2D2Config(torso="impala_shallow", burn_in=8, lstm_size=256, hidden_size=256, replay_buffer_size=4000,
                         replay_buffer_min_size=500, replay_ratio=4.0, discounting=0.99,
                         update_target_every_n_step=400),
    )


def atari_r2d2_gcp() -> Config:
    """R2D2 on Atari as the original's gcp/train_atari.sh: 32 workers x 20 actors (1 env each), inference batch
    32, batch 64, replay 100K sequences (min 5000), replay ratio 0.75, unroll 80, burn-in 40, lr 1e-4, clip 80,
    30 eval envs (the script's stale ``num_eval_actors``), 50e9 frames. The replay buffer alone needs about 85 GB
    (100K x 121 steps x 84 x 84 bytes): the learner machine was an n1-highmem-32."""
    return Config(
        env=_atari_env(),
        run=RunConfig(num_actors=640, env_batch_size=1, inference_batch_size=32, unroll_length=80, batch_size=64,
                      num_eval_envs=30, unroll_queue_size=100, total_environment_frames=50_000_000_000,
                      tracking=TrackingConfig(save_checkpoint_secs=1800.0)),
        agent_name="r2d2",
        agent=R2D2Config(replay_buffer_size=100_000, replay_buffer_min_size=5000, replay_ratio=0.75, burn_in=40,
                         optimizer=OptimizerConfig(learning_rate=1e-4, adam_epsilon=1e-3, clip_norm=80.0)),
    )


def classic_r2d2() -> Config:
    """R2D2 on CartPole-v1 in minutes: an MLP torso (64) with LSTM 64 and dueling heads of 64, short sequences
    (burn-in 4, unroll 20), a small replay replayed 8 times per sequence, target copy every 50 steps. Not in the
    original; tuned here (see docs/presets.md). Two eval envs
    act with eval_epsilon and report eval/ returns."""
    return Config(
        env=EnvConfig(family="classic", name="CartPole-v1"),
        run=RunConfig(num_actors=2, env_batch_size=8, num_eval_envs=2, unroll_length=20, batch_size=32,
                      unroll_queue_size=64, total_environment_frames=1_000_000, target_return=450.0,
                      tracking=TrackingConfig(save_checkpoint_secs=120.0, summary_period_secs=5.0),
                      devices=DevicesConfig(tf_intra_op_threads=1)),
        agent_name="r2d2",
        agent=R2D2Config(torso="mlp", mlp_sizes=(64,), stack_size=1, lstm_size=64, hidden_size=64, burn_in=4, n_steps=3,
                         discounting=0.99, replay_buffer_size=2000, replay_buffer_min_size=100, replay_ratio=8.0,
                         update_target_every_n_step=50, eval_epsilon=1e-3,
                         optimizer=OptimizerConfig(learning_rate=1e-3, adam_epsilon=1e-3, clip_norm=40.0)),
    )


def classic_sac() -> Config:
    """SAC on Pendulum-v1 (actions rescaled to [-1, 1]). The original has no Pendulum preset; the settings are the
    SAC paper's (Adam, twin critics, target entropy -dim(A), alpha learned from 1.0 as Stable-Baselines3's
    ``ent_coef="auto"``, Polyak 0.995 = tau 0.005, i.e. ``polyak=0.995`` every update) with RL Baselines3 Zoo's
    Pendulum learning rate 1e-3 and hidden layers of 64 (the task is small; the original's 256 cost four times as
    much per update on a CPU). About one update per env step, as SAC's own setting: batch 128 unrolls of one
    step, replay ratio 128 (one unroll inserted per update); 2 actors x 4 envs; training starts after 1,000."""
    return Config(
        env=EnvConfig(family="classic", name="Pendulum-v1", num_action_repeats=1),
        run=RunConfig(num_actors=2, env_batch_size=4, unroll_length=1, batch_size=128, total_environment_frames=200_000,
                      target_return=-300.0,
                      tracking=TrackingConfig(save_checkpoint_secs=120.0, summary_period_secs=5.0),
                      devices=DevicesConfig(tf_intra_op_threads=1)),
        agent_name="sac",
        agent=SACConfig(mlp_sizes=(64, 64), entropy_cost=1.0, target_entropy=-1.0, polyak=0.995,
                        replay_buffer_size=100_000, replay_buffer_min_size=1000, replay_ratio=128.0,
                        optimizer=OptimizerConfig(learning_rate=1e-3)),
    )


def classic_sac_lstm() -> Config:
    """SAC with the original's recurrent actor-critic (``ActorCriticLSTM``: per head a pre-MLP, an LSTM reset at
    episode starts, a parallel feed-forward MLP and a post-MLP, all 64 wide) on Pendulum-v1, classic_sac's
    settings otherwise. Unrolls of 4 steps from the stored first state (no burn-in, as the original); batch 32
    unrolls (128 transitions, as classic_sac's batch), one unroll inserted per update (replay ratio 32). The
    original ships the network but no preset that uses it."""
    config = classic_sac()
    return dataclasses.replace(
        config, run=dataclasses.replace(config.run, unroll_length=4, batch_size=32),
        agent=dataclasses.replace(config.agent, network="lstm", lstm_sizes=(64,), pre_mlp_sizes=(64,),
                                  post_mlp_sizes=(64,), ff_mlp_sizes=(64,), replay_ratio=32.0,
                                  replay_buffer_size=25_000, replay_buffer_min_size=250))


def mujoco_sac() -> Config:
    """SAC on MuJoCo (HalfCheetah-v5) with the original's learner flags and main file: batch 256 unrolls of one
    step, uniform replay of 1M unrolls replayed 4 times each, Polyak 0.9 every update, discount 0.99, entropy
    cost 0.01 (fixed: no target entropy), V bootstrap, Adam 3e-4, twin critics, MLPs 2 x 256 (relu). Actors: 4 x 8
    envs (the original's main file sets none; its SAC has no gcp script)."""
    return Config(
        env=EnvConfig(family="mujoco", name="HalfCheetah-v5", num_action_repeats=1),
        run=RunConfig(num_actors=4, env_batch_size=8, unroll_length=1, batch_size=256,
                      total_environment_frames=1_000_000_000, tracking=TrackingConfig(save_checkpoint_secs=1800.0)),
        agent_name="sac",
        agent=SACConfig(),
    )


def classic_awr() -> Config:
    """AWR on CartPole-v1: classic_ppo's actors, network, batches and 4 epochs of 4 minibatches with the family's
    awr policy loss (beta 1, largest weight 20, the AWR paper's, which also takes many gradient steps per batch of
    data). One epoch (AWRConfig's default) learned about half as fast per frame here (one seed, 300K frames); the
    preset's figures over 5 seeds are in benchmarks/results/agent_suite.json. The original has no AWR preset."""
    ppo = classic_ppo()
    return dataclasses.replace(ppo, agent_name="awr", agent=AWRConfig(network="mlp", mlp_sizes=(64, 64),
                                                                      separate_value_network=True, epochs=4,
                                                                      minibatches=4))


def classic_vmpo() -> Config:
    """V-MPO on CartPole-v1: classic_ppo's actors, network, batches and 4 epochs of 4 minibatches with the family's
    vmpo policy loss (epsilon_eta 0.01, epsilon_alpha 0.005, the V-MPO paper's discrete settings; its KL constraint
    keeps several passes over a batch near the acting policy), no entropy bonus. One epoch (VMPOConfig's default)
    learned less than half as fast per frame here (one seed, 300K frames); the preset's figures over 5 seeds are
    in benchmarks/results/agent_suite.json. The original has no V-MPO preset."""
    ppo = classic_ppo()
    return dataclasses.replace(ppo, agent_name="vmpo", agent=VMPOConfig(network="mlp", mlp_sizes=(64, 64),
                                                                        separate_value_network=True, epochs=4,
                                                                        minibatches=4))


def _mujoco_on_policy(agent_name: str, config_class) -> Config:
    # mujoco/local_baseline_HalfCheetah-v2.sh and mujoco/gin/ppo.gin of the original.
    return Config(
        env=EnvConfig(family="mujoco", name="HalfCheetah-v5", num_action_repeats=1),
        # 8 actors x 32 envs, unroll 16 (the inference batch is the resolved default, 128: the original sent all
        # 256 envs in one batch); a step of 2048 transitions (128 unrolls), advantages computed once over them,
        # then 10 epochs of 32 shuffled minibatches of 64 single transitions (the original's default batch_mode
        # split), 2M frames.
        run=RunConfig(num_actors=8, env_batch_size=32, unroll_length=16, batch_size=128,
                      total_environment_frames=2_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name=agent_name,
        agent=config_class(network="control_mlp", mlp_sizes=(64, 64), activation="tanh", std_independent_of_input=True,
                           normalize_observations=True, observation_clipping=10.0, reward_normalizer="popart",
                           entropy_cost=0.0, discounting=0.99, lambda_=0.95, epochs=10, minibatches=32,
                           batch_mode="split", std_fn="safe_exp", min_std=1e-3, std_for_zero_param=1.0,
                           continuous_distribution="tanh", baseline_cost=1.0,
                           optimizer=OptimizerConfig(learning_rate=3e-4, lr_schedule="linear", adam_epsilon=1e-5,
                                                     clip_norm=0.5)),
    )


def mujoco_ppo() -> Config:
    """PPO on MuJoCo (HalfCheetah-v5) as the original's mujoco/local_baseline_HalfCheetah-v2.sh with
    mujoco/gin/ppo.gin: clip 0.2, GAE 0.95, discount 0.99, PopArt (AverageMeanStd, no compensation), no entropy
    bonus, policy and value MLPs 2 x 64 tanh with orthogonal init and a state-independent std (safe_exp, min 1e-3),
    observation normalisation clipped at 10, Adam 3e-4 decayed linearly to 0, clip norm 0.5, value cost 1 (the
    original's default), 10 epochs of 32 minibatches of 64 transitions over 2048 transitions, with the original's
    default batch mode ``split`` (the advantages computed once per step, then shuffled single transitions)."""
    return _mujoco_on_policy("ppo", PPOConfig)


def mujoco_awr() -> Config:
    """AWR on MuJoCo: mujoco_ppo's actors, networks, normalisers and batches with the awr policy loss, 1 epoch."""
    config = _mujoco_on_policy("awr", AWRConfig)
    return dataclasses.replace(config, agent=dataclasses.replace(config.agent, policy_loss="awr", epochs=1))


def mujoco_vmpo() -> Config:
    """V-MPO on MuJoCo: mujoco_ppo's actors, networks, normalisers and batches with the vmpo policy loss, 1 epoch."""
    config = _mujoco_on_policy("vmpo", VMPOConfig)
    return dataclasses.replace(config, agent=dataclasses.replace(config.agent, policy_loss="vmpo", epochs=1))


def mujoco_vtrace() -> Config:
    """V-trace on MuJoCo (HalfCheetah-v5) as the original's mujoco/vtrace_main.py: MLP 2 x 64 without LSTM
    (``n_lstm_layers 0``), no observation normalisation, Adam 3e-4, a tanh-squashed normal policy (the original's
    default continuous distribution), the V-trace learner's flag defaults otherwise. Actors and batches: 4 x 8 envs,
    unroll 32, batch 32 (the main file sets none)."""
    return Config(
        env=EnvConfig(family="mujoco", name="HalfCheetah-v5", num_action_repeats=1),
        run=RunConfig(num_actors=4, env_batch_size=8, unroll_length=32, batch_size=32,
                      total_environment_frames=1_000_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="mlp", mlp_sizes=(64, 64), lstm_size=0, use_reward_and_action=False,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=3e-4, lr_schedule="constant")),
    )


def _football_env(scenario: str = "11_vs_11_easy_stochastic", reward_experiment: str = "scoring") -> EnvConfig:
    # football/env.py: scenario 11_vs_11_easy_stochastic, reward_experiment scoring, smm_size default (96 x 72),
    # action repeat 1 (the only one it allows).
    return EnvConfig(family="football", name=scenario, num_action_repeats=1,
                     options=FootballOptions(reward_experiment=reward_experiment, smm_size="default"))


def football_vtrace() -> Config:
    """V-trace on Google Research Football as the original's football/vtrace_main.py with the hyperparameters of
    gcp/train_football_scoring.sh: the GFootball network (IMPALA's ResNet with 4 sections 16-32-32-32, lecun-normal
    init, no LSTM, no reward/action inputs) on the 4 stacked SMM frames packed into bits; Adam with a constant
    learning rate of 5.5339e-5 (the script's; the main file's default is 4.8e-4) and Keras' default epsilon; entropy
    cost 3.1948e-5, lambda 0.9, discount 0.997, unroll 32, batch 32, inference batch 64, 5e8 frames. The script
    ran 25 workers x 8 actors (200 envs) on 11_vs_11_hard_stochastic; this preset runs on one machine (4 actors x
    2 envs) on football/env.py's default scenario, 11_vs_11_easy_stochastic (``--env_name`` changes it)."""
    return Config(
        env=_football_env(),
        run=RunConfig(num_actors=4, env_batch_size=2, unroll_length=32, batch_size=32,
                      total_environment_frames=500_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="gfootball", lstm_size=0, use_reward_and_action=False,
                           entropy_cost=3.1948327487872845e-05, lambda_=0.9, discounting=0.997, baseline_cost=0.5,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=5.533923433816456e-05,
                                                     lr_schedule="constant", adam_beta1=0.9, adam_epsilon=1e-7)),
    )


def football_vtrace_checkpoints() -> Config:
    """``football_vtrace`` with gcp/train_football_checkpoints.sh's changes: the ``scoring,checkpoints`` reward,
    entropy cost 7.3309e-4, lambda 1, learning rate 1.2542e-4."""
    config = football_vtrace()
    return dataclasses.replace(
        config, env=_football_env(reward_experiment="scoring,checkpoints"),
        agent=dataclasses.replace(config.agent, entropy_cost=0.0007330944745454107, lambda_=1.0,
                                  optimizer=dataclasses.replace(config.agent.optimizer,
                                                                learning_rate=0.00012542101122072784)))


def football_r2d2() -> Config:
    """R2D2 on Football. Not in the original (it trained Football with V-trace only): R2D2's own settings
    (``atari_r2d2``: n-step 5, Adam 4.8e-4 eps 1e-3, clip 40, dueling heads, LSTM) with Football's observation, the
    4 stacked SMM frames the env already stacks (so ``stack_size=1``, no stacking on the learner), unpacked into
    16 planes by the torso (the Nature CNN), and football_vtrace's discount 0.997 and unroll 32."""
    return Config(
        env=_football_env(),
        run=RunConfig(num_actors=4, env_batch_size=2, unroll_length=32, batch_size=32, unroll_queue_size=100,
                      total_environment_frames=500_000_000, tracking=TrackingConfig(save_checkpoint_secs=1800.0)),
        agent_name="r2d2",
        agent=R2D2Config(stack_size=1, burn_in=16, discounting=0.997, replay_buffer_size=20_000,
                         replay_buffer_min_size=500),
    )


DMLAB_GCP_LEVELS: dict[str, dict[str, float]] = {
    # gcp/train_dmlab_<level>.sh: entropy_cost, lambda_, learning_rate, adam_epsilon (the other flags are shared).
    "explore_goal_locations_small": dict(entropy_cost=0.0009705614902108625, lambda_=0.95,
                                         learning_rate=0.00022587896096859582, adam_epsilon=3.125e-9),
    "lasertag_three_opponents_small": dict(entropy_cost=0.0013043623417080615, lambda_=0.9,
                                           learning_rate=0.000398313170083425, adam_epsilon=3.125e-11),
    "rooms_keys_doors_puzzle": dict(entropy_cost=0.002, lambda_=0.922, learning_rate=0.0001, adam_epsilon=3.125e-11),
    "rooms_watermaze": dict(entropy_cost=0.00001, lambda_=0.99, learning_rate=0.0001, adam_epsilon=3.125e-7),
}
"""The four DMLab levels the original ships Google Cloud scripts for, with their tuned numbers."""


def dmlab_vtrace(level: str = "explore_goal_locations_small") -> Config:
    """V-trace on DeepMind Lab as the original's dmlab/vtrace_main.py and gcp/train_dmlab_<level>.sh: IMPALA's deep
    ResNet + LSTM 256 with the clipped reward and the one-hot previous action (dmlab/networks.py ImpalaDeep), Adam
    with beta_1 = 0 and the learning rate decayed linearly to 0, rewards clipped to [-1, 1], batch 32, inference
    batch 64, unroll 100 (the learner's default), the level's entropy cost, lambda, learning rate and Adam epsilon
    (`DMLAB_GCP_LEVELS`; explore_goal_locations_small by default). 72 x 96 RGB observations. Action repeat 4, as
    IMPALA's and the SEED paper's DMLab runs (the scripts left the original's flag at 1; docs/deviations.md). The
    scripts ran 50 workers x 8 actors; this preset runs 4 actors x 2 envs on one machine."""
    if level not in DMLAB_GCP_LEVELS:
        raise ValueError(f"no DMLab preset for level {level!r}; levels with the original's tuned numbers: "
                         f"{', '.join(DMLAB_GCP_LEVELS)} (other levels: --env_name with any of these presets)")
    tuned = DMLAB_GCP_LEVELS[level]
    return Config(
        env=EnvConfig(family="dmlab", name=level, num_action_repeats=4, options=DmLabOptions()),
        run=RunConfig(num_actors=4, env_batch_size=2, unroll_length=100, batch_size=32, inference_batch_size=0,
                      total_environment_frames=10_000_000_000, tracking=TrackingConfig(save_checkpoint_secs=600.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="impala_deep", lstm_size=256, use_reward_and_action=True, max_abs_reward=1.0,
                           discounting=0.99, baseline_cost=0.5, entropy_cost=tuned["entropy_cost"],
                           lambda_=tuned["lambda_"],
                           optimizer=OptimizerConfig(kind="adam", adam_beta1=0.0, lr_schedule="linear",
                                                     learning_rate=tuned["learning_rate"],
                                                     adam_epsilon=tuned["adam_epsilon"])),
    )


def football_vtrace_fast() -> Config:
    """V-trace on a Football academy scenario sized for two CPU cores (benchmarks/atari_learning.py --env=football;
    docs/presets.md). Not in the original. What differs from ``football_vtrace`` and why: IMPALA's shallow network
    (conv 16 8x8/4, conv 32 4x4/2, dense 256) on the 16 unpacked SMM planes instead of the 4-section ResNet (a
    tenth of the cost per frame on a CPU), football/vtrace_main.py's own learning rate 4.8e-4 (the gcp script's
    5.5e-5 is tuned for 200 envs and 5e8 frames), entropy cost 0.01 and discount 0.993 (the Google Research Football
    paper's IMPALA settings for the academy scenarios, Kurach et al. 2020, table 5), batch 8 unrolls of 32 over 2
    actors x 4 envs, scoring reward, academy_empty_goal_close."""
    return Config(
        env=_football_env("academy_empty_goal_close"),
        run=RunConfig(num_actors=2, env_batch_size=4, unroll_length=32, batch_size=8, unroll_queue_size=16,
                      total_environment_frames=50_000_000,
                      tracking=TrackingConfig(save_checkpoint_secs=300.0, summary_period_secs=30.0)),
        agent_name="vtrace",
        agent=VTraceConfig(network="impala_shallow", lstm_size=0, use_reward_and_action=False, entropy_cost=0.01,
                           discounting=0.993, baseline_cost=0.5, lambda_=1.0,
                           optimizer=OptimizerConfig(kind="adam", learning_rate=0.00048, lr_schedule="constant",
                                                     adam_epsilon=1e-7)),
    )
