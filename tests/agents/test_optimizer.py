"""One optimizer builder for every agent (seed_rl/agents/optimizer.py): each agent config's ``optimizer``
(``seed_rl.config.OptimizerConfig``) becomes its optimizer, with the agent's own defaults."""

import keras
import pytest

from seed_rl import agents as agents_lib
from seed_rl.agents.optimizer import make_optimizer
from seed_rl.config import OptimizerConfig, replace


@pytest.mark.parametrize("agent", agents_lib.agent_names())
def test_every_agent_config_makes_the_optimizer_its_fields_say(agent):
    config = agents_lib.config_class(agent)().optimizer
    opt = make_optimizer(config, total_updates=100)
    assert isinstance(opt, keras.optimizers.RMSprop if config.kind == "rmsprop" else keras.optimizers.Adam)
    assert opt.epsilon == pytest.approx(config.rms_epsilon if config.kind == "rmsprop" else config.adam_epsilon)
    assert opt.global_clipnorm == (config.clip_norm or None)
    lr = opt.learning_rate if not callable(opt._learning_rate) else opt._learning_rate(0)
    assert float(lr) == pytest.approx(config.learning_rate)


def test_a_linear_schedule_decays_to_zero_at_the_last_update_and_a_constant_one_does_not():
    config = replace(agents_lib.config_class("vtrace")().optimizer, kind="adam", lr_schedule="linear", clip_norm=40.0)
    opt = make_optimizer(config, total_updates=10)
    schedule = opt._learning_rate
    assert float(schedule(0)) == pytest.approx(config.learning_rate)
    assert float(schedule(5)) == pytest.approx(config.learning_rate / 2)
    assert float(schedule(10)) == 0.0
    assert opt.global_clipnorm == 40.0 and opt.beta_1 == config.adam_beta1
    constant = make_optimizer(replace(config, lr_schedule="constant"), total_updates=10)
    assert float(constant.learning_rate) == pytest.approx(config.learning_rate)


def test_the_config_refuses_an_optimizer_or_schedule_it_does_not_know():
    with pytest.raises(ValueError, match="lr_schedule must be constant or linear, got 'cosine'"):
        OptimizerConfig(lr_schedule="cosine")
    with pytest.raises(ValueError, match="optimizer must be adam or rmsprop, got 'sgd'"):
        OptimizerConfig(kind="sgd")
