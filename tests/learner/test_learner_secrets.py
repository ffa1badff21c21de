"""The auth token stays out of the run directory and out of what actors are sent."""

import json
import os

from seed_rl.config import EnvConfig, replace
from seed_rl.configs import get_preset
from seed_rl.learner.learner import REDACTED, Learner
from seed_rl.transport import LearnerClient


def test_config_json_and_the_handshake_carry_no_auth_token(tmp_path):
    config = get_preset("classic_vtrace")
    config = replace(config, env=EnvConfig(family="test", name="counting:length=4,num_actions=2"),
                     run=replace(config.run, logdir=str(tmp_path / "run"), num_actors=1, env_batch_size=2,
                                 server_address="127.0.0.1:0", auth_token="s3cret-token"))
    learner = Learner(config)
    try:
        port = learner.start()
        with open(os.path.join(config.run.logdir, "config.json")) as f:
            written = f.read()
        with LearnerClient(f"127.0.0.1:{port}", 0, auth_token="s3cret-token", connect_timeout_s=30) as client:
            sent = client.handshake().config_json
    finally:
        learner.stop()
    for text in (written, sent):
        assert "s3cret-token" not in text
        assert json.loads(text)["run"]["auth_token"] == REDACTED
        assert json.loads(text)["run"]["num_actors"] == 1  # the rest is the resolved config
