"""``dqn-convert``: a DQN 3.0 snapshot ``<name>.t7`` (or ``.params.t7``) to a ``.h5`` history."""
from __future__ import annotations

import click

from ..console import CONTEXT, LuaCommand, fail, refuse_to_replace, run_command
from ..convert import convert
from ..environment import GameError
from ..files import os_reason


@click.command(cls=LuaCommand, context_settings=CONTEXT)
@click.argument("source", metavar="OLD.t7")
@click.argument("target", metavar="NEW.h5")
@click.option("--game", "-game", "-env", "game", help="ROM id: the game of a .params.t7 (needed; its action "
              "count is checked), or instead of a snapshot's env")
@click.option("--n-actions", "-n_actions", "n_actions", type=click.IntRange(1),
              help="expected action count, checked against the file's network")
@click.option("--cuda-conv", "-cuda_conv", "cuda_conv", is_flag=True,
              help="the .params.t7 comes from DeepMind's GPU network (SpatialConvolutionCUDA weight order)")
@click.option("--overwrite", is_flag=True, help="replace NEW.h5 if it exists")
def convert_command(source, target, game, n_actions, cuda_conv, overwrite):
    """Convert a DQN 3.0 snapshot OLD.t7 (or a .params.t7 vector) into the history NEW.h5.

    Needs the torchfile package for binary .t7 files: pip install 'dqn-nature[legacy]'.
    """
    from ..torch7 import LegacyError

    if not source.lower().endswith(".t7"):
        fail(f"{source}: not a .t7 file")
    refuse_to_replace(target, overwrite)
    try:
        click.echo(convert(source, target, game, n_actions, cuda_conv))
    except (LegacyError, GameError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"cannot write {target}: {os_reason(e)}", code=1)


def main(args=None):
    """Entry point of ``dqn-convert``."""
    run_command(convert_command, args)
