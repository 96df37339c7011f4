"""Files on disk: crash-safe writes (what ``atomic_path`` replaces and what it leaves alone),
and damaged checkpoints read as one clear error."""
import os
import re
import subprocess
import types

import numpy as np
import pytest

from dqn_nature.checkpoint import CheckpointError, read_header, save_checkpoint
from dqn_nature.config import Config
from dqn_nature.files import atomic_path


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("old")
    with pytest.raises(ValueError), atomic_path(str(path)) as tmp:
        with open(tmp, "w") as fh:
            fh.write("new, half")
        raise ValueError
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["run.csv"]


def test_a_link_is_followed_and_a_device_written_directly(tmp_path):
    real = tmp_path / "data" / "run.csv"
    real.parent.mkdir()
    real.write_text("old")
    (tmp_path / "link.csv").symlink_to(real)
    with atomic_path(str(tmp_path / "link.csv")) as tmp, open(tmp, "w") as fh:
        fh.write("new")
    assert (tmp_path / "link.csv").is_symlink() and real.read_text() == "new"
    with atomic_path("/dev/null") as tmp:
        assert tmp == "/dev/null"
        with open(tmp, "w") as fh:
            fh.write("nothing")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    with atomic_path("/dev/stdout") as tmp:  # pytest's capture makes it a link to a regular file
        assert tmp == "/dev/stdout"


@pytest.mark.parametrize("size", [500, 3000])
def test_a_checkpoint_with_damaged_metadata_is_one_clear_error(tmp_path, size):
    path = tmp_path / "run.ckpt"
    trainer = types.SimpleNamespace(config=Config(game="pong", name="run"), step=300,
                                    get_state=lambda: {"step": 300, "agent": {"w": np.zeros(10, np.float32)}})
    save_checkpoint(str(path), trainer)
    assert read_header(str(path))[1] == 300
    end = path.stat().st_size
    with open(path, "r+b") as fh:  # the arguments' attributes, written last: their checksum fails
        fh.seek(end - size)
        fh.write(b"\xff" * size)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: damaged checkpoint \("):
        read_header(str(path))
    result = subprocess.run(["dqn-train", "--resume", "run", "--gpu", "-1"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert re.match(r"dqn-train: error: run.ckpt: damaged checkpoint \(.*\)\n$", result.stderr)
    assert os.listdir(tmp_path) == ["run.ckpt"]
