"""Crash-safe writes: what ``atomic_path`` replaces and what it leaves alone."""
import os

import pytest

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
