"""``dqn-slim``: a small copy of a history file, for sharing or committing (``slim.slim_history``)."""
from __future__ import annotations

import os

import click

from ..console import CONTEXT, fail, refuse_to_replace, run_command
from ..files import os_reason
from ..history import HistoryError
from ..slim import slim_history

NETWORKS = {"best": ("best_model",), "last": ("model",), "both": ("model", "best_model"), "none": ()}


@click.command(context_settings=CONTEXT)
@click.argument("source", metavar="RUN.h5")
@click.argument("target", metavar="SLIM.h5")
@click.option("--networks", type=click.Choice(list(NETWORKS)), default="best", show_default=True,
              help="networks to keep: the best evaluated one (what dqn-test --best plays), the last, both, none")
@click.option("--float32", is_flag=True,
              help="keep the networks as stored (float32 in a trainer's history) instead of float16")
@click.option("--overwrite", is_flag=True, help="replace SLIM.h5 if it exists (not needed when it is RUN.h5)")
def slim_command(source, target, networks, float32, overwrite):
    """Copy the history RUN.h5 to SLIM.h5 with its histories unchanged and only the chosen
    networks, in float16 unless --float32. Its arguments are kept too, but an absolute path
    among them (csv_log, name...) keeps only its base name, as does RUN.h5's own path, recorded
    as slimmed_from: a shared file names no folder of its machine. SLIM.h5 may be RUN.h5 itself."""
    same = os.path.exists(target) and os.path.exists(source) and os.path.samefile(source, target)
    refuse_to_replace(target, overwrite or same)
    try:
        click.echo(slim_history(source, target, NETWORKS[networks], float16=not float32))
    except HistoryError as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write {target}: {os_reason(e)}", code=1)


def main(args=None):
    """Entry point of ``dqn-slim``."""
    run_command(slim_command, args)
