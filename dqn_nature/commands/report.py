"""``dqn-report``: a table of runs next to the Nature DQN, random and human scores, or their
aggregate beside Dopamine's DQN (``report``)."""
from __future__ import annotations

import click

from ..console import CONTEXT, fail, run_command
from ..history import HistoryError
from ..report import AGGREGATE_FRAMES, ReportError, aggregate, format_aggregate, format_rows, report_rows
from ..runs import load_runs
from ..scores import CurvesError


@click.command(context_settings=CONTEXT)
@click.argument("runs", nargs=-1, required=True, metavar="RUN.h5|FOLDER...")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "csv", "json"]), default="text",
              show_default=True, help="aligned text table, Markdown table, CSV or JSON")
@click.option("--aggregate", "aggregated", is_flag=True,
              help="instead of a row per run, the human-normalised median, IQM and mean over the games at "
                   "--frames, with 95% stratified-bootstrap confidence intervals, beside Dopamine's DQN "
                   '(needs pip install "dqn-nature[rliable]")')
@click.option("--frames", type=click.IntRange(min=1), default=AGGREGATE_FRAMES, show_default=True,
              help="training frames at which --aggregate takes each run's evaluation score")
@click.option("--reps", type=click.IntRange(min=100), default=10_000, show_default=True,
              help="bootstrap resamples of --aggregate (rliable's default is 50,000)")
def report_command(runs, fmt, aggregated, frames, reps):
    """Compare runs with the Nature DQN scores: one row per game and configuration.

    Folders are searched for .h5 histories (*.params.h5 left out; a file there that is not a
    readable history is skipped with a warning). Seeds of one configuration share a row: best
    is the best of any seed, last the mean over seeds of their last evaluation score; the
    human-normalised and DQN-normalised scores are of that mean. An evaluation that finished
    no episode has no score (DQN 3.0 records 0 for it).

    With --aggregate, one game per configuration: the human-normalised median, interquartile
    mean and mean over the games of the runs' evaluation scores at --frames, beside those of
    Dopamine's DQN runs (shipped with the package) at the same frames of the same games.
    """
    def warn(message: str):
        click.echo(f"dqn-report: warning: {message}", err=True)

    try:
        run_sets = load_runs(runs, skip=lambda m: warn(f"skipped {m}"))
        for note in (n for s in run_sets for n in s.notes()):
            warn(note)
        if aggregated:
            click.echo(format_aggregate(aggregate(run_sets, frames, reps, note=warn), fmt, reps))
        else:
            click.echo(format_rows(report_rows(run_sets), fmt))
    except (HistoryError, ReportError, CurvesError) as e:
        fail(str(e))


def main(args=None):
    """Entry point of ``dqn-report``."""
    run_command(report_command, args)
