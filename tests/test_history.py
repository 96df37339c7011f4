"""The HDF5 history file: round trip and clear errors on files that are not histories."""
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from dqn_nature import __version__
from dqn_nature.config import Config
from dqn_nature.commands.slim import slim_command
from dqn_nature.history import HistoryError, load_history, save_history
from dqn_nature.convnet import convnet_atari3
from dqn_nature.network_files import load_network, load_network_params, save_network_params
from dqn_nature.runs import load_runs
from dqn_nature.slim import slim_history

HISTORY = {
    "reward_history": [-21.0, -19.5], "reward_counts": [21, 23], "episode_counts": [1, 2],
    "v_history": [0.01, 0.25], "td_history": [0.04, 0.03], "qmax_history": [1, 1],
    "step_history": [250_000, 500_000], "time_history": [0.0, 610.5, 1230.25],
}


def networks():
    torch.manual_seed(0)
    return convnet_atari3(6), convnet_atari3(6)


def write(path, best=True):
    model, best_model = networks()
    save_history(str(path), game="pong", steps=500_000, frames=2_000_000, history=HISTORY,
                 model=model.state_dict(), best_model=best_model.state_dict() if best else None,
                 arguments=Config(game="pong", name="run").as_dict(), package_version=__version__)
    return model, best_model


def test_round_trip(tmp_path):
    path = tmp_path / "run.h5"
    model, best_model = write(path)
    assert os.listdir(tmp_path) == ["run.h5"]  # the temporary name is gone
    h = load_history(str(path))
    assert (h.game, h.steps, h.frames, h.package_version) == ("pong", 500_000, 2_000_000, __version__)
    for key, values in HISTORY.items():
        np.testing.assert_array_equal(getattr(h, key), values)
    counts = ("reward_counts", "episode_counts", "step_history")  # whole numbers; the rest float64 (qmax too)
    assert {k: getattr(h, k).dtype for k in HISTORY} == {k: np.dtype(np.int64 if k in counts else np.float64)
                                                         for k in HISTORY}
    assert h.arguments == Config(game="pong", name="run").as_dict()  # None, bools and floats survive
    np.testing.assert_array_equal(h.frame_history, [1_000_000, 2_000_000])
    for which, net in (("model", model), ("best_model", best_model)):
        state = h.state_dict(which)
        assert sorted(state) == sorted(net.state_dict())
        for key, tensor in net.state_dict().items():
            assert state[key].dtype == torch.float32 and torch.equal(state[key], tensor)
    x = torch.rand(2, 4, 84, 84)
    assert torch.equal(h.load_network("best_model")(x), best_model(x))


def test_slim_copy_keeps_histories_and_the_best_network_in_float16(tmp_path):
    path, slim = tmp_path / "run.h5", tmp_path / "slim.h5"
    _, best_model = write(path)
    assert "3.4 MB (was 13.8 MB), networks: best_model in float16" in slim_history(str(path), str(slim))
    h, full = load_history(str(slim)), load_history(str(path))
    for key in HISTORY:
        np.testing.assert_array_equal(getattr(h, key), getattr(full, key))
    assert h.arguments == full.arguments and h.attrs["slimmed_from"] == "run.h5"  # no folder of this machine
    with h5py.File(slim) as f:
        assert "model" not in f and f["best_model/conv1.weight"].dtype == np.float16
    state = h.state_dict("best_model")
    for key, tensor in best_model.state_dict().items():
        assert state[key].dtype == torch.float32
        torch.testing.assert_close(state[key], tensor.half().float(), rtol=0, atol=0)
    with pytest.raises(HistoryError, match=r"slim.h5: no model stored \(this dqn-slim copy of run\.h5 holds only "
                                           r"best_model; load 'best_model'\)$"):
        h.load_network("model")


def test_dqn_slim_keeps_the_base_name_of_absolute_paths(tmp_path):
    # Arguments and the source's path that name a folder of this machine keep only their base
    # name; relative paths, other text and numbers are kept as they are.
    path = tmp_path / "run.h5"
    arguments = Config(game="pong", name=str(tmp_path / "run"), csv_log=str(tmp_path / "logs" / "run.csv"),
                       game_path="/opt/roms/", tensorboard="logs/tb").as_dict()
    no_evaluations = {k: [0] if k == "time_history" else [] for k in HISTORY}
    save_history(str(path), game="pong", steps=300, frames=1200, history=no_evaluations, model={}, best_model=None,
                 arguments=arguments, package_version=__version__)
    result = CliRunner().invoke(slim_command, [str(path), str(tmp_path / "slim.h5"), "--networks", "none"])
    assert result.exit_code == 0, result.output
    h = load_history(str(tmp_path / "slim.h5"))
    assert h.arguments == {**arguments, "name": "run", "csv_log": "run.csv", "game_path": "roms"}
    assert h.attrs["slimmed_from"] == "run.h5"


def test_committed_histories_name_no_folder_of_a_machine():
    # docs/results' histories (dqn-slim copies) hold no absolute path in any text attribute.
    results = sorted((Path(__file__).resolve().parents[1] / "docs" / "results").rglob("*.h5"))
    assert results
    for path in results:
        with h5py.File(path) as f:
            objects = [f]
            f.visit(lambda name: objects.append(f[name]))
            for obj in objects:
                for key, value in obj.attrs.items():
                    for text in np.atleast_1d(value):
                        text = text.decode(errors="replace") if isinstance(text, bytes) else text
                        assert not (isinstance(text, str) and re.match(r"([A-Za-z]:)?[/\\~]", text)), \
                            f"{path.name}: {obj.name} {key} = {text!r}"


def test_slim_in_place_and_without_networks(tmp_path):
    path = tmp_path / "run.h5"
    write(path)
    slim_history(str(path), str(path), networks=())
    assert os.listdir(tmp_path) == ["run.h5"] and os.path.getsize(path) < 100_000
    with h5py.File(path) as f:
        assert "model" not in f and "best_model" not in f
    np.testing.assert_array_equal(load_history(str(path)).reward_history, HISTORY["reward_history"])


def test_slim_of_a_history_without_arguments(tmp_path):
    path = tmp_path / "run.h5"
    write(path)
    with h5py.File(path, "a") as f:  # e.g. written by another tool: the other tools read it
        del f["arguments"]
    slim_history(str(path), str(tmp_path / "slim.h5"))
    h = load_history(str(tmp_path / "slim.h5"))
    assert h.arguments == {} and h.state_dict("best_model")
    np.testing.assert_array_equal(h.step_history, HISTORY["step_history"])


def test_slim_summary_names_the_type_written(tmp_path):
    path, slim, again = tmp_path / "run.h5", tmp_path / "slim.h5", tmp_path / "again.h5"
    write(path)
    assert slim_history(str(path), str(slim), float16=False).endswith("networks: best_model")  # float32, as stored
    slim_history(str(path), str(slim))
    # --float32 keeps a slim copy's float16 networks as stored: the summary says so
    assert slim_history(str(slim), str(again), float16=False).endswith("networks: best_model in float16")
    with h5py.File(again) as f:
        assert f["best_model/conv1.weight"].dtype == np.float16


def test_a_slim_copy_without_networks_says_dqn_slim_left_them_out(tmp_path):
    path, none, last = tmp_path / "run.h5", tmp_path / "none.h5", tmp_path / "last.h5"
    write(path)
    slim_history(str(path), str(none), networks=())
    slim_history(str(path), str(last), networks=("model",))
    for which in ("model", "best_model"):  # not "best_model exists after an evaluation": it has evaluations
        with pytest.raises(HistoryError, match=rf"none.h5: no {which} stored \(dqn-slim left the networks out of "
                                               r"this copy of run\.h5\)$"):
            load_history(str(none)).state_dict(which)
    with pytest.raises(HistoryError, match=r"last.h5: no best_model stored \(this dqn-slim copy of run\.h5 holds "
                                           r"only model; load 'model'\)$"):
        load_history(str(last)).state_dict("best_model")


def damage_end(path, size):
    """Overwrite the last ``size`` bytes of ``path`` with 0xFF: there lie the metadata written
    last (links, the arguments' attributes), whose checksums then fail; h5py raises RuntimeError."""
    end = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.seek(end - size)
        fh.write(b"\xff" * size)


@pytest.mark.parametrize("size", [500, 3000])
def test_damaged_metadata_is_a_history_error(tmp_path, size):
    path = tmp_path / "runs" / "run.h5"
    path.parent.mkdir()
    write(path)
    loaded = load_history(str(path))
    damage_end(path, size)
    damaged = rf"^{re.escape(str(path))}: damaged history file \("
    with pytest.raises(HistoryError, match=damaged):
        load_history(str(path))
    with pytest.raises(HistoryError, match=damaged):  # the file was damaged after it was loaded
        loaded.state_dict("model")
    with pytest.raises(HistoryError, match=damaged):
        slim_history(str(path), str(tmp_path / "slim.h5"))
    write(tmp_path / "runs" / "good.h5")
    skipped = []
    assert [r.path for s in load_runs([str(path.parent)], skip=skipped.append) for r in s.runs] == [
        str(tmp_path / "runs" / "good.h5")]
    assert len(skipped) == 1 and re.match(damaged, skipped[0])
    for command in (["dqn-slim", path, tmp_path / "slim.h5"], ["dqn-report", path]):
        result = subprocess.run(list(map(str, command)), capture_output=True, text=True)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert re.match(rf"{command[0]}: error: {re.escape(str(path))}: damaged history file \(.*\)\n$", result.stderr)
    result = subprocess.run(["dqn-report", str(path.parent)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr.startswith(f"dqn-report: warning: skipped {path}: damaged")
    assert not (tmp_path / "slim.h5").exists()


@pytest.mark.parametrize("which", ["model", "best_model"])
def test_damaged_network_weights_fail_the_load_not_a_later_play(tmp_path, which):
    path = tmp_path / "run.h5"
    write(path)
    with h5py.File(path) as f:  # the weights' bytes, under their Fletcher-32 checksum
        chunk = f[f"{which}/fc1.weight"].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(chunk.byte_offset + chunk.size // 2)
        fh.write(b"\x5a" * 64)
    with pytest.raises(HistoryError, match=rf"^{re.escape(str(path))}: damaged history file \("):
        load_history(str(path))  # dqn-plot and dqn-report, which never play, refuse it too


def test_a_pipe_named_h5_is_skipped_not_waited_on(tmp_path):
    write(tmp_path / "run.h5")
    os.mkfifo(tmp_path / "pipe.h5")  # HDF5 would wait for a writer
    result = subprocess.run(["dqn-report", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == (f"dqn-report: warning: skipped {tmp_path / 'pipe.h5'}: not a "
                                                        "regular file (a pipe or a device), not a history file\n")


def test_slim_command_errors(tmp_path):
    (tmp_path / "x.h5").write_text("not hdf5")
    result = subprocess.run(["dqn-slim", str(tmp_path / "x.h5"), str(tmp_path / "y.h5")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("dqn-slim: error: ")
    assert "not a readable HDF5 file" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "y.h5").exists()
    with pytest.raises(HistoryError, match=r": a folder, not a history file$"):  # not h5py's paragraph
        slim_history(str(tmp_path), str(tmp_path / "y.h5"))
    write(tmp_path / "run.h5", best=False)

    def slim(*args):
        return subprocess.run(["dqn-slim", str(tmp_path / "run.h5"), *map(str, args)], capture_output=True, text=True)

    result = slim(tmp_path / "x.h5")  # a user's file that is not the source
    assert result.returncode == 2 and result.stderr.strip().endswith("x.h5 exists; replace it with --overwrite, "
                                                                     "or choose another name")
    assert (tmp_path / "x.h5").read_text() == "not hdf5"
    # h5py's error, in the system's words: not its paragraph naming the temporary file
    limited = subprocess.run(["dqn-slim", str(tmp_path / "run.h5"), str(tmp_path / "y.h5"), "--networks", "last"],
                             capture_output=True, text=True,
                             preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192)))
    assert limited.returncode == 1  # the write failed; 2 is for bad input, such as an output with no folder
    assert limited.stderr == f"dqn-slim: error: cannot write {tmp_path / 'y.h5'}: File too large\n"
    assert sorted(os.listdir(tmp_path)) == ["run.h5", "x.h5"]
    result = slim(tmp_path / "no" / "y.h5")
    assert result.returncode == 2 and result.stderr == f"dqn-slim: error: cannot write {tmp_path / 'no' / 'y.h5'}: " \
                                                       f"no folder {tmp_path / 'no'}\n"
    result = slim(tmp_path / "y.h5")  # the default keeps best_model, which this run has not made
    assert result.returncode == 2 and "run.h5 holds no best_model network" in result.stderr
    assert not (tmp_path / "y.h5").exists()
    assert slim(tmp_path / "x.h5", "--networks", "last", "--overwrite").returncode == 0
    assert load_history(str(tmp_path / "x.h5")).state_dict("model")
    assert slim(tmp_path / "run.h5", "--networks", "none").returncode == 0  # in place needs no --overwrite


def test_slim_command_keeps_the_networks_asked_for(tmp_path):
    path = tmp_path / "run.h5"
    model, best_model = write(path)
    for args, kept, dtype in ((["--networks", "both", "--float32"], ("model", "best_model"), np.float32),
                              (["--networks", "last"], ("model",), np.float16),
                              (["--networks", "none", "--float32"], (), None)):
        result = subprocess.run(["dqn-slim", str(path), str(tmp_path / "slim.h5"), "--overwrite", *args],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        with h5py.File(tmp_path / "slim.h5") as f:
            assert sorted(k for k in ("model", "best_model") if k in f) == sorted(kept), args
            assert {f[name]["conv1.weight"].dtype for name in kept} == ({np.dtype(dtype)} if kept else set()), args
    h = load_history(str(path))  # the source is unchanged
    for which, net in (("model", model), ("best_model", best_model)):
        assert all(torch.equal(h.state_dict(which)[k], v) for k, v in net.state_dict().items())


def test_a_full_disk_raises_the_write_s_oserror(tmp_path):
    # A write past the limit fails, then h5py's closing of the file fails too (a RuntimeError
    # that hid the OSError); the limit stands for a full disk.
    save = ("import sys, torch; from dqn_nature.history import HISTORY_FIELDS, save_history; "
            "save_history(sys.argv[1], game='pong', steps=0, frames=0, history={k: [] for k in HISTORY_FIELDS}, "
            "model={'w': torch.zeros(10**6)}, best_model=None, arguments={}, package_version='test')")
    result = subprocess.run([sys.executable, "-c", save, str(tmp_path / "x.h5")], capture_output=True, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (10**6, 10**6)))
    assert result.returncode == 1
    assert "OSError: [Errno 27]" in result.stderr and "RuntimeError" not in result.stderr, result.stderr
    assert os.listdir(tmp_path) == []


def test_no_best_model_before_an_evaluation(tmp_path):
    path = tmp_path / "run.h5"
    write(path, best=False)
    with h5py.File(path) as f:
        assert "best_model" not in f
    with pytest.raises(HistoryError, match="best_model"):
        load_history(str(path)).state_dict("best_model")


def test_missing_file(tmp_path):
    path = str(tmp_path / "nothing.h5")
    with pytest.raises(HistoryError, match="nothing.h5"):
        load_history(path)


def test_not_hdf5(tmp_path):
    path = tmp_path / "notes.h5"
    path.write_text("reward 21\n")
    with pytest.raises(HistoryError, match=str(path)):
        load_history(str(path))


def test_hdf5_without_format(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("history/reward_history", data=[1.0])
    with pytest.raises(HistoryError, match=str(path)) as err:
        load_history(str(path))
    assert "format" in str(err.value)


def test_truncated_file(tmp_path):
    path = tmp_path / "run.h5"
    write(path)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(HistoryError, match=str(path)):
        load_history(str(path))


def test_foreign_contents_are_one_clear_error(tmp_path):
    path = tmp_path / "run.h5"
    write(path)
    with h5py.File(path, "a") as f:
        del f["model/fc2.weight"]
    with pytest.raises(HistoryError, match=r"run.h5: model is not a convnet_atari3 network \('fc2.weight'\)"):
        load_network(str(path))
    with h5py.File(path, "a") as f:
        del f["history/reward_history"]
        f["history/reward_history"] = np.array([b"x", b"y"])
    with pytest.raises(HistoryError, match="reward_history is not a list of numbers"):
        load_history(str(path))


def _replace(name, value):
    def change(f):
        del f[name]
        f[name] = value
    return change


@pytest.mark.parametrize("change, message", [
    (lambda f: f.attrs.__setitem__("format_version", 99), "unsupported history format_version 99"),
    (lambda f: f.__delitem__("history/td_history"), "history is missing td_history"),
    # Histories of uneven lengths: not curves drawn from pairs cut short (the file has two evaluations).
    (_replace("history/step_history", [250_000]),
     r"damaged history file \(reward_history, reward_counts, .*: not one entry per evaluation of step_history's 1\)"),
    (_replace("history/time_history", [0.0, 610.5]),
     r"damaged history file \(time_history: not one entry per evaluation of step_history's 2\)"),
    (_replace("history/v_history", [0.5, 0.25, 0.125]),
     r"damaged history file \(v_history: not one entry per evaluation"),
    (lambda f: f.attrs.__setitem__("steps", "abc"), r"damaged history file \(invalid literal"),
    (lambda f: f.attrs.__setitem__("steps", np.inf), r"damaged history file \(cannot convert float infinity"),
    (lambda f: f.attrs.__setitem__("game", 3), r"damaged history file \(game attribute 3\)"),
    (lambda f: f.attrs.__delitem__("game"), r"damaged history file \(game attribute None\)"),
    (_replace("history/step_history", [250_000, np.nan]),
     r"damaged history file \(step_history is not whole numbers\)"),
    (_replace("best_model", np.zeros(3)), r"damaged history file \(best_model is not a group of parameter arrays\)"),
    (_replace("model/fc2.bias", np.array([b"x"] * 6)), r"damaged history file \(model is not a group of parameter"),
    (_replace("model/fc2.bias", np.float32(0)), r"damaged history file \(model is not a group of parameter arrays\)"),
    (lambda f: f["arguments"].attrs.__setitem__("actrep", "four"),
     r"damaged history file \(argument actrep: expected int, got 'four'\)"),
])
def test_contents_the_tools_cannot_use_are_one_line_errors(tmp_path, change, message):
    path = tmp_path / "run.h5"
    write(path)
    with h5py.File(path, "a") as f:
        change(f)
    with pytest.raises(HistoryError, match=r"run.h5: " + message):
        load_history(str(path))


def test_stored_arguments_load_as_their_options_types(tmp_path):
    path = tmp_path / "run.h5"
    write(path)
    with h5py.File(path, "a") as f:
        f["arguments"].attrs["actrep"] = 2.0  # as a float, e.g. from another writer
    h = load_history(str(path))
    assert h.arguments["actrep"] == 2 and isinstance(h.arguments["actrep"], int)
    np.testing.assert_array_equal(h.frame_history, [500_000, 1_000_000])  # frames at the run's own actrep
    with h5py.File(path, "a") as f:
        del f["arguments"]
    np.testing.assert_array_equal(load_history(str(path)).frame_history, HISTORY["step_history"])  # actrep unknown


@pytest.mark.parametrize("change", [lambda f: f.attrs.__setitem__("hist_len", 0),
                                    lambda f: f.attrs.__setitem__("hist_len", 2.5),
                                    _replace("network", np.zeros((2, 3), np.float32)),
                                    _replace("network", np.arange(6))])
def test_a_parameter_file_of_the_wrong_shape_or_hist_len_is_damage(tmp_path, change):
    path = str(tmp_path / "run.params.h5")
    save_network_params(path, convnet_atari3(6, 2))
    vector, hist_len = load_network_params(path)
    assert hist_len == 2 and vector.dtype == np.float32 and vector.shape == (sum(
        p.numel() for p in convnet_atari3(6, 2).parameters()),)
    with h5py.File(path, "a") as f:
        change(f)
    with pytest.raises(HistoryError, match=r"run.params.h5: damaged parameter file \(not a vector of floats"):
        load_network_params(path)
