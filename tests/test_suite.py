"""The test suite itself: it neither reads nor writes the folder pytest was started from."""
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_the_starting_folder_is_neither_read_nor_written(tmp_path):
    # A user's earlier `dqn-train --game pong` left its files where the tests start; a test that
    # runs dqn-train with the default name must not meet them, nor leave files of its own there.
    start = tmp_path / "start"
    start.mkdir()
    (start / "DQN3_0_1_pong_FULL_Y.h5").write_bytes(b"")
    (start / "DQN3_0_1_pong_FULL_Y.ckpt").write_bytes(b"")
    # Without the plugins installed beside pytest (pytest-benchmark makes .benchmarks/ where it starts).
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             f"{TESTS / 'test_legacy.py'}::test_dqn_train_refuses_a_bad_t7",
                             f"{TESTS / 'test_suite.py'}::test_each_test_starts_in_an_empty_folder"],
                            cwd=start, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted(os.listdir(start)) == ["DQN3_0_1_pong_FULL_Y.ckpt", "DQN3_0_1_pong_FULL_Y.h5"]


def test_each_test_starts_in_an_empty_folder(request):
    assert Path.cwd() != request.config.invocation_params.dir and os.listdir() == []
