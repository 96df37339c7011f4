"""Loading runs, dqn-plot and dqn-report, and the reference data they compare runs with."""
import csv
import json
import os
import re
import resource
import subprocess
import sys
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from dqn_nature import load_history
from dqn_nature.config import Config
from dqn_nature.history import save_history
from dqn_nature.network_files import save_network_params
from dqn_nature.runs import history_paths, load_runs
from dqn_nature.convnet import convnet_atari3
from dqn_nature import plot
from dqn_nature.commands.plot import main as plot_main
from dqn_nature.commands.report import main as report_main
from dqn_nature.plot import display_name, seed_curves, x_values
from dqn_nature.report import aggregate, report_rows
from dqn_nature.scores import dqn_normalised, human_normalised, read_curves, reference

SHARED_REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference"  # where the data came from
PNG_SIZE = (1100, 450)  # plot.FIGSIZE (11 x 4.5 inches) at the default 100 dpi
REFERENCE_GREY = (210, 210, 210)  # the --reference band: grey at alpha 0.35 on white
SEED_BAND = (198, 220, 236)  # the first configuration's band: C0 at alpha 0.25 on white


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A history written by dqn-train: 500 steps of Pong, evaluations at steps 250 and 500
    (learning from step 100, an update every 20 steps, with a small prefetch buffer and
    validation set)."""
    name = tmp_path_factory.mktemp("trained") / "pong_run"
    subprocess.run(["dqn-train", "--game", "pong", "--steps", "500", "--replay-memory", "2000", "--update-freq", "20",
                    "--learn-start", "100", "--buffer-size", "64", "--valid-size", "50", "--eval-freq", "250",
                    "--eval-steps", "200", "--save-freq", "500", "--gpu", "-1", "--threads", "1", "--verbose", "0",
                    "--name", str(name)], check=True)
    return str(name) + ".h5"


def synthetic(path, rewards, *, game="pong", first_step=50_000, eval_freq=50_000, episodes=None, values=None,
              **arguments):
    """Write a history with evaluation scores ``rewards`` at steps first_step, +eval_freq, ...,
    each over one episode unless ``episodes`` gives the counts; v_history is ``values``, or 0.1 x
    the evaluation index. ``arguments`` override run_gpu's defaults."""
    n = len(rewards)
    steps = first_step + eval_freq * np.arange(n)
    episodes = np.ones(n) if episodes is None else np.array(episodes)
    history = dict(reward_history=rewards, reward_counts=np.full(n, 21), episode_counts=episodes,
                   v_history=0.1 * np.arange(n) if values is None else values, td_history=np.ones(n),
                   qmax_history=np.ones(n), step_history=steps, time_history=np.arange(n + 1) * 10.0)
    args = {**Config(game=game).as_dict(), "name": str(path)[:-3], **arguments}
    done = int(steps[-1]) if n else first_step - 1
    save_history(str(path), game=game, steps=done, frames=done * args["actrep"], history=history, model={},
                 best_model=None, arguments=args, package_version="0.1.0")
    return str(path)


def run_cli(main, args, capsys):
    """Run a console entry point in-process; return (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def count_colour(path, rgb, tol=2):
    pixels = np.asarray(Image.open(path).convert("RGB"), dtype=np.int16)
    return int((np.abs(pixels - np.array(rgb)).max(axis=-1) <= tol).sum())


def expect_error(main, args, capsys, text):
    code, out, err = run_cli(main, args, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and text in err, err
    return err


# -- loading ---------------------------------------------------------------------------------

def test_load_history_round_trip_from_the_trainer(trained):
    h = load_history(trained)
    assert (h.game, h.steps, h.frames) == ("pong", 500, 2000)
    assert h.step_history.tolist() == [250, 500] and h.frame_history.tolist() == [1000, 2000]
    assert len(h.reward_history) == len(h.v_history) == 2 and len(h.time_history) == 3
    assert h.time_history[0] == 0 and np.all(np.diff(h.time_history) > 0)
    assert h.arguments["replay_memory"] == 2000 and h.arguments["learn_start"] == 100
    with h5py.File(trained) as f:
        stored = f["model/fc2.weight"][()]
    for which in ("model", "best_model"):
        net = h.load_network(which)
        assert net(torch.zeros(1, 4, 84, 84)).shape == (1, stored.shape[0])
    assert torch.equal(h.load_network("model").state_dict()["fc2.weight"], torch.from_numpy(stored))


def test_load_runs_groups_seeds_by_game_and_configuration(tmp_path):
    # Seeds of one configuration differ in their seed and in per-run output and logging options.
    seeds = [synthetic(tmp_path / f"fast_s{s}.h5", [1.0, 2.0], seed=s, update_freq=1, csv_log=f"s{s}.csv",
                       tensorboard=f"tb{s}", checkpoint_freq=1000 * s) for s in (1, 2, 3)]
    slow = synthetic(tmp_path / "slow.h5", [0.0], update_freq=4)
    (tmp_path / "sub").mkdir()
    other = synthetic(tmp_path / "sub" / "brk.h5", [5.0], game="breakout", update_freq=1)
    sets = load_runs([*seeds, slow, other])
    assert [(s.game, len(s.runs)) for s in sets] == [("pong", 3), ("pong", 1), ("breakout", 1)]
    assert [r.path for r in sets[0].runs] == seeds
    assert [s.label for s in sets] == ["fast_s [update_freq=1]", "slow [update_freq=4]", "brk"]
    assert "seed" not in sets[0].arguments and sets[0].arguments["update_freq"] == 1
    assert [s.label for s in load_runs(iter([slow, other]))] == ["slow", "brk"]  # any iterable
    # A file met twice, named or in a folder, is one run.
    assert [len(s.runs) for s in load_runs([slow, tmp_path / ".." / tmp_path.name / "slow.h5", tmp_path])] == [1, 3, 1]

    save_network_params(str(tmp_path / "sub" / "brk.params.h5"), convnet_atari3(2))
    assert history_paths([tmp_path]) == sorted([*seeds, slow, other])


def test_x_axes_and_seed_statistics(tmp_path):
    a = synthetic(tmp_path / "a.h5", [1.0, 3.0, 8.0], first_step=600 + 4 * 50_000, eval_freq=4 * 50_000,
                  learn_start=600, update_freq=4, n_replay=1, seed=1)
    b = synthetic(tmp_path / "b.h5", [3.0, 7.0], first_step=600 + 4 * 50_000, eval_freq=4 * 50_000,
                  learn_start=600, update_freq=4, n_replay=1, seed=2)
    (s,) = load_runs([a, b])
    run = s.runs[0]
    steps = np.array([0, 600, 200_600, 400_600])
    assert x_values(run, steps, "epochs").tolist() == [0.0, 0.0, 1.0, 2.0]
    assert x_values(run, steps, "frames").tolist() == [0, 2400, 802_400, 1_602_400]
    assert x_values(run, steps, "steps").tolist() == steps.tolist()
    xs, mean, low, high, std = seed_curves(s, "reward_history", "epochs")
    assert xs.tolist() == [1.0, 2.0, 3.0]
    assert mean.tolist() == [2.0, 5.0, 8.0] and low.tolist() == [1.0, 3.0, 8.0] and high.tolist() == [3.0, 7.0, 8.0]
    assert std.tolist() == [1.0, 2.0, 0.0]


@pytest.mark.skipif(not SHARED_REFERENCE.exists(), reason="the reference data's source folder is absent")
def test_the_shipped_reference_data_is_the_source_s_unchanged():
    from importlib import resources

    for name in ("dopamine_dqn_curves.csv", "nature_dqn_scores.csv", "atari57_random_human.csv"):
        shipped = (resources.files("dqn_nature") / "reference" / name).read_bytes()
        assert shipped == (SHARED_REFERENCE / name).read_bytes(), name


def test_reference_scores_come_from_the_shipped_files():
    assert tuple(reference("pong")) == (18.9, 1.3, -20.7, 14.6)
    assert tuple(reference("alien")) == (3069, None, 227.8, 7127.7)  # no standard deviation listed
    assert tuple(reference("defender")) == (None, None, 2874.5, 18688.9)  # in the 57 games, not in the Nature table
    assert tuple(reference("tetris")) == (None, None, None, None)
    assert human_normalised(-3.05, "pong") == pytest.approx(50.0)  # halfway from -20.7 to 14.6
    assert dqn_normalised(-0.9, "pong") == pytest.approx(50.0)  # halfway from -20.7 to 18.9
    assert dqn_normalised(1.0, "defender") is None and human_normalised(1.0, "tetris") is None
    curves = read_curves("dopamine")
    assert curves.label == "Dopamine DQN" and len(curves.points) == 60 and curves.runs("pong") == 5
    assert sorted(curves.points["pong"])[:2] == [1e6, 2e6] and len(curves.points["pong"]) == 199


# -- dqn-plot --------------------------------------------------------------------------------

def test_plot_one_trained_run(trained, tmp_path, capsys):
    fig = tmp_path / "one.png"
    code, out, err = run_cli(plot_main, [trained, "-o", fig, "--show-random-human"], capsys)
    assert code == 0 and err == "dqn-plot: note: pong_run: 2 of 2 evaluations finished no episode; their " \
        "recorded 0 is not a score and is left out (a longer --eval-steps finishes episodes)\n"
    with Image.open(fig) as im:
        assert im.format == "PNG" and im.size == PNG_SIZE
    assert count_colour(fig, SEED_BAND) < 300  # one seed: a line, no band (a band of 3 seeds: > 2000)
    for suffix, magic in ((".svg", b"<?xml"), (".pdf", b"%PDF")):
        run_cli(plot_main, [trained, "-o", tmp_path / f"one{suffix}", "--x", "epochs"], capsys)
        assert (tmp_path / f"one{suffix}").read_bytes().startswith(magic)


def test_plot_without_output_writes_beside_the_first_history(trained, tmp_path, capsys):
    # RUN.png beside the first RUN.h5, FOLDER/<FOLDER's name>.png for a first FOLDER; an
    # existing figure there is replaced, as with -o. Nothing goes to the current folder.
    runs = tmp_path / "runs"
    runs.mkdir()
    run = runs / "pong_run.h5"
    run.write_bytes(Path(trained).read_bytes())
    other = synthetic(tmp_path / "other.h5", [1.0, 2.0])
    for args, figure in (([run, other], runs / "pong_run.png"), ([runs, other], runs / "runs.png"),
                         ([f"{runs}/", other], runs / "runs.png")):
        figure.write_bytes(b"an earlier figure")
        code, out, _ = run_cli(plot_main, args, capsys)
        assert code == 0 and out == f"Wrote {figure}\n"
        with Image.open(figure) as im:
            assert im.format == "PNG" and im.size == PNG_SIZE
    assert sorted(p.name for p in runs.iterdir()) == ["pong_run.h5", "pong_run.png", "runs.png"]
    assert list(Path.cwd().iterdir()) == []


def test_plot_several_seeds_draws_a_band(tmp_path, capsys):
    runs = [synthetic(tmp_path / f"s{s}.h5", list(np.linspace(-20, 10, 12) + 3 * s), seed=s) for s in (1, 2, 3)]
    sizes = {}
    for band, dpi in (("minmax", 100), ("std", 50)):
        fig = tmp_path / f"seeds_{band}.png"
        code, _, _ = run_cli(plot_main, [*runs, "-o", fig, "--band", band, "--dpi", dpi, "--x", "steps"], capsys)
        assert code == 0
        sizes[band] = Image.open(fig).size
        assert count_colour(fig, SEED_BAND) > (2000 if dpi == 100 else 500)
    assert sizes == {"minmax": PNG_SIZE, "std": (550, 225)}


def test_configurations_differing_in_many_arguments_are_labelled_and_drawn_in_the_panels(tmp_path, capsys):
    many = dict(lr=0.001, ep_end=0.01, discount=0.9, update_freq=8, target_q=5000, hist_len=2, eval_steps=1000)
    runs = [synthetic(tmp_path / "a.h5", [1.0, 2.0]), synthetic(tmp_path / "b.h5", [3.0, 4.0], **many)]
    assert [s.label for s in load_runs(runs)] == ["a [discount=0.99, ep_end=0.1, eval_steps=125000, +4 more]",
                                                  "b [discount=0.9, ep_end=0.01, eval_steps=1000, +4 more]"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "constrained_layout not applied" when a legend is too wide
        code, _, err = run_cli(plot_main, [*runs, "-o", tmp_path / "fig.png"], capsys)
    assert code == 0 and err == ""


def test_plot_reference_overlay(tmp_path, capsys, monkeypatch):
    # "dopamine" names the curves shipped with the package, from any folder; the band is
    # labelled with what it is.
    run = synthetic(tmp_path / "run.h5", list(np.linspace(-21, 0, 20)))  # 4M frames
    plain, overlay = tmp_path / "plain.png", tmp_path / "overlay.png"
    run_cli(plot_main, [run, "-o", plain], capsys)
    code, _, err = run_cli(plot_main, [run, "-o", overlay, "--reference", "dopamine"], capsys)
    assert code == 0 and err == ""
    assert Image.open(overlay).size == PNG_SIZE
    assert count_colour(overlay, REFERENCE_GREY) - count_colour(plain, REFERENCE_GREY) > 3000
    figure = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "f.png", "--reference", "dopamine"])
    dopamine = read_curves("dopamine").points["pong"]
    low, high = min(min(dopamine[f]) for f in (1e6, 2e6, 3e6, 4e6)), max(max(dopamine[f]) for f in (1e6, 2e6, 3e6, 4e6))
    assert band_extent(figure.axes[0], "Dopamine DQN, 5 runs") == (1e6, 4e6, low, high)
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == ["run", "Dopamine DQN, 5 runs"]
    import matplotlib.pyplot as plt
    plt.close(figure)


def test_plot_leaves_out_reference_curves_that_start_past_the_runs_end(tmp_path, capsys):
    ref = tmp_path / "curves.csv"  # as Dopamine's: the first point after 1M frames
    ref.write_text("game,run,frames,mean_return\n" + "".join(
        f"pong,{r},{f * 1_000_000},{-21 + f + r}\n" for r in range(2) for f in range(1, 4)))
    run = synthetic(tmp_path / "run.h5", [-21.0, -20.0], first_step=1000, eval_freq=1000)  # 8,000 frames
    run_cli(plot_main, [run, "-o", tmp_path / "plain.png"], capsys)
    code, _, err = run_cli(plot_main, [run, "-o", tmp_path / "f.png", "--reference", ref], capsys)
    assert code == 0
    assert err == f"dqn-plot: note: {ref}: the pong curves start at 1M frames, past the runs' end; not drawn\n"
    # Neither a band nor its legend entry: the figure is the plain one.
    assert np.array_equal(np.asarray(Image.open(tmp_path / "f.png")), np.asarray(Image.open(tmp_path / "plain.png")))


def test_plot_labels_fractions_of_an_epoch_as_plain_numbers(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    run = synthetic(tmp_path / "run.h5", [-21.0, -20.0, -19.0])  # 0, 0.25 and 0.5 epochs
    figure = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "e.png", "--x", "epochs"])
    labels = [t.get_text().replace("\N{MINUS SIGN}", "-") for t in figure.axes[0].get_xticklabels()]
    assert "0.2" in labels and all(float(label) < 1 for label in labels)  # not "200m", read as millions
    plt.close(figure)


def test_plot_write_failure_is_one_line_and_keeps_the_previous_file(tmp_path):
    run = synthetic(tmp_path / "run.h5", list(np.linspace(-21, 0, 20)))
    for suffix in (".pdf", ".png"):  # matplotlib's PDF writer failed with a traceback of its own
        figure = tmp_path / f"fig{suffix}"
        figure.write_bytes(b"the previous figure")
        full = subprocess.run(["dqn-plot", run, "-o", figure], capture_output=True, text=True,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)))  # a full disk
        assert (full.returncode, full.stderr) == (1, f"dqn-plot: error: cannot write {figure}: File too large\n")
        assert figure.read_bytes() == b"the previous figure"


def test_plot_reads_a_reference_csv_with_a_byte_order_mark(tmp_path, capsys):
    ref = tmp_path / "excel.csv"  # Excel's "CSV UTF-8" starts with a byte-order mark
    rows = "".join(f"pong,{r},{frames},{-21 + 5 * r}\n" for r in (0, 1) for frames in (0, 4_000_000))
    ref.write_text("game,run,frames,mean_return\n" + rows, encoding="utf-8-sig")
    run = synthetic(tmp_path / "run.h5", list(np.linspace(-21, 0, 20)))
    code, _, err = run_cli(plot_main, [run, "-o", tmp_path / "f.png", "--reference", ref], capsys)
    assert code == 0 and err == ""
    assert count_colour(tmp_path / "f.png", REFERENCE_GREY) > 3000


def test_plot_leaves_out_non_finite_values_and_draws_empty_panels_without_legend(tmp_path, capsys):
    diverged = synthetic(tmp_path / "diverged.h5", [0.0, 0.0, 5.0], episodes=[0, 0, 1], values=[0.5, np.nan, np.inf])
    (s,) = load_runs([diverged])
    xs, mean, *_ = seed_curves(s, "v_history", "steps")
    assert xs.tolist() == [50_000] and mean.tolist() == [0.5]
    empty = synthetic(tmp_path / "empty.h5", [0.0], game="tetris", episodes=[0], values=[np.inf])
    for run in (diverged, empty):  # empty: no score, no value, no Nature score: two panels without legend
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's "invalid value", matplotlib's "no artists ... legend"
            code, _, _ = run_cli(plot_main, [run, "-o", tmp_path / "f.png"], capsys)
        assert code == 0


def test_plot_draws_dollar_signs_in_names_as_plain_text(tmp_path, capsys):
    run = synthetic(tmp_path / "run$\\foo$.h5", [1.0, 2.0], game="x$\\bar$")
    code, _, err = run_cli(plot_main, [run, "-o", tmp_path / "f.svg"], capsys)
    assert code == 0 and err == ""
    texts = re.findall(r"<!-- (.*?) -->", (tmp_path / "f.svg").read_text())  # matplotlib's SVG names each text
    assert "run$\\foo$" in texts and "x$\\bar$" in texts


def test_the_nature_score_is_drawn_where_it_fits_the_panel_or_on_request(tmp_path, capsys):
    low = synthetic(tmp_path / "low.h5", [1.0, 2.0])  # Pong's Nature score, 18.9, lies above these
    spanning = synthetic(tmp_path / "spanning.h5", [10.0, 20.0])
    for run, args, drawn in ((low, [], False), (low, ["--nature"], True), (spanning, [], True),
                             (spanning, ["--no-nature"], False)):
        assert run_cli(plot_main, [run, "-o", tmp_path / "f.svg", *args], capsys)[0] == 0
        texts = re.findall(r"<!-- (.*?) -->", (tmp_path / "f.svg").read_text())
        assert ("Nature DQN 18.9 ± 1.3" in texts) == drawn, (run, args)


def test_the_nature_score_drawn_by_default_does_not_widen_the_axis(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    run = synthetic(tmp_path / "run.h5", [18.0, 19.0, 20.0])  # 18.9 +- 1.3 reaches past both ends
    plain = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "f.png", "--no-nature"]).axes[0].get_ylim()
    default = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "f.png"]).axes[0]
    forced = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "f.png", "--nature"]).axes[0]
    assert [line.get_label() for line in default.lines] == ["run", "Nature DQN 18.9 ± 1.3"]
    assert default.get_ylim() == plain
    assert forced.get_ylim()[0] < 17.6 and forced.get_ylim()[1] > 20.2  # the hatching, 17.6 to 20.2, shown whole
    plt.close("all")


def test_plot_notes_a_run_without_evaluation(tmp_path, capsys):
    empty = synthetic(tmp_path / "empty.h5", [])
    full = synthetic(tmp_path / "full.h5", [1.0, 2.0])
    code, _, err = run_cli(plot_main, [empty, full, "-o", tmp_path / "f.png"], capsys)
    assert code == 0 and "note:" in err and "empty.h5: no evaluation yet" in err
    assert Image.open(tmp_path / "f.png").size == PNG_SIZE
    expect_error(plot_main, [empty, "-o", tmp_path / "g.png"], capsys, "no evaluation in any of the runs")
    assert not (tmp_path / "g.png").exists()


def test_plot_bad_input(tmp_path, capsys):
    run = synthetic(tmp_path / "run.h5", [1.0, 2.0])
    text = tmp_path / "notes.h5"
    text.write_text("not hdf5")
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = [1, 2]
    params = tmp_path / "net.params.h5"
    save_network_params(str(params), convnet_atari3(2))
    for bad in (text, foreign, params, tmp_path / "missing.h5"):
        expect_error(plot_main, [bad, "-o", tmp_path / "f.png"], capsys, str(bad))
    expect_error(plot_main, [run, "-o", tmp_path / "f.gif"], capsys, "use a .png, .svg or .pdf")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--label", "a", "--label", "b"], capsys,
                 "2 labels for 1 configurations (run); give one label, or one per configuration in this order")
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("game,iteration,return\npong,0,-20\n")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--reference", bad_csv], capsys,
                 "lacks column(s) run, frames, mean_return")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--reference", run], capsys, "not a text CSV file")
    bad_csv.write_text("game,run,frames,mean_return\npong,0,1000000,-20\npong,0,2000000,inf\n")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--reference", bad_csv], capsys,
                 "bad.csv:3: frames and mean_return must be finite numbers")
    bad_csv.write_text("game,run,frames,mean_return\npong,0,1000000," + "9" * 200_000 + "\n")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--reference", bad_csv], capsys,
                 "bad.csv: not a readable CSV file (field larger than field limit")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--reference", ""], capsys, "cannot read the reference")
    expect_error(plot_main, [run, "-o", tmp_path / "no" / "g.png"], capsys, f"no folder {tmp_path / 'no'}")
    (tmp_path / "dir.png").mkdir()
    expect_error(plot_main, [run, "-o", tmp_path / "dir.png"], capsys, "dir.png: it is a folder")
    expect_error(plot_main, [run, "-o", tmp_path / "g.png", "--x", "hours"], capsys, "--x")
    assert not (tmp_path / "g.png").exists() and not (tmp_path / "f.gif").exists()


# -- dqn-report ------------------------------------------------------------------------------

def test_report_rows_by_hand(tmp_path, capsys):
    a = synthetic(tmp_path / "pong_s1.h5", [-20.0, -5.0, 3.5], seed=1)
    b = synthetic(tmp_path / "pong_s2.h5", [-19.0, 9.0, 7.5], seed=2)
    c = synthetic(tmp_path / "tetris.h5", [12.0], game="tetris")
    pong, tetris = report_rows(load_runs([a, b, c]))
    assert (pong["seeds"], pong["frames"], pong["evaluations"]) == (2, 150_000 * 4, 3)
    assert pong["best"] == 9.0 and pong["last"] == 5.5 and pong["last_std"] == 2.0
    assert (pong["nature"], pong["nature_std"], pong["random"], pong["human"]) == (18.9, 1.3, -20.7, 14.6)
    assert pong["human_normalised"] == pytest.approx(100 * (5.5 + 20.7) / (14.6 + 20.7))  # 74.22
    assert pong["dqn_normalised"] == pytest.approx(100 * (5.5 + 20.7) / (18.9 + 20.7))  # 66.16
    assert tetris["last"] == 12.0 and tetris["last_std"] is None
    assert all(tetris[k] is None for k in ("nature", "nature_std", "random", "human", "human_normalised",
                                           "dqn_normalised"))

    code, out, _ = run_cli(report_main, [tmp_path], capsys)  # a folder: all three histories
    assert code == 0
    header, row_pong, row_tetris = out.strip().splitlines()
    assert header.split()[:2] == ["game", "configuration"]
    assert row_pong.split() == ["pong", "pong_s", "2", "600,000", "3", "9.0", "5.5", "2.0", "18.9", "1.3",
                                "-20.7", "14.6", "74.2", "66.2"]
    assert row_tetris.split() == ["tetris", "tetris", "1", "200,000", "1", "12.0", "12.0"]
    assert len({len(header), len(row_pong)}) == 1  # aligned

    rows = json.loads(run_cli(report_main, [a, b, "--format", "json"], capsys)[1])
    assert rows[0]["human_normalised"] == pytest.approx(74.2209, abs=1e-4) and rows[0]["config"] == "pong_s"
    out = run_cli(report_main, [c, "--format", "csv"], capsys)[1]
    assert list(csv.DictReader(out.splitlines()))[0] == dict(
        game="tetris", config="tetris", seeds="1", frames="200000", evaluations="1", best="12.0", last="12.0",
        last_std="", nature="", nature_std="", random="", human="", human_normalised="", dqn_normalised="")
    lines = run_cli(report_main, [a, c, "--format", "markdown"], capsys)[1].strip().splitlines()
    assert len(lines) == 4 and lines[1].startswith("|---|---|--:") and lines[2].startswith("| pong | pong_s1 |")


def test_report_frames_and_evaluations_are_the_longest_seed_s(tmp_path):
    a = synthetic(tmp_path / "pong_s1.h5", [-20.0, -5.0, 3.5], seed=1)  # 150,000 steps
    b = synthetic(tmp_path / "pong_s2.h5", [-19.0], seed=2)  # 50,000 steps
    (row,) = report_rows(load_runs([b, a]))
    assert (row["frames"], row["evaluations"], row["last"]) == (150_000 * 4, 3, -7.75)


def test_report_json_is_strict_json_with_null_for_non_finite_numbers(tmp_path, capsys):
    runs = [synthetic(tmp_path / f"pong_s{s}.h5", [1.0, score], seed=s) for s, score in ((1, np.inf), (2, -np.inf))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value" for the mean of inf and -inf
        code, out, _ = run_cli(report_main, [*runs, "--format", "json"], capsys)
    assert code == 0

    def reject(constant):
        raise ValueError(f"{constant} is not JSON")
    (row,) = json.loads(out, parse_constant=reject)  # as strict as jq or JSON.parse
    assert row["best"] is row["last"] is row["last_std"] is row["human_normalised"] is None
    assert row["nature"] == 18.9
    (row,) = csv.DictReader(run_cli(report_main, [*runs, "--format", "csv"], capsys)[1].splitlines())
    assert (row["best"], row["last"], row["last_std"], row["nature"]) == ("inf", "", "", "18.9")  # NaN unknown


def test_report_markdown_escapes_pipes_and_keeps_each_row_on_one_line(tmp_path, capsys):
    a = synthetic(tmp_path / "a|b.h5", [1.0])
    c = synthetic(tmp_path / "c.h5", [2.0], game="x|y\nz")
    lines = run_cli(report_main, [a, c, "--format", "markdown"], capsys)[1].strip().splitlines()
    assert len(lines) == 4
    assert lines[2].startswith(r"| pong | a\|b | 1 |") and lines[3].startswith(r"| x\|y z | c | 1 |")
    assert all(len(re.findall(r"(?<!\\)\|", line)) == 15 for line in lines)  # 14 cells
    assert len(run_cli(report_main, [a, c], capsys)[1].strip().splitlines()) == 3


def test_report_bad_input(tmp_path, capsys):
    junk = tmp_path / "junk.h5"
    junk.write_text("junk")
    expect_error(report_main, [junk], capsys, "junk.h5: not a readable HDF5 file")
    (tmp_path / "empty").mkdir()
    expect_error(report_main, [tmp_path / "empty"], capsys, "no .h5 history file")
    expect_error(report_main, [junk, "--format", "xml"], capsys, "--format")
    code, _, err = run_cli(report_main, [tmp_path], capsys)  # only junk in the folder
    assert code == 2 and err.splitlines()[0].startswith("dqn-report: warning: skipped ")
    assert err.splitlines()[1].endswith(f"error: no readable history in {tmp_path}")


def test_a_folder_s_unreadable_files_are_skipped_with_a_warning(tmp_path, capsys):
    run = synthetic(tmp_path / "pong_s1.h5", [1.0, 2.0])
    (tmp_path / "copying.h5").write_bytes(Path(run).read_bytes()[:1000])  # a truncated copy
    with h5py.File(tmp_path / "features.h5", "w") as f:  # the user's own HDF5 file
        f["x"] = [1, 2]
    code, out, err = run_cli(report_main, [tmp_path, "--format", "csv"], capsys)
    assert code == 0 and [r["config"] for r in csv.DictReader(out.splitlines())] == ["pong_s1"]
    warnings = err.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("dqn-report: warning: skipped ") for w in warnings)
    assert "copying.h5: " in warnings[0] and "features.h5: not a dqn_nature history file" in warnings[1]
    code, _, err = run_cli(plot_main, [tmp_path, "-o", tmp_path / "f.png"], capsys)
    assert code == 0 and err.count("dqn-plot: note: skipped ") == 2
    assert Image.open(tmp_path / "f.png").size == PNG_SIZE
    expect_error(report_main, [tmp_path, tmp_path / "copying.h5"], capsys, "copying.h5")  # named: an error


def test_the_save_versions_snapshots_of_a_run_are_one_run_its_latest(tmp_path):
    def snapshot(seed, k):  # what --save-versions 50000 writes at step 50,000 k
        return synthetic(tmp_path / f"run{seed}_{k}.h5", [float(k)] * k, seed=seed, save_versions=50_000,
                         name=str(tmp_path / f"run{seed}"))

    latest = [snapshot(1, 3), snapshot(2, 2)]
    (s,) = load_runs([snapshot(1, 1), snapshot(1, 2), snapshot(2, 1), *latest])
    assert [r.path for r in s.runs] == latest and s.notes() == []


def test_runs_of_one_configuration_sharing_a_seed_are_noted(tmp_path, capsys):
    runs = [synthetic(tmp_path / f"pong_{k}.h5", [1.0, 2.0], seed=seed) for k, seed in enumerate((1, 1, 2))]
    note = "pong: several runs have seed 1; each counts as a seed (on a CPU they repeat one run)"
    code, out, err = run_cli(report_main, [*runs, "--format", "csv"], capsys)
    assert code == 0 and err == f"dqn-report: warning: {note}\n" and "pong,pong,3," in out
    code, _, err = run_cli(plot_main, [*runs, "-o", tmp_path / "f.png"], capsys)
    assert code == 0 and err == f"dqn-plot: note: {note}\n"
    code, _, err = run_cli(report_main, runs[1:], capsys)
    assert code == 0 and err == ""


def test_evaluations_that_finished_no_episode_are_not_scores(tmp_path, capsys):
    """DQN 3.0 records a score of 0 for them (no total over max(1, 0) episodes)."""
    a = synthetic(tmp_path / "pong_s1.h5", [0.0, -20.0, 0.0], episodes=[0, 2, 0], seed=1)
    b = synthetic(tmp_path / "pong_s2.h5", [0.0, 0.0, -18.0], episodes=[0, 0, 1], seed=2)
    (s,) = load_runs([a, b])
    np.testing.assert_array_equal(s.runs[0].score_history, [np.nan, -20.0, np.nan])
    (row,) = report_rows([s])
    assert (row["evaluations"], row["best"], row["last"], row["last_std"]) == (3, -18.0, -19.0, 1.0)
    xs, mean, low, high, _ = seed_curves(s, "score_history", "steps")
    assert xs.tolist() == [100_000, 150_000] and mean.tolist() == [-20.0, -18.0] and low.tolist() == [-20.0, -18.0]
    note = "pong_s: 4 of 6 evaluations finished no episode; their recorded 0 is not a score and is left out"
    code, _, err = run_cli(report_main, [a, b], capsys)
    assert code == 0 and err.startswith(f"dqn-report: warning: {note}")
    code, _, err = run_cli(plot_main, [a, b, "-o", tmp_path / "f.png"], capsys)
    assert code == 0 and err.startswith(f"dqn-plot: note: {note}")
    unscored = synthetic(tmp_path / "quick.h5", [0.0, 0.0], episodes=[0, 0])
    code, out, _ = run_cli(report_main, [unscored, "--format", "csv"], capsys)
    row = list(csv.DictReader(out.splitlines()))[0]
    assert code == 0 and row["evaluations"] == "2" and row["best"] == row["last"] == row["human_normalised"] == ""
    assert run_cli(plot_main, [unscored, "-o", tmp_path / "g.svg"], capsys)[0] == 0
    texts = re.findall(r"<!-- (.*?) -->", (tmp_path / "g.svg").read_text())  # matplotlib's SVG names each text
    x_ticks = [t for t in texts if re.fullmatch(r"\d+k", t)]  # the evaluations at 200k and 400k frames
    assert x_ticks[0] == "200k" and x_ticks[-1] == "400k"
    assert x_ticks == 2 * x_ticks[:len(x_ticks) // 2]  # the empty score panel takes the value panel's x range


def test_report_of_a_run_without_evaluation_has_blanks(tmp_path, capsys):
    code, out, err = run_cli(report_main, [synthetic(tmp_path / "new.h5", []), "--format", "csv"], capsys)
    row = list(csv.DictReader(out.splitlines()))[0]
    assert code == 0 and err == "" and row["evaluations"] == "0"
    assert row["best"] == row["last"] == row["human_normalised"] == row["dqn_normalised"] == ""
    assert row["nature"] == "18.9"


def test_console_scripts(trained, tmp_path):
    fig = tmp_path / "f.png"
    plot = subprocess.run(["dqn-plot", trained, "-o", str(fig)], capture_output=True, text=True)
    assert plot.returncode == 0 and Image.open(fig).size == PNG_SIZE
    report = subprocess.run(["dqn-report", trained, "--format", "csv"], capture_output=True, text=True)
    assert report.returncode == 0
    row = list(csv.DictReader(report.stdout.splitlines()))[0]
    assert (row["game"], row["frames"], row["evaluations"]) == ("pong", "2000", "2")
    assert row["last"] == "" and "2 of 2 evaluations finished no episode" in report.stderr  # 200 steps of Pong


def test_plot_refuses_values_too_large_to_draw_with_one_line(tmp_path, capsys):
    """Finite values near float64's largest (a damaged file) made matplotlib's axis arithmetic
    overflow: a traceback (ValueError, LinAlgError) after warnings, instead of one line."""
    for field, values in (("v_history", dict(values=[1e308, -1e308])), ("score_history", dict())):
        rewards = [1e308, -1e308] if field == "score_history" else [1.0, 2.0]
        run = synthetic(tmp_path / "huge.h5", rewards, **values)
        expect_error(plot_main, [run, "-o", tmp_path / "f.png"], capsys,
                     f"huge: {field} holds 1e+308, too large to draw")
        assert not (tmp_path / "f.png").exists()
    run = synthetic(tmp_path / "run.h5", [1.0, 2.0])
    bad_csv = tmp_path / "ref.csv"
    bad_csv.write_text("game,run,frames,mean_return\npong,0,0,1e308\npong,1,0,-1e308\npong,0,1e7,0\n")
    expect_error(plot_main, [run, "-o", tmp_path / "f.png", "--reference", bad_csv], capsys,
                 "ref.csv: pong's curves holds 1e+308, too large to draw")
    # The largest drawable values, as bands of two seeds and a reference, draw without a warning.
    seeds = [synthetic(tmp_path / f"big{k}.h5", [1e150 * sign, -1e150 * sign], values=[1e150 * sign, -1e150 * sign],
                       seed=k) for k, sign in ((1, 1), (2, -1))]
    bad_csv.write_text("game,run,frames,mean_return\npong,0,0,1e150\npong,1,0,-1e150\npong,0,1e150,0\n")
    for band in ("minmax", "std"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            code, _, _ = run_cli(plot_main, [*seeds, "-o", tmp_path / "f.png", "--band", band, "--reference", bad_csv],
                                 capsys)
        assert code == 0


def test_plot_never_writes_the_figure_over_a_history_it_plots(tmp_path, capsys):
    """-o naming an input history (a history saved as run.png, or a link to one) replaced the
    history with the figure."""
    run = synthetic(tmp_path / "run.png", [1.0, 2.0])  # load_history reads any name
    before = Path(run).read_bytes()
    (tmp_path / "link.png").symlink_to(run)
    for output in (run, tmp_path / "link.png"):
        expect_error(plot_main, [run, "-o", output], capsys, "is one of the histories to plot")
        assert Path(run).read_bytes() == before
    linked = tmp_path / "runs" / "link.h5"
    linked.parent.mkdir()
    linked.symlink_to(run)  # found in a folder
    expect_error(plot_main, [tmp_path / "runs", "-o", run], capsys, "is one of the histories to plot")
    assert Path(run).read_bytes() == before and load_history(run).reward_history.tolist() == [1.0, 2.0]


def drawn_figure(monkeypatch, capsys, args):
    """The matplotlib figure dqn-plot draws for ``args`` (kept open: close it)."""
    import matplotlib.pyplot as plt

    drawn = []
    with monkeypatch.context() as patch:
        patch.setattr(plt, "close", drawn.append)
        code, _, err = run_cli(plot_main, args, capsys)
    assert code == 0, err
    (figure,) = drawn
    return figure


def band_extent(ax, label=None):
    """(x min, x max, y min, y max) of the band labelled ``label`` (the only unlabelled one if None)."""
    (band,) = [c for c in ax.collections if (c.get_label() == label if label else c.get_label().startswith("_"))]
    vertices = np.concatenate([p.vertices for p in band.get_paths()])
    return vertices[:, 0].min(), vertices[:, 0].max(), vertices[:, 1].min(), vertices[:, 1].max()


def test_plot_axes_in_frames_steps_and_epochs_place_runs_and_reference_curves(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    ref = tmp_path / "curves.csv"  # runs 0 and 1 at 0, 1.5M, ..., 6M frames: values -21+k and -18+k
    ref.write_text("game,run,frames,mean_return\n" + "".join(
        f"pong,{r},{k * 1_500_000},{-21 + 3 * r + k}\n" for r in (1, 0) for k in range(5)))
    # actrep 2 and 2 updates per update_freq steps: neither is the paper's 4 and 1.
    run = synthetic(tmp_path / "run.h5", [-21.0, -20.0, -19.0, -18.0], first_step=250_000, eval_freq=250_000,
                    actrep=2, n_replay=2, update_freq=4, learn_start=50_000)
    steps = [250_000, 500_000, 750_000, 1_000_000]
    expected = {  # the run's points; the band's end: the first reference point at or after the run's end
        "frames": ([2 * s for s in steps], 3_000_000, -16.0),
        "steps": (steps, 1_500_000, -16.0),  # reference frames / the runs' actrep
        "epochs": ([(s - 50_000) / 4 * 2 / 50_000 for s in steps], 7.5, -14.0),  # 800,000 frames per epoch
    }
    for x, (points, band_end, band_top) in expected.items():
        figure = drawn_figure(monkeypatch, capsys, [run, "-o", tmp_path / "f.png", "--x", x, "--reference", ref])
        ax_score, ax_value = figure.axes
        (line,) = [l for l in ax_score.lines if l.get_label() == "run"]
        assert line.get_xdata().tolist() == points and ax_value.lines[0].get_xdata().tolist() == points
        assert band_extent(ax_score, "curves, 2 runs") == (0.0, band_end, -21.0, band_top)
        assert ax_score.get_xlabel() == ax_value.get_xlabel() == plot.X_LABELS[x]
        plt.close(figure)


@pytest.mark.parametrize("band, low, high", [("minmax", 0.0, 3.0), ("std", 1 - 2 ** 0.5, 1 + 2 ** 0.5)])
def test_plot_band_over_seeds(tmp_path, capsys, monkeypatch, band, low, high):
    import matplotlib.pyplot as plt

    runs = [synthetic(tmp_path / f"s{s}.h5", [v, v], seed=s, values=[v, v]) for s, v in ((1, 0.0), (2, 0.0), (3, 3.0))]
    figure = drawn_figure(monkeypatch, capsys, [*runs, "-o", tmp_path / "f.png", "--band", band])
    for ax in figure.axes:
        assert band_extent(ax)[2:] == pytest.approx((low, high))
    plt.close(figure)


# -- several games, labels, titles -----------------------------------------------------------

def test_display_names_of_games():
    assert [display_name(g) for g in ("space_invaders", "pong", "ms_pacman", "qbert", "x$\\bar$")] == [
        "Space Invaders", "Pong", "Ms. Pac-Man", "Q*bert", "x$\\bar$"]


def test_several_games_draw_a_column_each_with_the_legend_below_the_panels(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    games = ("space_invaders", "seaquest", "pong")
    runs = [synthetic(tmp_path / f"{g}.h5", list(np.linspace(100, 600, 20)), game=g) for g in games]
    args = [*runs, "-o", tmp_path / "f.png", "--reference", "dopamine", "--no-nature"]
    figure = drawn_figure(monkeypatch, capsys, args)
    assert len(figure.axes) == 6
    scores, values = figure.axes[:3], figure.axes[3:]  # a row of score panels above a row of value panels
    assert [ax.get_title() for ax in scores] == ["Space Invaders", "Seaquest", "Pong"]
    assert figure.get_suptitle() == ""
    for ax_score, ax_value in zip(scores, values):
        assert ax_score.get_shared_x_axes().joined(ax_score, ax_value)
        assert ax_score.get_legend() is None and ax_value.get_legend() is None
    assert not scores[0].get_shared_x_axes().joined(scores[0], scores[1])  # each game its own x range
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [*games, "Dopamine DQN, 5 runs"]
    figure.canvas.draw()
    box = legend.get_window_extent()
    assert all(box.y1 < ax.get_window_extent().y0 for ax in figure.axes)  # below every panel, over no data
    plt.close(figure)
    # One label for all: one legend entry, one colour; a title.
    figure = drawn_figure(monkeypatch, capsys, [*args, "--label", "dqn_nature", "--title", "Three games"])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["dqn_nature", "Dopamine DQN, 5 runs"]
    assert len({ax.lines[0].get_color() for ax in figure.axes}) == 1 and figure.get_suptitle() == "Three games"
    plt.close(figure)
    # One label per configuration, in order.
    figure = drawn_figure(monkeypatch, capsys, [*runs, "-o", tmp_path / "f.png", "--label", "a", "--label", "b",
                                                "--label", "a"])
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["a", "b"]
    assert [ax.lines[0].get_color() for ax in figure.axes[:3]] == ["C0", "C1", "C0"]
    plt.close(figure)
    with Image.open(tmp_path / "f.png") as im:
        assert im.size == (3 * 370, 520)  # plot.GAME_SIZE per game at 100 dpi


def test_five_games_wrap_to_a_second_row(tmp_path, capsys, monkeypatch):
    import matplotlib.pyplot as plt

    games = ("pong", "breakout", "enduro", "seaquest", "space_invaders")
    runs = [synthetic(tmp_path / f"{g}.h5", [1.0, 2.0], game=g) for g in games]
    figure = drawn_figure(monkeypatch, capsys, [*runs, "-o", tmp_path / "f.png"])
    shown = [ax for ax in figure.axes if ax.axison]
    assert len(figure.axes) == 12 and len(shown) == 10  # 3 columns, 2 rows of games; one column pair unused
    assert [ax.get_title() for ax in shown if ax.get_title()] == ["Pong", "Breakout", "Enduro", "Seaquest",
                                                                  "Space Invaders"]
    plt.close(figure)


def test_file_names_and_arguments_that_are_not_utf8(tmp_path):
    """Python holds such bytes as surrogates, which h5py's attributes and matplotlib's text
    refused with a traceback."""
    folder = os.fsencode(tmp_path)
    run = folder + b"/run\xff\xfe.h5"
    os.rename(synthetic(tmp_path / "run.h5", [1.0, 2.0]), run)
    csv_file = folder + b"/ref\xff.csv"
    with open(csv_file, "w") as f:
        f.write("game,run,frames,mean_return\npong,0,0,-20\npong,0,400000,-10\n")
    plot = subprocess.run([b"dqn-plot", run, b"--reference", csv_file, b"--label", b"L\xff", b"--title", b"T\xfe"],
                          capture_output=True)
    assert plot.returncode == 0 and plot.stderr == b"", plot.stderr
    with Image.open(folder + b"/run\xff\xfe.png") as im:
        assert im.size == PNG_SIZE
    slim = subprocess.run([b"dqn-slim", run, folder + b"/slim\xff.h5", b"--networks", b"none"], capture_output=True)
    assert slim.returncode == 0 and slim.stderr == b"", slim.stderr
    assert load_history(os.fsdecode(folder + b"/slim\xff.h5")).attrs["slimmed_from"] == "run\ufffd\ufffd.h5"
    report = subprocess.run([b"dqn-report", run, b"--format", b"csv"], capture_output=True)
    assert report.returncode == 0 and b"pong,run\xef\xbf\xbd\xef\xbf\xbd,1," in report.stdout  # U+FFFD twice


# -- dqn-report --aggregate ----------------------------------------------------------------------

def dopamine_at(game, frames):
    """Dopamine's DQN returns of ``game`` at ``frames``, read with the csv module."""
    from importlib import resources

    text = (resources.files("dqn_nature") / "reference" / "dopamine_dqn_curves.csv").read_text()
    return [float(r["mean_return"]) for r in csv.DictReader(text.splitlines())
            if r["game"] == game and int(r["frames"]) == frames]


def test_aggregate_by_hand(tmp_path):
    pytest.importorskip("rliable")
    # Evaluations every 250,000 steps (1M frames): the fourth at 4M frames.
    def run(game, seed, score_at_4m):
        return synthetic(tmp_path / f"{game}_{seed}.h5", [0.0, 0.0, 0.0, score_at_4m, 0.0], game=game, seed=seed,
                         first_step=250_000, eval_freq=250_000)

    paths = [run("pong", 1, -20.7 + 35.3 * 0.2), run("pong", 2, -20.7 + 35.3 * 0.4),  # 20% and 40% of human
             run("breakout", 1, 1.7 + 28.8 * 1.0), run("breakout", 2, 1.7 + 28.8 * 3.0),  # 100% and 300%
             run("seaquest", 1, 68.4 + 41986.3 * 0.5), run("seaquest", 2, 68.4 + 41986.3 * 0.6)]  # 50%, 60%
    notes = []
    rows = aggregate(load_runs(paths), frames=4_000_000, reps=300, note=notes.append)
    assert notes == []
    # Game means 30, 200, 55: median 55; mean 95; IQM over the six scores 20, 40, 50, 60, 100,
    # 300: the mean of those left after a quarter of them, rounded down (one), is cut off each end.
    expected = {"median": 55.0, "IQM": (40 + 50 + 60 + 100) / 4, "mean": 95.0}
    assert [r["metric"] for r in rows] == list(expected)
    for row in rows:
        assert row["score"] == pytest.approx(expected[row["metric"]])
        assert row["ci_low"] <= row["score"] <= row["ci_high"] and row["ci_low"] < row["ci_high"]
        assert (row["frames"], row["games"], row["runs"], row["reference_runs"]) == (
            4_000_000, "breakout pong seaquest", 2, 5)
    dopamine = {g: [human_normalised(v, g) for v in dopamine_at(g, 4_000_000)] for g in ("breakout", "pong", "seaquest")}
    means = [np.mean(v) for v in dopamine.values()]
    assert rows[0]["reference"] == pytest.approx(np.median(means))
    assert rows[2]["reference"] == pytest.approx(np.mean(means))
    for row in rows:
        assert row["reference_ci_low"] <= row["reference"] <= row["reference_ci_high"]
    again = aggregate(load_runs(paths), frames=4_000_000, reps=300)
    assert again == rows  # a fixed seed: the same intervals each time


def test_aggregate_leaves_out_what_it_cannot_use_and_says_so(tmp_path):
    pytest.importorskip("rliable")
    short = synthetic(tmp_path / "short.h5", [5.0], first_step=250_000)  # 1M frames only
    unscored = synthetic(tmp_path / "unscored.h5", [0.0, 0.0], game="breakout", episodes=[0, 0],
                         first_step=250_000, eval_freq=250_000)
    tetris = synthetic(tmp_path / "tetris.h5", [1.0, 2.0], game="tetris", first_step=250_000, eval_freq=250_000)
    seaquest = synthetic(tmp_path / "seaquest.h5", [100.0, 300.0], game="seaquest", first_step=250_000,
                         eval_freq=250_000)
    notes = []
    rows = aggregate(load_runs([short, unscored, tetris, seaquest]), frames=2_000_000, reps=200, note=notes.append)
    assert notes == [
        f"{short}: no score at 2,000,000 frames (last evaluation: 1,000,000); left out of the aggregate",
        f"{unscored}: no score at 2,000,000 frames (last evaluation: 2,000,000); left out of the aggregate",
        "tetris: no random and human scores of tetris; left out of the aggregate",
        "one run per game: the confidence intervals of these runs have no width (they come from resampling each "
        "game's runs)"]
    assert rows[0]["games"] == "seaquest" and rows[0]["score"] == rows[0]["ci_low"] == rows[0]["ci_high"] == \
        pytest.approx(human_normalised(300.0, "seaquest"))
    with pytest.raises(ValueError, match="no run has a score at 3,000,000 frames"):
        aggregate(load_runs([short, seaquest]), frames=3_000_000, reps=200)
    other = synthetic(tmp_path / "seaquest_b.h5", [1.0, 2.0], game="seaquest", first_step=250_000,
                      eval_freq=250_000, lr=0.001)
    with pytest.raises(ValueError, match=r"several configurations of seaquest \(seaquest \[lr=.*\]\); the aggregate "
                                         "takes one per game"):
        aggregate(load_runs([seaquest, other]), frames=2_000_000, reps=200)
    notes = []
    halves = synthetic(tmp_path / "halves.h5", [100.0, 200.0, 300.0], game="seaquest", first_step=125_000,
                       eval_freq=125_000)  # at 0.5M, 1M and 1.5M frames
    rows = aggregate(load_runs([halves]), frames=1_500_000, reps=200, note=notes.append)  # Dopamine: every 1M
    assert rows[0]["reference"] is None and rows[0]["reference_ci_low"] is None
    assert notes[0] == "Dopamine DQN has no curves of seaquest at 1,500,000 frames; its column is left blank"


def test_report_aggregate_command(tmp_path, capsys):
    pytest.importorskip("rliable")
    runs = [synthetic(tmp_path / f"{g}.h5", [score] * 10, game=g, first_step=250_000, eval_freq=250_000)
            for g, score in (("pong", -3.05), ("breakout", 30.5))]  # 50% and 100% of human at 10M frames
    code, out, err = run_cli(report_main, [*runs, "--aggregate", "--reps", 200], capsys)
    assert code == 0 and err.startswith("dqn-report: warning: one run per game")
    caption, intervals, blank, header, *rows = out.strip().splitlines()
    assert caption == ("Human-normalised score (%) at 10,000,000 frames over 2 games (breakout, pong): these runs, "
                       "1 per game; Dopamine DQN, 5 per game.")
    assert intervals == "95% stratified-bootstrap confidence intervals (rliable, 200 resamples)." and blank == ""
    assert header.split()[:4] == ["metric", "these", "runs", "95%"]
    assert [r.split()[:4] for r in rows] == [[m, "75.0", "[75.0,", "75.0]"] for m in ("median", "IQM", "mean")]
    code, out, _ = run_cli(report_main, [*runs, "--aggregate", "--reps", 200, "--format", "csv"], capsys)
    (median, *_) = csv.DictReader(out.splitlines())
    assert (median["metric"], median["frames"], median["games"], median["runs"], median["score"]) == (
        "median", "10000000", "breakout pong", "1", "75.0")
    code, out, _ = run_cli(report_main, [*runs, "--aggregate", "--frames", 2_000_000, "--format", "json",
                                         "--reps", 200], capsys)
    assert [r["frames"] for r in json.loads(out)] == [2_000_000] * 3


def test_report_aggregate_without_rliable_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "rliable", None)  # import rliable raises ImportError
    run = synthetic(tmp_path / "pong.h5", [1.0])
    expect_error(report_main, [run, "--aggregate"], capsys,
                 'the aggregate needs the rliable library: pip install "dqn-nature[rliable]"')
