"""Tables of runs for ``dqn-report``: each game and configuration next to the Nature DQN, random
and human scores, and the aggregate human-normalised scores of a set of games with
stratified-bootstrap confidence intervals (Agarwal et al., "Deep Reinforcement Learning at the
Edge of the Statistical Precipice", NeurIPS 2021, with their library ``rliable``) beside those
of Dopamine's DQN. No Lua counterpart.
"""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from .scores import dqn_normalised, human_normalised, read_curves, reference

# Column key -> header. Scores are average evaluation scores per episode (game points).
COLUMNS = {
    "game": "game", "config": "configuration", "seeds": "seeds", "frames": "frames", "evaluations": "evals",
    "best": "best", "last": "last", "last_std": "last sd", "nature": "Nature DQN", "nature_std": "sd",
    "random": "random", "human": "human", "human_normalised": "human-norm. %", "dqn_normalised": "DQN-norm. %",
}


@np.errstate(invalid="ignore")  # infinite scores: their mean or sd is NaN, shown as unknown
def report_rows(run_sets) -> list:
    """One dict per ``RunSet`` with the keys of ``COLUMNS``; None where unknown.

    ``frames`` and ``evaluations``: the most of any seed. Scores are those of evaluations that
    finished an episode (``History.score_history``). ``best``: the highest score of any seed.
    ``last``: the mean over seeds of each seed's last score (``last_std`` their standard
    deviation, ddof 0, with two seeds or more); seeds without a score are left out.
    ``human_normalised`` and ``dqn_normalised``: those of ``scores``, of ``last``.
    """
    rows = []
    for s in run_sets:
        ref = reference(s.game)
        scores = [h[~np.isnan(h)] for h in (r.score_history for r in s.runs)]
        scores = [h for h in scores if len(h)]
        lasts = np.array([h[-1] for h in scores], dtype=np.float64)
        last = float(lasts.mean()) if len(lasts) else None
        rows.append(dict(
            game=s.game, config=s.label, seeds=len(s.runs), frames=max(r.frames for r in s.runs),
            evaluations=max(len(r.reward_history) for r in s.runs),
            best=float(max(np.max(h) for h in scores)) if scores else None, last=last,
            last_std=float(lasts.std()) if len(lasts) > 1 else None,
            nature=ref.nature_mean, nature_std=ref.nature_std, random=ref.random, human=ref.human,
            human_normalised=None if last is None else human_normalised(last, s.game),
            dqn_normalised=None if last is None else dqn_normalised(last, s.game)))
    return rows


def _unknown(value) -> bool:
    """None, or NaN (the mean of infinite scores of both signs)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(key: str, value) -> str:
    """A value as table text: blank when unknown, integers as such, scores to 1 decimal, line
    breaks in names as spaces (a cell is one line)."""
    if _unknown(value):
        return ""
    if isinstance(value, str):
        return " ".join(value.splitlines())
    if isinstance(value, int):
        return f"{value:,}" if key == "frames" else str(value)
    return f"{value:.1f}"


def _json_value(value):
    """``value`` as JSON can hold it: None (null) for NaN and infinity, which JSON lacks."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def format_rows(rows, fmt: str, columns: dict = COLUMNS, text_columns=("game", "config")) -> str:
    """``rows`` (dicts with the keys of ``columns``, which maps keys to headers; by default those of
    ``report_rows``) as ``text`` (aligned), ``markdown``, ``csv`` or ``json``; in text and Markdown,
    ``text_columns`` are aligned left, the others right. CSV and JSON use the column keys and unrounded
    numbers (blank / null where unknown, NaN included; infinity is inf in CSV, null in JSON). Markdown
    escapes ``|`` in cells as ``\\|``.
    """
    if fmt == "json":
        return json.dumps([{k: _json_value(row[k]) for k in columns} for row in rows], indent=2, allow_nan=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows([{k: "" if _unknown(row[k]) else row[k] for k in columns} for row in rows])
        return out.getvalue().rstrip("\n")
    table = [list(columns.values())] + [[_cell(k, row[k]) for k in columns] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in table]
        lines.insert(1, "|" + "|".join("---" if k in text_columns else "--:" for k in columns) + "|")
        return "\n".join(lines)
    widths = [max(len(cells[i]) for cells in table) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) if k in text_columns else c.rjust(w)
                               for k, c, w in zip(columns, cells, widths)).rstrip() for cells in table)


# -- the aggregate -----------------------------------------------------------------------------

AGGREGATE_FRAMES = 10_000_000  # where the aggregate compares runs by default
REFERENCE = "dopamine"  # the shipped curves the aggregate compares runs with
METRICS = ("median", "IQM", "mean")


class ReportError(ValueError):
    """Runs or an environment the report cannot be made of; the message is one line for the user."""


def score_at(run, frames: int) -> float | None:
    """The ``score_history`` of ``run`` (a ``History``) where its ``frame_history`` is ``frames``; None
    where it has no evaluation at those training frames or that evaluation finished no episode."""
    found = np.flatnonzero(run.frame_history == frames)
    if not len(found) or np.isnan(run.score_history[found[-1]]):
        return None
    return float(run.score_history[found[-1]])


def aggregate(run_sets, frames: int = AGGREGATE_FRAMES, reps: int = 10_000, note=lambda message: None) -> list:
    """The human-normalised median, IQM and mean over games of the runs of ``run_sets`` at
    ``frames`` training frames, and of the shipped Dopamine DQN curves at the same frames for
    the same games, each with its 95% stratified-bootstrap confidence interval (rliable's
    ``get_interval_estimates``, percentile method, ``reps`` resamples with a fixed seed).

    A run's score is its evaluation at ``frames`` (``score_at``); a run without one is left out.
    Scores are ``100 (score - random) / (human - random)``; where games have different numbers of
    runs, each keeps its first n, n the fewest of any game. Dopamine's runs give the mean training return
    of the 1,000,000-frame iteration that ends at ``frames``. Each thing left out goes to ``note``.

    Returns:
        One dict per metric of ``METRICS``: ``metric``, ``frames``, ``games`` (the games' ids),
        ``runs`` (per game), ``score``, ``ci_low``, ``ci_high``, and the same of Dopamine's runs:
        ``reference_runs``, ``reference``, ``reference_ci_low``, ``reference_ci_high`` (None where
        Dopamine lacks a game at ``frames``). Scores are human-normalised, in percent.

    Raises:
        ReportError: rliable not installed, several configurations of one game, or no run with
            a score at ``frames`` of a game with random and human scores.
    """
    try:
        from rliable import library, metrics
    except ImportError:
        raise ReportError('the aggregate needs the rliable library: pip install "dqn-nature[rliable]"') from None
    scores = {}
    for s in run_sets:
        if s.game in scores:
            labels = ", ".join(o.label for o in run_sets if o.game == s.game)
            raise ReportError(f"several configurations of {s.game} ({labels}); the aggregate takes one per game")
        scores[s.game] = []
        ref = reference(s.game)
        if ref.random is None or ref.human is None:
            note(f"{s.label}: no random and human scores of {s.game}; left out of the aggregate")
            continue
        for run in s.runs:
            score = score_at(run, frames)
            if score is None:
                last = f"{int(run.frame_history[-1]):,}" if len(run.frame_history) else "none"
                note(f"{run.path}: no score at {frames:,} frames (last evaluation: {last}); left out of the aggregate")
            else:
                scores[s.game].append(human_normalised(score, s.game))
    scores = {game: values for game, values in scores.items() if values}
    if not scores:
        raise ReportError(f"no run has a score at {frames:,} frames; nothing to aggregate")
    games = sorted(scores)
    curves = read_curves(REFERENCE)
    dopamine = {game: curves.points.get(game, {}).get(float(frames), []) for game in games}
    if lacking := [game for game, values in dopamine.items() if not values]:
        note(f"{curves.label} has no curves of {', '.join(lacking)} at {frames:,} frames; its column is left blank")

    def estimates(matrix: np.ndarray) -> list:
        """(point estimate, CI low, CI high) of each of ``METRICS`` over the runs x games ``matrix``."""
        def measure(m):
            return np.array([metrics.aggregate_median(m), metrics.aggregate_iqm(m), metrics.aggregate_mean(m)])
        # rliable resamples with NumPy's global generator: seeded for a reproducible report, then restored.
        state = np.random.get_state()
        np.random.seed(0)
        try:
            points, intervals = library.get_interval_estimates({"runs": matrix}, measure, reps=reps)
        finally:
            np.random.set_state(state)
        return np.vstack([points["runs"], intervals["runs"]]).T.tolist()

    def matrix(values: dict) -> np.ndarray:
        """The runs x games matrix of ``values`` (game: scores), the first runs of each."""
        n = min(map(len, values.values()))
        if n < max(map(len, values.values())):
            note(f"the games have from {n} to {max(map(len, values.values()))} runs; the aggregate takes the first "
                 f"{n} of each")
        return np.array([values[game][:n] for game in games], dtype=np.float64).T

    if max(map(len, scores.values())) == 1:
        note("one run per game: the confidence intervals of these runs have no width (they come from "
             "resampling each game's runs)")
    ours = estimates(matrix(scores))
    theirs = ([(None, None, None)] * len(METRICS) if lacking else
              estimates(matrix({g: [human_normalised(v, g) for v in dopamine[g]] for g in games})))
    return [dict(metric=name, frames=frames, games=" ".join(games), runs=min(map(len, scores.values())),
                 score=score, ci_low=low, ci_high=high,
                 reference_runs=None if lacking else min(map(len, dopamine.values())),
                 reference=their_score, reference_ci_low=their_low, reference_ci_high=their_high)
            for name, (score, low, high), (their_score, their_low, their_high) in zip(METRICS, ours, theirs)]


def format_aggregate(rows, fmt: str, reps: int) -> str:
    """``rows`` of ``aggregate`` as ``format_rows`` writes them; text and Markdown begin with a
    line saying what the numbers are, and show each interval as ``[low, high]`` in one cell."""
    if fmt in ("csv", "json"):
        return format_rows(rows, fmt, dict.fromkeys(rows[0]))  # the rows' keys as columns
    first = rows[0]

    def interval(low, high):
        return "" if low is None else f"[{low:.1f}, {high:.1f}]"

    table = [dict(metric=r["metric"], score=r["score"], ci=interval(r["ci_low"], r["ci_high"]),
                  reference=r["reference"], reference_ci=interval(r["reference_ci_low"], r["reference_ci_high"]))
             for r in rows]
    columns = {"metric": "metric", "score": "these runs", "ci": "95% CI", "reference": "Dopamine DQN",
               "reference_ci": "95% CI"}
    caption = (f"Human-normalised score (%) at {first['frames']:,} frames over {len(first['games'].split())} games "
               f"({first['games'].replace(' ', ', ')}): these runs, {first['runs']} per game; "
               + (f"Dopamine DQN, {first['reference_runs']} per game" if first["reference"] is not None
                  else "Dopamine DQN lacks some of these games") +
               f".\n95% stratified-bootstrap confidence intervals (rliable, {reps:,} resamples).")
    return caption + "\n\n" + format_rows(table, fmt, columns, text_columns=("metric", "ci", "reference_ci"))
