"""Training curves in the style of Figure 2 of Mnih et al. (Nature 2015), for ``dqn-plot``: per game,
the average score per evaluation episode (``score_history``) and the average predicted action value on
the held-out validation set (``v_history``), against training frames, agent steps or epochs. No Lua
counterpart."""
from __future__ import annotations

import io
import math
import os
import re
import textwrap

import numpy as np

from .files import atomic_path, printable, unwritable
from .runs import history_paths, load_runs
from .scores import read_curves, reference

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
UPDATES_PER_EPOCH = 50_000  # the paper's epoch: 50,000 minibatch updates
# The paper's setting (an update every 4 steps of 4 frames): frames per epoch, for curves known only in frames.
NATURE_FRAMES_PER_EPOCH = UPDATES_PER_EPOCH * 4 * 4
X_LABELS = {"frames": "Training frames", "steps": "Training steps (agent steps)",
            "epochs": "Training epochs (50,000 minibatch updates)"}
SCORE_LABEL, VALUE_LABEL = "Average score per episode", "Average action value (Q)"
LEGEND_WIDTH = 50  # characters per line of a legend entry
FIGSIZE = (11.0, 4.5)  # inches, one game; the image is FIGSIZE x dpi pixels
GAME_SIZE = (3.7, 5.2)  # inches per game (a column of two panels) when several games are drawn
MAX_COLUMNS = 4  # games side by side; more wrap to further rows
# The largest magnitude of a value drawn: matplotlib's axis arithmetic overflows near float64's
# largest (1.8e308), and a band's standard deviation squares the values. No float32 network's
# Q-value (3.4e38 at most) nor game score comes near it.
DRAWABLE = 1e150
# Titles of games whose ROM id does not spell them (the others: words capitalised).
DISPLAY_NAMES = {
    "hero": "H.E.R.O.", "jamesbond": "James Bond", "kung_fu_master": "Kung-Fu Master", "ms_pacman": "Ms. Pac-Man",
    "montezuma_revenge": "Montezuma's Revenge", "qbert": "Q*bert", "riverraid": "River Raid",
    "up_n_down": "Up'n Down", "wizard_of_wor": "Wizard of Wor", "yars_revenge": "Yars' Revenge",
}


class PlotError(ValueError):
    """Bad input for a plot; the message is one line for the user."""


def display_name(game: str) -> str:
    """The title of ``game`` (an ale-py ROM id): "space_invaders" gives "Space Invaders"; a
    name that is not a ROM id (other characters than a-z, 0-9, _) is kept as it is."""
    if not re.fullmatch(r"[a-z0-9_]+", game):
        return game
    return DISPLAY_NAMES.get(game, " ".join(word.capitalize() for word in game.split("_")))


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
    updates = np.maximum(0.0, steps - (a.get("learn_start") or 0)) / (a.get("update_freq") or 1)
    return updates * (a.get("n_replay") or 1) / UPDATES_PER_EPOCH


def seed_curves(run_set, field: str, x: str):
    """Mean, min, max and std over the seeds of ``run_set`` of history ``field``.

    Returns float64 arrays ``(xs, mean, low, high, std)`` over the sorted evaluation steps of
    all seeds; at each step, the statistics are over the seeds with a value there (NaN or infinity
    is none: ``score_history`` at an evaluation that finished no episode, a diverged network's values).
    """
    steps = np.concatenate([run.step_history for run in run_set.runs]).astype(np.int64)
    values = np.concatenate([getattr(run, field) for run in run_set.runs]).astype(np.float64)
    steps, values = steps[np.isfinite(values)], values[np.isfinite(values)]
    evaluated = np.unique(steps)
    stats = np.array([(v.mean(), v.min(), v.max(), v.std()) for v in (values[steps == s] for s in evaluated)])
    return (x_values(run_set.runs[0], evaluated, x), *stats.reshape(-1, 4).T)


def _labels(run_sets, labels) -> list[str]:
    """The legend text of each run set: ``labels`` (one for all, or one each), or by default
    the set's label with its number of seeds."""
    labels = [printable(label) for label in labels]
    if not labels:
        return [s.label + (f" ({len(s.runs)} seeds)" if len(s.runs) > 1 else "") for s in run_sets]
    if len(labels) == 1:
        return labels * len(run_sets)
    if len(labels) != len(run_sets):
        raise PlotError(f"{len(labels)} labels for {len(run_sets)} configurations "
                        f"({', '.join(s.label for s in run_sets)}); give one label, or one per configuration "
                        "in this order")
    return labels


def _check_drawable(name: str, what: str, values) -> None:
    values = np.asarray(values, dtype=np.float64)
    largest = np.abs(values[np.isfinite(values)]).max(initial=0.0)
    if largest > DRAWABLE:
        raise PlotError(f"{name}: {what} holds {largest:.3g}, too large to draw (at most {DRAWABLE:g}; "
                        "a damaged file?)")


def _reference_band(curves, game: str, x: str, actrep: int, x_max: float):
    """``(xs, low, high)`` of ``curves`` for ``game`` on axis ``x`` up to the first point at or
    after ``x_max`` (in epochs at the paper's 800,000 frames per epoch); None without a point."""
    by_frames = curves.points.get(game)
    if not by_frames:
        return None
    frames = np.array(sorted(by_frames))
    xs = {"frames": frames, "steps": frames / actrep, "epochs": frames / NATURE_FRAMES_PER_EPOCH}[x]
    n = np.searchsorted(xs, x_max) + 1
    return (xs[:n], np.array([min(by_frames[f]) for f in frames[:n]]),
            np.array([max(by_frames[f]) for f in frames[:n]]))


def plot_runs(paths, output: str, x: str = "frames", band: str = "minmax", show_random_human: bool = False,
              reference_curves: str | None = None, nature: bool | None = None, labels=(), title: str | None = None,
              dpi: int = 100, note=lambda message: None) -> None:
    """Draw the Figure-2 panels of the histories ``paths`` and write ``output``.

    One game: two panels side by side (score, value), ``FIGSIZE``; several games: a column of the
    two per game, ``MAX_COLUMNS`` a row, ``GAME_SIZE`` each. The legend is below, an entry per label.

    Args:
        paths: history files or folders (see ``runs.load_runs``; a file in a folder that is
            not a readable history is skipped, and ``note`` called with why).
        output: ``.png``, ``.svg`` or ``.pdf`` path, written atomically.
        x: ``"frames"``, ``"steps"`` or ``"epochs"``.
        band: ``"minmax"`` or ``"std"`` (mean +- one standard deviation over seeds).
        reference_curves: curves for ``scores.read_curves`` ("dopamine" or a CSV path): a grey
            min-max band over their runs, up to their first point at or after the runs' last
            evaluation; in epochs at the paper's 800,000 frames per epoch.
        nature: True draws the Nature DQN score (dashed, its standard deviation hatched), False
            leaves it out, None draws it where it lies within the range of the panel's other
            data (the paper's score, after 200 M frames, would dwarf a run's first millions).
        labels: the legend text of the configurations: one for all, or one per configuration
            in the order of ``runs.load_runs``; by default their file names.
        title: the figure's title; by default the game's name for one game, none for several.
        dpi: resolution of a PNG.
        note: called with each one-line note: skipped files, runs with nothing to draw,
            ``RunSet.notes``, reference curves that lack a game or start past the runs' end.

    Raises:
        PlotError: unknown output suffix, an output that cannot be created (``files.unwritable``)
            or that is one of ``paths``' histories, labels that do not match the configurations,
            no run with an evaluation, or a value beyond ``DRAWABLE`` in magnitude.
        scores.CurvesError: reference curves that cannot be read.
        history.HistoryError: a path that is not a history, or no readable history at all.
        OSError: the figure cannot be written.
    """
    fmt = FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise PlotError(f"{output}: unknown figure type; use a .png, .svg or .pdf suffix")
    if problem := unwritable(output):
        raise PlotError(f"cannot write {output}: {problem}")
    paths = list(paths)
    if os.path.realpath(output) in map(os.path.realpath, history_paths(paths)):  # a link to one too
        raise PlotError(f"{output} is one of the histories to plot; write the figure to another file")
    run_sets = load_runs(paths, skip=lambda m: note(f"skipped {m}"))
    texts = ["\n".join(textwrap.wrap(text, LEGEND_WIDTH)) for text in _labels(run_sets, labels)]
    games = list(dict.fromkeys(s.game for s in run_sets))
    curves = None if reference_curves is None else read_curves(reference_curves)
    if not any(len(run.step_history) for s in run_sets for run in s.runs):
        raise PlotError("no evaluation in any of the runs yet; nothing to plot")
    for s in run_sets:
        for field in ("score_history", "v_history"):
            _check_drawable(s.label, field, np.concatenate([getattr(run, field) for run in s.runs]))
    if curves is not None:
        for game in games:
            for frames, values in curves.points.get(game, {}).items():
                _check_drawable(reference_curves, f"{game}'s curves", [frames, *values])
    for s in run_sets:
        for message in s.notes():
            note(message)
        for run in s.runs:
            if len(run.step_history) == 0:
                note(f"{run.path}: no evaluation yet (step {run.steps}); nothing to draw for it")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {text: f"C{i}" for i, text in enumerate(dict.fromkeys(texts))}
    # Names are plain text: a "$" in a file or game name does not start mathtext.
    with matplotlib.rc_context({"text.parse_math": False}):
        fig, panels = _figure(plt, games, x, dpi)
        legend = dict.fromkeys(texts)  # the runs first
        for game, (ax_score, ax_value) in zip(games, panels):
            sets = [(s, text) for s, text in zip(run_sets, texts) if s.game == game]
            _draw_game(ax_score, ax_value, game, sets, colours, x=x, band=band, show_random_human=show_random_human,
                       curves=curves, nature=nature, one_game=len(games) == 1, note=note,
                       source=reference_curves)
            for ax in (ax_score, ax_value):
                for handle, text in zip(*ax.get_legend_handles_labels()):
                    legend[text] = legend.get(text) or handle
        legend = {text: handle for text, handle in legend.items() if handle}  # runs without evaluation: none
        if legend:  # in as many columns as fit the figure's width
            longest = max(len(line) for text in legend for line in text.splitlines())
            columns = max(1, min(len(legend), int(fig.get_figwidth() // (0.6 + 0.07 * longest))))
            fig.legend(legend.values(), legend.keys(), loc="outside lower center", fontsize="small",
                       ncols=columns, frameon=False)
        if title or len(games) == 1:
            fig.suptitle(printable(title) if title else display_name(games[0]))
        image = io.BytesIO()  # drawn in memory: a full disk then fails our write, not matplotlib's PDF writer
        fig.savefig(image, format=fmt, dpi=dpi)
        plt.close(fig)
    with atomic_path(output) as tmp, open(tmp, "wb") as fh:
        fh.write(image.getbuffer())


def _figure(plt, games: list, x: str, dpi: int):
    """The figure and, per game, its (score, value) axes, titled and labelled."""
    if len(games) == 1:
        fig, (ax_score, ax_value) = plt.subplots(1, 2, sharex=True, figsize=FIGSIZE, dpi=dpi, layout="constrained")
        ax_score.set(title=SCORE_LABEL, ylabel=SCORE_LABEL, xlabel=X_LABELS[x])
        ax_value.set(title="Average predicted action value (validation set)", ylabel=VALUE_LABEL, xlabel=X_LABELS[x])
        return fig, [(ax_score, ax_value)]
    columns = math.ceil(len(games) / math.ceil(len(games) / MAX_COLUMNS))
    rows = math.ceil(len(games) / columns)
    fig, axes = plt.subplots(2 * rows, columns, figsize=(GAME_SIZE[0] * columns, GAME_SIZE[1] * rows), dpi=dpi,
                             layout="constrained")
    panels = axes.reshape(rows, 2, columns).transpose(0, 2, 1).reshape(-1, 2)  # (score, value) per cell
    for ax in panels[len(games):].flat:
        ax.set_axis_off()
    for i, (game, (ax_score, ax_value)) in enumerate(zip(games, panels)):
        ax_value.sharex(ax_score)
        ax_score.set_title(display_name(game))
        ax_value.set_xlabel(X_LABELS[x])
        if i % columns == 0:
            ax_score.set_ylabel(SCORE_LABEL)
            ax_value.set_ylabel(VALUE_LABEL)
    return fig, panels[:len(games)]


def _draw_game(ax_score, ax_value, game: str, sets, colours: dict, *, x: str, band: str, show_random_human: bool,
               curves, source: str | None, nature: bool | None, one_game: bool, note) -> None:
    """Draw the run sets ``sets`` (``(RunSet, legend text)`` pairs) of ``game`` and its
    reference scores and curves into its two panels (see ``plot_runs``)."""
    import matplotlib

    eng = matplotlib.ticker.EngFormatter(sep="")  # 250k, 1M; epochs as plain numbers (250m reads as millions)
    x_max = -np.inf  # the runs' last x
    for s, text in sets:
        for ax, field in ((ax_score, "score_history"), (ax_value, "v_history")):
            xs, mean, low, high, std = seed_curves(s, field, x)
            if not len(xs):
                continue
            x_max = max(x_max, xs[-1])
            ax.plot(xs, mean, color=colours[text], marker="o" if len(xs) < 30 else None, markersize=3, label=text)
            if len(s.runs) > 1:
                lo, hi = (mean - std, mean + std) if band == "std" else (low, high)
                ax.fill_between(xs, lo, hi, color=colours[text], alpha=0.25, linewidth=0)
    ref = reference(game)
    if show_random_human:
        for value, name, colour in ((ref.random, "random", "tab:red"), (ref.human, "human", "tab:green")):
            if value is not None:
                ax_score.axhline(value, color=colour, linestyle=":", linewidth=1.2,
                                 label=f"{name} {value:g}" if one_game else name)
    if curves is not None and x_max > -np.inf:
        points = _reference_band(curves, game, x, sets[0][0].runs[0].actrep, x_max)
        if points is None:
            note(f"{source}: no reference curves for {game}")
        elif len(points[0]) < 2:  # a band of one point is invisible, yet it would have a legend entry
            start = f"{points[0][0]:g}" if x == "epochs" else eng(points[0][0])
            note(f"{source}: the {game} curves start at {start} {x}, past the runs' end; not drawn")
        else:
            ax_score.fill_between(*points, color="grey", alpha=0.35, linewidth=0,
                                  label=f"{curves.label}, {curves.runs(game)} runs")
    _draw_nature(ax_score, ref, nature, one_game)
    if x != "epochs":
        for ax in (ax_score, ax_value):
            ax.xaxis.set_major_formatter(eng)


def _draw_nature(ax, ref, nature: bool | None, one_game: bool) -> None:
    """Draw the Nature DQN score of ``ref`` into ``ax`` where ``nature`` asks for it (see ``plot_runs``),
    without widening the axis for the hatching."""
    mean, std = ref.nature_mean, ref.nature_std
    if nature is False or mean is None:
        return
    low, high = ax.dataLim.intervaly  # inf, -inf where nothing is drawn
    if nature is None and not low <= mean <= high:
        return
    limits = ax.get_ylim()
    text = "Nature DQN" + (f" {mean:g}" + (f" ± {std:g}" if std else "") if one_game else "")
    ax.axhline(mean, color="black", linestyle="--", linewidth=1, label=text)
    if std:
        ax.axhspan(mean - std, mean + std, facecolor="none", edgecolor="black", alpha=0.25, hatch="//", linewidth=0)
    if nature is None:
        ax.set_ylim(limits)
