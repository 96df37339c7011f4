"""``dqn-plot``: training curves in the style of Figure 2 of the Nature paper (``plot.plot_runs``)."""
from __future__ import annotations

import os

import click

from ..console import CONTEXT, fail, run_command
from ..files import os_reason
from ..history import HistoryError
from ..plot import FIGSIZE, X_LABELS, PlotError, plot_runs
from ..scores import SHIPPED_CURVES, CurvesError


def default_output(first: str) -> str:
    """The figure's path without ``-o``, from the first argument: ``runs/a.h5`` gives
    ``runs/a.png``, the folder ``runs`` gives ``runs/runs.png``."""
    if os.path.isdir(first):
        return os.path.join(first, (os.path.basename(os.path.abspath(first)) or "curves") + ".png")
    return (first[:-3] if first.endswith(".h5") else first) + ".png"


@click.command(context_settings=CONTEXT)
@click.argument("runs", nargs=-1, required=True, metavar="RUN.h5|FOLDER...")
@click.option("-o", "--output", metavar="FIG",
              help="figure file: .png, .svg or .pdf, replaced if it exists  [default: RUN.png beside the first "
                   "RUN.h5, or FOLDER/<FOLDER's name>.png where the first is a FOLDER]")
@click.option("--x", "x", type=click.Choice(list(X_LABELS)), default="frames", show_default=True,
              help="x axis: frames (steps x actrep), agent steps, or epochs of 50,000 minibatch updates")
@click.option("--band", type=click.Choice(["minmax", "std"]), default="minmax", show_default=True,
              help="band over seeds of one configuration: min-max, or mean +- one standard deviation")
@click.option("--show-random-human", is_flag=True, help="also draw the random and human scores")
@click.option("--reference", "reference_curves", metavar="NAME|CSV",
              help=f"reference curves, drawn as a grey min-max band over their runs up to the end of yours: "
                   f"{' or '.join(repr(name) for name in SHIPPED_CURVES)} (Dopamine's DQN, 5 runs of 60 games, "
                   "shipped with the package), or a CSV file with columns game,run,frames,mean_return")
@click.option("--nature/--no-nature", default=None,
              help="draw the Nature DQN score (dashed, its standard deviation hatched), or leave it out  "
                   "[default: drawn where it lies within the range of a panel's curves]")
@click.option("--label", "labels", multiple=True, metavar="TEXT",
              help="legend text of the runs: once for all configurations, or once per configuration in the "
                   "order given  [default: the file names]")
@click.option("--title", metavar="TEXT",
              help="figure title  [default: the game's name for one game, none for several]")
@click.option("--dpi", type=click.IntRange(10, 1000), default=100, show_default=True,
              help=f"resolution; one game's PNG is {FIGSIZE[0]:g} x {FIGSIZE[1]:g} inches x dpi pixels")
def plot_command(runs, output, x, band, show_random_human, reference_curves, nature, labels, title, dpi):
    """Plot DQN training curves (score and validation Q) in the style of Figure 2 of the Nature
    paper: two panels for one game; for several games, a column of the two panels per game."""
    output = output or default_output(runs[0])
    try:
        plot_runs(runs, output, x=x, band=band, show_random_human=show_random_human,
                  reference_curves=reference_curves, nature=nature, labels=labels, title=title, dpi=dpi,
                  note=lambda m: click.echo(f"dqn-plot: note: {m}", err=True))
    except (PlotError, HistoryError, CurvesError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write {output}: {os_reason(e)}", code=1)
    click.echo(f"Wrote {output}")


def main(args=None):
    """Entry point of ``dqn-plot``."""
    run_command(plot_command, args)
