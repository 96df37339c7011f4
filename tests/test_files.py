"""Files on disk: crash-safe writes (what ``atomic_path`` replaces and what it leaves alone),
and damaged checkpoints read as one clear error."""
import os
import re
import subprocess
import sys
import types

import h5py
import numpy as np
import pytest

from dqn_nature import __version__
from dqn_nature import checkpoint
from dqn_nature.checkpoint import CheckpointError, read_header, restore_checkpoint, save_checkpoint
from dqn_nature.config import Config
from dqn_nature.files import append_csv_row, atomic_path, unwritable
from dqn_nature.history import HISTORY_FIELDS, load_history, save_history
from dqn_nature.network_files import save_network_params
from dqn_nature.slim import slim_history
from dqn_nature.convnet import convnet_atari3


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "run.csv"
    path.write_text("old")
    with pytest.raises(ValueError), atomic_path(str(path)) as tmp:
        with open(tmp, "w") as fh:
            fh.write("new, half")
        raise ValueError
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["run.csv"]


def test_a_write_removes_the_temporaries_of_dead_processes_only(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = os.getppid()  # pytest's parent: a process still writing its temporary
    kept = [f".run.csv.tmp{live}", f".log.csv.tmp{dead.pid}", ".run.csv.tmpx"]  # another file's, not a pid
    for name in [f".run.csv.tmp{dead.pid}", *kept]:
        (tmp_path / name).write_text("partial")
    with atomic_path(str(tmp_path / "run.csv")) as tmp, open(tmp, "w") as fh:
        fh.write("new")
    assert sorted(os.listdir(tmp_path)) == sorted(["run.csv", *kept])


def test_an_output_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "out.h5").mkdir()
    assert unwritable(str(tmp_path / "out.h5")) == "it is a folder"
    assert unwritable(str(tmp_path / "new.h5")) is None
    assert unwritable(str(tmp_path / "no" / "new.h5")) == f"no folder {tmp_path / 'no'}"


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


def test_a_csv_row_gets_a_header_in_a_new_file_and_a_line_of_its_own(tmp_path):
    path = tmp_path / "log.csv"
    append_csv_row(str(path), {"a": 1, "b": 2}, first=False)  # first: for streams, which cannot be read back
    assert path.read_bytes() == b"a,b\r\n1,2\r\n"
    path.write_bytes(b"a,b")  # a header without its newline
    append_csv_row(str(path), {"a": 3, "b": 4}, first=True)
    assert path.read_bytes() == b"a,b\n3,4\r\n"


def test_csv_rows_to_stdout_keep_what_is_printed(tmp_path):
    script = ("from dqn_nature.files import append_csv_row\n"
              "print('before')\n"
              "append_csv_row('/dev/stdout', {'a': 1, 'b': 2}, first=True)\n"
              "print('between')\n"
              "append_csv_row('/dev/stdout', {'a': 3, 'b': 4}, first=False)\n")
    expected = b"before\na,b\r\n1,2\r\nbetween\n3,4\r\n"
    with open(tmp_path / "out.txt", "wb") as fh:  # /dev/stdout is a link to out.txt, at its own offset
        subprocess.run([sys.executable, "-c", script], stdout=fh, check=True)
    assert (tmp_path / "out.txt").read_bytes() == expected
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout == expected
    assert os.listdir(tmp_path) == ["out.txt"]


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


def replay_trainer(entries, size=10, state=None):
    """A stand-in ``train.Trainer`` whose replay memory of ``size`` rows holds ``entries``."""
    rng = np.random.default_rng(entries)
    table = types.SimpleNamespace(num_entries=entries, s=np.zeros((size, 7), np.uint8), a=np.zeros(size, np.int64),
                                  r=np.zeros(size, np.float32), t=np.zeros(size, np.uint8))
    for name in ("s", "a", "r", "t"):
        array = getattr(table, name)
        array[:entries] = rng.integers(1, 100, (entries, *array.shape[1:]))
    restored = {}
    return types.SimpleNamespace(config=Config(game="pong", name="run"), step=300, agent=types.SimpleNamespace(
        transitions=table), get_state=lambda: state or {"step": 300, "agent": {"w": np.arange(3.0)}},
        set_state=lambda state, replay_restored: restored.update(state=state, replay=replay_restored),
        restored=restored)


def test_a_checkpoint_restores_the_replay_memory_row_for_row(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "CHUNK_ROWS", 3)  # copied in chunks, the last one partial
    path = str(tmp_path / "run.ckpt")
    saved = replay_trainer(entries=8)
    save_checkpoint(path, saved, replay=True)
    into = replay_trainer(entries=0)
    into.agent.transitions.num_entries = 8  # as the agent's set_state leaves it
    assert restore_checkpoint(path, into) is True
    assert into.restored["replay"] is True and into.restored["state"]["step"] == 300
    np.testing.assert_array_equal(into.restored["state"]["agent"]["w"], np.arange(3.0))
    for name in ("s", "a", "r", "t"):
        got, want = getattr(into.agent.transitions, name), getattr(saved.agent.transitions, name)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    save_checkpoint(path, saved)  # without the replay memory: nothing restored into the table
    empty = replay_trainer(entries=0)
    assert restore_checkpoint(path, empty) is False and empty.restored["replay"] is False
    assert not empty.agent.transitions.s.any()


def test_a_replay_memory_of_another_size_is_refused(tmp_path):
    path = str(tmp_path / "run.ckpt")
    save_checkpoint(path, replay_trainer(entries=8), replay=True)
    into = replay_trainer(entries=9)  # the agent's set_state found another count of entries
    with pytest.raises(CheckpointError, match=r"run.ckpt: replay memory s has shape \(8, 7\), expected \(9,\)"):
        restore_checkpoint(path, into)


def variable_length_strings(path):
    """The attributes of the HDF5 file ``path`` stored as variable-length strings, as "object/name"."""
    found = []

    def visit(name, obj):
        for key in obj.attrs:
            info = h5py.check_string_dtype(obj.attrs.get_id(key).dtype)
            if info and info.length is None:
                found.append(f"{name}/{key}")
    with h5py.File(path) as f:
        visit("", f)
        f.visititems(visit)
    return found


def test_text_attributes_are_fixed_length_and_older_files_still_read(tmp_path):
    # Variable-length strings live in the file's global heap, where damage made HDF5 2.0.0 loop forever.
    arguments = Config(game="pong", name="run", csv_log="é.csv").as_dict()  # with None and non-ASCII values
    state = {"step": 300, "python_rng": "[3, [1, 2], null]", "agent": {"w": np.zeros(10, np.float32), "tag": ""}}
    trainer = types.SimpleNamespace(config=Config(**arguments), step=300, get_state=lambda: state)
    save_checkpoint(str(tmp_path / "run.ckpt"), trainer)
    network = convnet_atari3(6)
    save_network_params(str(tmp_path / "run.params.h5"), network)
    old = str(tmp_path / "old.h5")
    no_evaluations = {k: [0] if k == "time_history" else [] for k in HISTORY_FIELDS}
    save_history(old, game="pong", steps=300, frames=1200, history=no_evaluations,
                 model=network.state_dict(), best_model=None, arguments=arguments, package_version=__version__)
    with h5py.File(old, "a") as f:  # as dqn_nature wrote them before: h5py's variable-length strings
        for obj in (f, f["arguments"]):
            for key, value in obj.attrs.items():
                if isinstance(value, bytes):
                    obj.attrs[key] = value.decode()
    assert "/game" in variable_length_strings(old) and "arguments/csv_log" in variable_length_strings(old)
    slim_history(old, str(tmp_path / "slim.h5"), networks=("model",))
    for name in ("run.ckpt", "run.params.h5", "slim.h5"):
        assert variable_length_strings(tmp_path / name) == [], name
    assert read_header(str(tmp_path / "run.ckpt")) == (arguments, 300)
    with h5py.File(tmp_path / "run.ckpt") as f:
        assert f["state"].attrs["python_rng"].decode() == state["python_rng"] and f["state/agent"].attrs["tag"] == b""
    slim, history = load_history(str(tmp_path / "slim.h5")), load_history(old)
    assert slim.arguments == history.arguments == arguments and slim.game == history.game == "pong"
    assert slim.attrs == {**history.attrs, "slimmed_from": "old.h5"}
