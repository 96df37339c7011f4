"""Shared fixtures: real Pong screens from the emulator (no mock of it)."""
import os
import sys

import numpy as np
import pytest
import threadpoolctl
import torch

from dqn_nature import GameEnvironment

# The console scripts the tests run (dqn-train, dqn-convert...) are this environment's, not
# another installation's that comes first on PATH.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


@pytest.fixture(scope="session", autouse=True)
def away_from_the_starting_folder(tmp_path_factory):
    """Fixtures of module and session scope run in a folder of this session's, not in the one
    pytest was started from: the suite neither reads nor writes that folder."""
    start = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("session"))
    yield
    os.chdir(start)


@pytest.fixture(autouse=True)
def in_a_folder_of_its_own(tmp_path_factory, monkeypatch):
    """Each test starts in an empty folder of its own (not ``tmp_path``, whose contents some
    tests list), so that files a run writes by default (``DQN3_0_1_pong_FULL_Y.h5``...) meet
    no earlier ones."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="session")
def pong_screens():
    """200 pooled Pong screens, float32 (210, 160, 3) in [0, 1], from random play (actrep 4, seed 1)."""
    env = GameEnvironment("pong", seed=1)
    rng = np.random.default_rng(0)
    actions = env.get_actions()
    screens = [env.get_state()[0]]
    for _ in range(199):
        screens.append(env.step(actions[rng.integers(len(actions))], training=True)[0])
    return screens


@pytest.fixture(scope="module")
def single_threaded():
    """Run torch and BLAS on one thread, as training does: with tiny batches and frames, two
    threads on the shared 2 cores are many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        yield
    torch.set_num_threads(threads)
