"""Helpers shared by the test files: running ``dqn-train`` in a process of its own, and
checking that a command refused its input."""
import shutil
import subprocess

DQN_TRAIN = shutil.which("dqn-train")


def start(cwd, *args, **popen) -> subprocess.Popen:
    """``dqn-train *args`` started in ``cwd``, its stdout and stderr piped as text."""
    assert DQN_TRAIN, "the dqn-train console script is not installed"
    return subprocess.Popen([DQN_TRAIN, *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen, timeout: float = 600) -> subprocess.CompletedProcess:
    """Wait for ``proc`` (at most ``timeout`` seconds) and return its exit status and output."""
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def dqn_train(cwd, *args) -> subprocess.CompletedProcess:
    """Run ``dqn-train *args`` in ``cwd`` to its end."""
    return finish(start(cwd, *args))


def assert_bad_input(result, *fragments):
    """``result`` (a click ``CliRunner`` result) refused its input: exit status 2 and one line on
    stderr, no traceback, holding every one of ``fragments``."""
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    for fragment in fragments:
        assert fragment in line, line
