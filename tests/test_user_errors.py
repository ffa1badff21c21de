"""Every run-time mistake a user can make with `seed-rl train` is one line on stderr, nothing on stdout, and exit
code 2, before the run directory is written (docs/usage.md, "Command line")."""

import json
import os
import socket
import subprocess
import sys

import pytest

from seed_rl.configs.resolve import learner_config
from seed_rl.learner import resume

ARGS = ("--env=test", "--env_name=counting:length=4,num_actions=2", "--agent=vtrace", "--preset=classic_vtrace",
        "--num_actors=1", "--env_batch_size=2", "--total_environment_frames=1000")


def _listening_socket():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def _finished_run(logdir):
    """A run directory whose training is finished: its config.json and finished.json, as the learner leaves them."""
    config = learner_config([*ARGS, f"--logdir={logdir}"])
    os.makedirs(logdir)
    with open(os.path.join(logdir, resume.CONFIG_FILE), "w") as f:
        f.write(config.to_json())
    resume.record_finished(logdir, 1024, "budget", 1000, 0.0)


def _config_file(tmp_path, text):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(text))
    return f"--config={path}"


CASES = {
    # name: (extra args (a function of tmp_path), what the line says)
    "busy port": (lambda tmp, port: [f"--server_address=127.0.0.1:{port}"], "port {port} is in use"),
    "logdir is a file": (lambda tmp, port: [f"--logdir={tmp / 'afile'}"], "is a file, not a directory"),
    "logdir under a file": (lambda tmp, port: [f"--logdir={tmp / 'afile' / 'run'}"], "is a file, so the run"),
    "logdir not writable": (lambda tmp, port: ["--logdir=/proc/seed_rl_nope/run"], "cannot create the run directory"),
    "config typo (agent)": (lambda tmp, port: [_config_file(tmp, {"agent": {"learnig_rate": 0.1}})],
                            "unknown agent key(s): learnig_rate (did you mean learning_rate?)"),
    "config typo (run)": (lambda tmp, port: [_config_file(tmp, {"run": {"num_actor": 3}})],
                          "unknown run key(s): num_actor (did you mean num_actors?)"),
    "config typo (env)": (lambda tmp, port: [_config_file(tmp, {"env": {"nmae": "x"}})], "unknown env key(s): nmae"),
    "another agent's field": (lambda tmp, port: [_config_file(tmp, {"agent": {"burn_in": 3}})],
                              "agent.burn_in of --config does not apply to the vtrace agent: burn_in is a field of "
                              "r2d2, not of vtrace"),
    "other agents' field": (lambda tmp, port: [_config_file(tmp, {"agent": {"replay_buffer_size": 10}})],
                            "replay_buffer_size is a field of r2d2 and sac, not of vtrace"),
    "another agent's flag": (lambda tmp, port: ["--burn_in=3"],
                             "--burn_in does not apply to the vtrace agent: burn_in is a field of r2d2"),
    "unknown flag": (lambda tmp, port: ["--learnig_rate=0.1"], "Unknown command line flag 'learnig_rate'"),
    "finished run": (lambda tmp, port: [], "is finished: its budget of 1,000 env frames is spent (1,024)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_mistake_is_one_line_and_exit_code_2_and_writes_nothing(case, tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    logdir = tmp_path / "run"
    if case == "finished run":
        _finished_run(str(logdir))
    before = sorted(os.listdir(logdir)) if logdir.exists() else None
    with _listening_socket() as sock:
        port = sock.getsockname()[1]
        extra, says = CASES[case]
        args = [f"--logdir={logdir}", *extra(tmp_path, port)]
        res = subprocess.run([sys.executable, "-m", "seed_rl", "train", *ARGS, *args], capture_output=True,
                             text=True, timeout=120)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and lines[0].startswith("seed-rl train: "), res.stderr
    # The one line is all the user sees: no info line (the network, the port) before it on stdout.
    assert [line for line in (res.stdout + res.stderr).splitlines() if line.strip()] == lines, res.stdout
    assert says.format(port=port) in lines[0], lines[0]
    assert (sorted(os.listdir(logdir)) if logdir.exists() else None) == before  # nothing written
    assert set(os.listdir(tmp_path)) <= {"afile", "c.json", "run"}  # the write probe leaves nothing either


def test_a_finished_run_trains_on_with_a_larger_budget(tmp_path):
    """The way out the message names works: a larger budget resumes (the check passes, and the mark goes)."""
    logdir = str(tmp_path / "run")
    _finished_run(logdir)
    config = learner_config([*ARGS, f"--logdir={logdir}", "--total_environment_frames=4000"])
    assert resume.resume_changes(logdir, config.to_json())  # the budget changed; nothing refused
    with pytest.raises(resume.RunFinishedError, match="target return 5 at 1,024"):
        resume.record_finished(logdir, 1024, "target", 4000, 5.0)
        resume.resume_changes(logdir, learner_config([*ARGS, f"--logdir={logdir}", "--total_environment_frames=4000",
                                                      "--target_return=5"]).to_json())
    resume.clear_finished(logdir)
    assert not os.path.exists(os.path.join(logdir, resume.FINISHED_FILE))


@pytest.mark.parametrize("case", ["busy port", "finished run"])
def test_the_learner_command_says_them_in_one_line_too(case, tmp_path):
    logdir = tmp_path / "run"
    if case == "finished run":
        _finished_run(str(logdir))
    with _listening_socket() as sock:
        port = sock.getsockname()[1] if case == "busy port" else 0
        res = subprocess.run([sys.executable, "-m", "seed_rl", "learner", *ARGS, f"--logdir={logdir}",
                              f"--server_address=127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    out = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    assert len(out) == 1 and out[0].startswith("seed-rl learner: "), out
    assert (f"port {port} is in use" if case == "busy port" else "is finished") in out[0], out


def test_a_learner_that_waits_on_a_finished_run_is_not_refused(tmp_path):
    """``learner --on_finish=wait`` (a Kubernetes StatefulSet) stays up on a finished run: the early check leaves
    the run to the learner, which waits; the same flags with exit are refused."""
    from seed_rl import cli

    logdir = str(tmp_path / "run")
    _finished_run(logdir)
    for on_finish, refused in (("wait", False), ("exit", True)):
        fv, fields = cli._make_flags("learner")
        fv(["seed-rl", *ARGS, f"--logdir={logdir}", f"--on_finish={on_finish}"])
        config = cli.resolve_config(fv, fields)
        if refused:
            with pytest.raises(resume.RunFinishedError, match="is finished"):
                cli._refuse_before_start("learner", fv, config)
        else:
            cli._refuse_before_start("learner", fv, config)
