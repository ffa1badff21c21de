"""The auth token stays out of the run directory and out of what actors are sent; actors are sent only their part
of the config (protocol 4)."""

import json
import os

from seed_rl.config import ActorConfig, EnvConfig, replace, replace_flat
from seed_rl.configs import get_preset
from seed_rl.learner.learner import REDACTED, Learner
from seed_rl.transport import LearnerClient


def test_config_json_and_the_handshake_carry_no_auth_token(tmp_path):
    config = get_preset("classic_vtrace")
    config = replace(config, env=EnvConfig(family="test", name="counting:length=4,num_actions=2"),
                     run=replace_flat(config.run, logdir=str(tmp_path / "run"), num_actors=1, env_batch_size=2,
                                      server_address="127.0.0.1:0", auth_token="s3cret-token", actor_env_groups=1,
                                      tls_ca_file="", wandb_project=""))
    learner = Learner(config)
    try:
        port = learner.start()
        with open(os.path.join(config.run.tracking.logdir, "config.json")) as f:
            written = f.read()
        with LearnerClient(f"127.0.0.1:{port}", 0, auth_token="s3cret-token", connect_timeout_s=30) as client:
            sent = client.handshake().config_json
    finally:
        learner.stop()
    for text in (written, sent):
        assert "s3cret-token" not in text
    assert json.loads(written)["run"]["transport"]["auth_token"] == REDACTED
    assert json.loads(written)["run"]["num_actors"] == 1  # the rest is the resolved config
    # The handshake: the env and the actor's own loop setting, nothing of the learner's (paths, devices, secrets).
    assert set(json.loads(sent)) == {"env", "actor_env_groups"}
    assert ActorConfig.from_json(sent) == ActorConfig(env=config.env, actor_env_groups=1)
    assert "logdir" not in sent and "auth_token" not in sent and str(tmp_path) not in sent


def test_an_actor_reads_a_whole_run_config_as_well():
    """config.json (and a learner before protocol 4) holds the whole config; the actor's part reads from it."""
    config = replace(get_preset("classic_vtrace"), env=EnvConfig(family="test", name="counting:length=4"))
    config = replace(config, run=replace_flat(config.run, actor_env_groups=3))
    assert ActorConfig.from_json(config.to_json()) == ActorConfig(
        env=replace(config.env, options=None), actor_env_groups=3)
