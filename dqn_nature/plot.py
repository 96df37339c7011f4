"""``dqn-plot``: training curves in the style of Figure 2 of Mnih et al. (Nature 2015).

Two panels against training frames, agent steps or epochs: the average score per
evaluation episode (``score_history``: ``reward_history`` where an episode finished) and
the average predicted action value on the held-out validation set (``v_history``). Seeds
of one configuration draw as a mean line with a band; the paper's score, the random and
human scores and external curves (``--reference``) can be drawn for comparison.
"""
from __future__ import annotations

import csv
import io
import os
import textwrap

import click
import numpy as np

from .console import fail, run_command
from .files import atomic_path, os_reason, unwritable
from .history import HistoryError
from .runs import history_paths, load_runs
from .scores import reference

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
UPDATES_PER_EPOCH = 50_000  # the paper's epoch: 50,000 minibatch updates
# The paper's setting (an update every 4 steps of 4 frames): frames per epoch, for curves known only in frames.
NATURE_FRAMES_PER_EPOCH = UPDATES_PER_EPOCH * 4 * 4
REFERENCE_COLUMNS = ("game", "run", "frames", "mean_return")
X_LABELS = {"frames": "Training frames", "steps": "Training steps (agent steps)",
            "epochs": "Training epochs (50,000 minibatch updates)"}
LEGEND_WIDTH = 50  # characters per line of a legend entry, so one fits its panel
FIGSIZE = (11.0, 4.5)  # inches; the image is FIGSIZE x dpi pixels
# The largest magnitude of a value drawn: matplotlib's axis arithmetic overflows near float64's
# largest (1.8e308), and a band's standard deviation squares the values. No float32 network's
# Q-value (3.4e38 at most) nor game score comes near it.
DRAWABLE = 1e150


class PlotError(ValueError):
    """Bad input for a plot; the message is one line for the user."""


def x_values(run, steps: np.ndarray, x: str) -> np.ndarray:
    """Training steps ``steps`` (int array) of ``run`` (a ``History``) on axis ``x``.

    ``frames`` = steps x actrep; ``epochs`` = minibatch updates / 50,000, where the updates
    done by step s are max(0, s - learn_start) / update_freq x n_replay (float64).
    """
    steps = np.asarray(steps, dtype=np.float64)
    if x == "steps":
        return steps
    if x == "frames":
        return steps * run.actrep
    a = run.arguments
    updates = np.maximum(0.0, steps - (a.get("learn_start") or 0)) / (a.get("update_freq") or 1) * (
        a.get("n_replay") or 1)
    return updates / UPDATES_PER_EPOCH


def seed_curves(run_set, field: str, x: str):
    """Mean, min, max and std over the seeds of ``run_set`` of history ``field``.

    Returns float64 arrays ``(xs, mean, low, high, std)`` over the sorted evaluation steps of
    all seeds; at each step, the statistics are over the seeds with a value there (NaN or infinity
    is none: ``score_history`` at an evaluation that finished no episode, a diverged network's values).
    """
    by_step = {}
    for run in run_set.runs:
        for step, value in zip(run.step_history, getattr(run, field)):
            if np.isfinite(value):
                by_step.setdefault(int(step), []).append(float(value))
    steps = sorted(by_step)
    values = [np.array(by_step[s]) for s in steps]
    stats = np.array([(v.mean(), v.min(), v.max(), v.std()) for v in values]).reshape(-1, 4).T
    return (x_values(run_set.runs[0], np.array(steps, dtype=np.int64), x), *stats)


def read_reference(path: str) -> dict:
    """Curves from a UTF-8 CSV (with or without a byte-order mark, as Excel saves it) with columns
    ``game,run,frames,mean_return`` (other columns ignored).

    Returns ``{game: (frames, low, high)}``: float64 arrays of the sorted distinct frames and
    the min and max of ``mean_return`` over runs there.

    Raises:
        PlotError: unreadable file, missing columns or a value that is not a finite number
            of magnitude at most ``DRAWABLE``.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in REFERENCE_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise PlotError(f"{path}: reference CSV lacks column(s) {', '.join(missing)} "
                                f"(needs {','.join(REFERENCE_COLUMNS)})")
            points = {}
            for line, row in enumerate(reader, start=2):
                try:
                    frames, value = float(row["frames"]), float(row["mean_return"])
                    if not (abs(frames) <= DRAWABLE and abs(value) <= DRAWABLE):  # NaN included
                        raise ValueError
                except (TypeError, ValueError):
                    raise PlotError(f"{path}:{line}: frames and mean_return must be finite numbers "
                                    f"(of magnitude at most {DRAWABLE:g})") from None
                points.setdefault(row["game"], {}).setdefault(frames, []).append(value)
    except OSError as e:
        raise PlotError(f"{path}: cannot read the reference CSV ({e.strerror})") from None
    except UnicodeDecodeError:
        raise PlotError(f"{path}: not a text CSV file") from None
    except csv.Error as e:  # e.g. a field over the csv module's size limit
        raise PlotError(f"{path}: not a readable CSV file ({e})") from None
    curves = {}
    for game, by_frames in points.items():
        frames = sorted(by_frames)
        curves[game] = (np.array(frames), np.array([min(by_frames[f]) for f in frames]),
                        np.array([max(by_frames[f]) for f in frames]))
    return curves


def plot_runs(paths, output: str, x: str = "frames", band: str = "minmax", show_random_human: bool = False,
              reference_csv: str | None = None, allow_mixed: bool = False, dpi: int = 100, nature: bool = True,
              note=lambda message: None) -> None:
    """Draw the two Figure-2 panels for the histories ``paths`` and write ``output``.

    Args:
        paths: history files or folders (see ``runs.load_runs``; a file in a folder that is
            not a readable history is skipped, and ``note`` called with why).
        output: ``.png``, ``.svg`` or ``.pdf`` path, written atomically; a PNG is
            ``FIGSIZE`` x ``dpi`` pixels.
        x: ``"frames"``, ``"steps"`` or ``"epochs"``.
        band: ``"minmax"`` or ``"std"`` (mean +- one standard deviation over seeds).
        show_random_human: also draw the random and human scores.
        reference_csv: external curves in frames (see ``read_reference``), drawn as a grey band
            over the runs' range (up to its first point at or after their last evaluation); in
            epochs they are converted at the paper's 800,000 frames per epoch.
        allow_mixed: allow runs of several games in one figure.
        nature: draw the Nature DQN score, a dashed line with its standard deviation hatched.
        note: called with a one-line message for runs with nothing to draw, for evaluations
            that finished no episode (no score to draw) and for runs of one configuration that
            share a seed.

    Raises:
        PlotError: unknown output suffix, an output that cannot be created (``files.unwritable``)
            or that is one of ``paths``' histories, mixed games, bad reference CSV, no run with an
            evaluation, or a value beyond ``DRAWABLE`` in magnitude (a damaged history).
        history.HistoryError: a path that is not a history, or no readable history at all.
        OSError: the figure cannot be written.
    """
    fmt = FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise PlotError(f"{output}: unknown figure type; use a .png, .svg or .pdf suffix")
    problem = unwritable(output)
    if problem:
        raise PlotError(f"cannot write {output}: {problem}")
    paths = list(paths)
    if os.path.realpath(output) in map(os.path.realpath, history_paths(paths)):  # a link to one too
        raise PlotError(f"{output} is one of the histories to plot; write the figure to another file")
    run_sets = load_runs(paths, skip=lambda m: note(f"skipped {m}"))
    games = list(dict.fromkeys(s.game for s in run_sets))
    if len(games) > 1 and not allow_mixed:
        raise PlotError(f"the runs are of several games ({', '.join(games)}); pass --allow-mixed to plot them together")
    curves = {} if reference_csv is None else read_reference(reference_csv)
    if not any(len(run.step_history) for s in run_sets for run in s.runs):
        raise PlotError("no evaluation in any of the runs yet; nothing to plot")
    for s in run_sets:
        for field in ("score_history", "v_history"):
            values = np.concatenate([getattr(run, field) for run in s.runs])
            largest = np.abs(values[np.isfinite(values)]).max(initial=0.0)
            if largest > DRAWABLE:
                raise PlotError(f"{s.label}: {field} holds {largest:.3g}, too large to draw (at most "
                                f"{DRAWABLE:g}; a damaged history?)")
    for s in run_sets:
        for message in s.notes():
            note(message)
        for run in s.runs:
            if len(run.step_history) == 0:
                note(f"{run.path}: no evaluation yet (step {run.steps}); nothing to draw for it")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    # Frames and steps as 250k or 1M; epochs as plain numbers (an engineering 250m reads as millions).
    eng = matplotlib.ticker.EngFormatter(sep="")

    def x_text(value: float) -> str:
        return f"{value:g}" if x == "epochs" else eng(value)

    # Names are plain text: a "$" in a file or game name does not start mathtext.
    with matplotlib.rc_context({"text.parse_math": False}):
        # One x range: a score panel with no score (no evaluation finished an episode) takes the runs' range.
        fig, (ax_score, ax_value) = plt.subplots(1, 2, sharex=True, figsize=FIGSIZE, dpi=dpi, layout="constrained")
        x_max = -np.inf
        for i, s in enumerate(run_sets):
            if not any(len(run.step_history) for run in s.runs):
                continue
            seeds = len(s.runs)
            label = "\n".join(textwrap.wrap(s.label + (f" ({seeds} seeds)" if seeds > 1 else ""), LEGEND_WIDTH))
            for ax, field in ((ax_score, "score_history"), (ax_value, "v_history")):
                xs, mean, low, high, std = seed_curves(s, field, x)
                if not len(xs):
                    continue
                x_max = max(x_max, xs[-1])
                ax.plot(xs, mean, color=f"C{i}", marker="o" if len(xs) < 30 else None, markersize=3, label=label)
                if seeds > 1:
                    lo, hi = (mean - std, mean + std) if band == "std" else (low, high)
                    ax.fill_between(xs, lo, hi, color=f"C{i}", alpha=0.25, linewidth=0)
        actrep = run_sets[0].runs[0].actrep
        for game in games:
            suffix = f" ({game})" if len(games) > 1 else ""
            ref = reference(game)
            if nature and ref.nature_mean is not None:
                text = f"Nature DQN {ref.nature_mean:g}" + (f" ± {ref.nature_std:g}" if ref.nature_std else "")
                ax_score.axhline(ref.nature_mean, color="black", linestyle="--", linewidth=1, label=text + suffix)
                if ref.nature_std:
                    ax_score.axhspan(ref.nature_mean - ref.nature_std, ref.nature_mean + ref.nature_std,
                                     facecolor="none", edgecolor="black", alpha=0.25, hatch="//", linewidth=0)
            if show_random_human:
                for value, name, color in ((ref.random, "random", "tab:red"), (ref.human, "human", "tab:green")):
                    if value is not None:
                        ax_score.axhline(value, color=color, linestyle=":", linewidth=1.2,
                                         label=f"{name} {value:g}{suffix}")
            if reference_csv:
                if game not in curves:
                    note(f"{reference_csv}: no reference curves for {game}")
                    continue
                frames, low, high = curves[game]
                ref_x = {"frames": frames, "steps": frames / actrep, "epochs": frames / NATURE_FRAMES_PER_EPOCH}[x]
                n = np.searchsorted(ref_x, x_max) + 1  # up to the first point at or after the runs' end
                if n < 2:  # a band of one point is invisible, yet it would have a legend entry
                    note(f"{reference_csv}: the {game} curves start at {x_text(ref_x[0])} {x}, past the runs' end; "
                         "not drawn")
                    continue
                ax_score.fill_between(ref_x[:n], low[:n], high[:n], color="grey", alpha=0.35, linewidth=0,
                                      label=f"{os.path.basename(reference_csv)}{suffix}")
        ax_score.set(xlabel=X_LABELS[x], ylabel="Average score per episode", title="Average score per episode")
        ax_value.set(xlabel=X_LABELS[x], ylabel="Average action value (Q)",
                     title="Average predicted action value (validation set)")
        for ax in (ax_score, ax_value):
            if ax.get_legend_handles_labels()[0]:  # a panel can be empty: no score, no value, no reference
                ax.legend(fontsize="small")
            if x != "epochs":
                ax.xaxis.set_major_formatter(eng)
        fig.suptitle(", ".join(games))
        image = io.BytesIO()  # drawn in memory: a full disk then fails our write, not matplotlib's PDF writer
        fig.savefig(image, format=fmt, dpi=dpi)
        plt.close(fig)
    with atomic_path(output) as tmp, open(tmp, "wb") as fh:
        fh.write(image.getbuffer())


def default_output(first: str) -> str:
    """``dqn-plot``'s figure without ``-o``, from its first argument: ``runs/a.h5`` gives
    ``runs/a.png``, the folder ``runs`` gives ``runs/runs.png``. No Lua counterpart."""
    if os.path.isdir(first):
        return os.path.join(first, (os.path.basename(os.path.abspath(first)) or "curves") + ".png")
    return (first[:-3] if first.endswith(".h5") else first) + ".png"


@click.command(context_settings=dict(help_option_names=["-h", "--help"], max_content_width=110))
@click.argument("runs", nargs=-1, required=True, metavar="RUN.h5|FOLDER...")
@click.option("-o", "--output", metavar="FIG",
              help="figure file: .png, .svg or .pdf, replaced if it exists  [default: RUN.png beside the first "
                   "RUN.h5, or FOLDER/<FOLDER's name>.png where the first is a FOLDER]")
@click.option("--x", "x", type=click.Choice(list(X_LABELS)), default="frames", show_default=True,
              help="x axis: frames (steps x actrep), agent steps, or epochs of 50,000 minibatch updates")
@click.option("--band", type=click.Choice(["minmax", "std"]), default="minmax", show_default=True,
              help="band over seeds of one configuration: min-max, or mean +- one standard deviation")
@click.option("--show-random-human", is_flag=True, help="also draw the random and human scores")
@click.option("--reference", "reference_csv", metavar="CSV",
              help="overlay curves with columns game,run,frames,mean_return as a grey min-max band over "
                   "the runs' range (e.g. Dopamine's DQN curves)")
@click.option("--allow-mixed", is_flag=True, help="allow runs of several games in one figure")
@click.option("--no-nature", is_flag=True,
              help="leave out the Nature DQN score, which can dwarf the curves of a run's first millions of frames")
@click.option("--dpi", type=click.IntRange(10, 1000), default=100, show_default=True,
              help=f"resolution; a PNG is {FIGSIZE[0]:g} x {FIGSIZE[1]:g} inches x dpi pixels")
def plot_command(runs, output, x, band, show_random_human, reference_csv, allow_mixed, no_nature, dpi):
    """Plot DQN training curves (score and validation Q) in the style of Figure 2 of the Nature paper."""
    output = output or default_output(runs[0])
    try:
        plot_runs(runs, output, x=x, band=band, show_random_human=show_random_human, reference_csv=reference_csv,
                  allow_mixed=allow_mixed, dpi=dpi, nature=not no_nature,
                  note=lambda m: click.echo(f"dqn-plot: note: {m}", err=True))
    except (PlotError, HistoryError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write {output}: {os_reason(e)}", code=1)
    click.echo(f"Wrote {output}")


def main(args=None):
    """Entry point of ``dqn-plot``."""
    run_command(plot_command, args)
