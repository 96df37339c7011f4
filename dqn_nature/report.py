"""``dqn-report``: a table of runs next to the Nature DQN, random and human scores."""
from __future__ import annotations

import csv
import io
import json
import math

import click
import numpy as np

from .console import fail, run_command
from .history import HistoryError
from .runs import load_runs
from .scores import human_normalised, percent_of_nature, reference

# Column key -> header. Scores are average evaluation scores per episode (game points).
COLUMNS = {
    "game": "game", "config": "configuration", "seeds": "seeds", "frames": "frames", "evaluations": "evals",
    "best": "best", "last": "last", "last_std": "last sd", "nature": "Nature DQN", "nature_std": "sd",
    "random": "random", "human": "human", "human_normalised": "human-norm. %", "percent_of_nature": "% of Nature",
}


@np.errstate(invalid="ignore")  # infinite scores: their mean or sd is NaN, shown as unknown
def report_rows(run_sets) -> list:
    """One dict per ``RunSet`` with the keys of ``COLUMNS``; None where unknown.

    ``frames`` and ``evaluations``: the most of any seed. Scores are those of evaluations that
    finished an episode (``History.score_history``). ``best``: the highest score of any seed.
    ``last``: the mean over seeds of each seed's last score (``last_std`` their standard
    deviation, ddof 0, with two seeds or more); seeds without a score are left out.
    ``human_normalised`` = 100 (last - random) / (human - random) and ``percent_of_nature`` =
    100 last / Nature score, both of ``last``.
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
            percent_of_nature=None if last is None else percent_of_nature(last, s.game)))
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
    if key in ("seeds", "frames", "evaluations"):
        return f"{value:,}" if key == "frames" else str(value)
    return f"{value:.1f}"


def _json_value(value):
    """``value`` as JSON can hold it: None (null) for NaN and infinity, which JSON lacks."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def format_rows(rows, fmt: str) -> str:
    """``rows`` of ``report_rows`` as ``text`` (aligned), ``markdown``, ``csv`` or ``json``.

    CSV and JSON use the column keys and unrounded numbers (blank / null where unknown, NaN
    included; infinity is inf in CSV, null in JSON). Markdown escapes ``|`` in cells as ``\\|``.
    No Lua counterpart.
    """
    if fmt == "json":
        return json.dumps([{k: _json_value(v) for k, v in row.items()} for row in rows], indent=2, allow_nan=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows([{k: "" if _unknown(v) else v for k, v in row.items()} for row in rows])
        return out.getvalue().rstrip("\n")
    table = [list(COLUMNS.values())] + [[_cell(k, row[k]) for k in COLUMNS] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in table]
        lines.insert(1, "|" + "|".join("---" if k in ("game", "config") else "--:" for k in COLUMNS) + "|")
        return "\n".join(lines)
    widths = [max(len(cells[i]) for cells in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) if k in ("game", "config") else c.rjust(w)
                               for k, c, w in zip(COLUMNS, cells, widths)).rstrip() for cells in table)


@click.command(context_settings=dict(help_option_names=["-h", "--help"], max_content_width=110))
@click.argument("runs", nargs=-1, required=True, metavar="RUN.h5|FOLDER...")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv", "json"]), default="text",
              show_default=True, help="aligned text table, Markdown table, CSV or JSON")
def report_command(runs, fmt):
    """Compare runs with the Nature DQN scores: one row per game and configuration.

    Folders are searched for .h5 histories (*.params.h5 left out; a file there that is not a
    readable history is skipped with a warning). Seeds of one configuration
    share a row: best is the best of any seed, last the mean over seeds of their last evaluation
    score; the human-normalised score and the % of the Nature score are of that mean. An
    evaluation that finished no episode has no score (DQN 3.0 records 0 for it).
    """
    try:
        run_sets = load_runs(runs, skip=lambda m: click.echo(f"dqn-report: warning: skipped {m}", err=True))
    except HistoryError as e:
        fail(str(e))
    for note in (n for s in run_sets for n in s.notes()):
        click.echo(f"dqn-report: warning: {note}", err=True)
    click.echo(format_rows(report_rows(run_sets), fmt))


def main(args=None):
    """Entry point of ``dqn-report``."""
    run_command(report_command, args)
