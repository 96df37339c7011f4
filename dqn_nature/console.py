"""What every ``dqn-*`` command shares: errors as one line on stderr, exit statuses, and stopping
on a signal."""
from __future__ import annotations

import difflib
import math
import os
import re
import signal
import sys
import warnings

import click
from tqdm import tqdm

from .files import unwritable

# The click context of every command but dqn-sweep (which passes unknown options on to dqn-train).
CONTEXT = dict(help_option_names=["-h", "--help"], max_content_width=110)


def fail(message: str, code: int = 2):
    """Print ``<program>: error: <message>`` on stderr, on one line (a library's message may
    hold several), and exit with ``code`` (2: bad input)."""
    message = " ".join(line.strip() for line in message.splitlines() if line.strip())
    click.echo(f"{os.path.basename(sys.argv[0]) or 'dqn'}: error: {message}", err=True)
    sys.exit(code)


def refuse_to_replace(target: str, overwrite: bool):
    """``fail`` (exit 2) unless the history ``target`` ends with ``.h5``, can be written and, without
    ``overwrite``, does not exist: a user's file is replaced only when asked."""
    if not target.endswith(".h5"):
        fail(f"{target}: name the output file <name>.h5")
    if not overwrite and os.path.exists(target):
        fail(f"{target} exists; replace it with --overwrite, or choose another name")
    if problem := unwritable(target):
        fail(f"cannot write {target}: {problem}")


def run_command(command: click.Command, args: list[str] | None = None):
    """Run a click ``command`` as a console entry point: usage errors, too, are one line on
    stderr with exit status 2, Python warnings one line each (``warning: <message>``); Ctrl-C
    before the command handles it exits 130."""
    warnings.formatwarning = lambda message, *_, **__: f"warning: {message}\n"
    try:
        code = command.main(args=args, standalone_mode=False)
    except click.ClickException as e:
        fail(e.format_message(), e.exit_code)
    except click.Abort:
        sys.exit(130)
    sys.exit(code or 0)


class FiniteFloatRange(click.FloatRange):
    """click's ``FloatRange`` without inf and nan, which it lets through (nan is in every range):
    those fail as a usage error (``click.BadParameter``, exit 2). No Lua counterpart."""

    def convert(self, value, param, ctx):
        """click's ``convert``, refusing inf and nan (``click.BadParameter``)."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class LuaCommand(click.Command):
    """A click command whose options also have Lua spellings (``-eval_freq``): a mistyped one
    is reported whole, with its close matches, where click would report an unknown ``-e``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's ``parse_args``, after refusing an unknown single-dash option of more than one
        letter. Raises click.NoSuchOption."""
        takes_value = {opt: isinstance(p, click.Option) and not p.is_flag
                       for p in self.params for opt in p.opts + p.secondary_opts}
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                break
            name = arg.split("=", 1)[0]
            if takes_value.get(arg):
                next(rest, None)  # its value, which may start with "-"
            elif re.fullmatch(r"-[A-Za-z]\w+", name) and name not in takes_value:
                raise click.NoSuchOption(name, possibilities=difflib.get_close_matches(name, takes_value), ctx=ctx)
        return super().parse_args(ctx, args)


class StopRequest:
    """SIGINT/SIGTERM/SIGHUP handler: the first signal sets ``signum``, for the loop to stop at its
    next check; a second one exits at once (files already written stay intact). After SIGHUP (a
    closed terminal, a dropped SSH connection) the output that went to the hung-up terminal goes to
    /dev/null, so that the files are still written. ``delay()`` returns why the stop may take long,
    or None. No Lua counterpart: a signal killed DQN 3.0, losing the steps since its last save.
    """

    def __init__(self, delay=lambda: None):
        self.signum, self.delay = None, delay
        self.terminals = [fd for fd in (sys.__stdout__.fileno(), sys.__stderr__.fileno()) if os.isatty(fd)]
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.handle)

    @property
    def name(self) -> str:
        """The received signal's name, "SIGINT", "SIGTERM" or "SIGHUP" (only once one came)."""
        return signal.Signals(self.signum).name

    def handle(self, signum, frame):
        """Record the first signal and print ``delay()``'s reason; exit at once on a second."""
        if signum == signal.SIGHUP:
            devnull = os.open(os.devnull, os.O_WRONLY)
            for fd in self.terminals:
                if not os.isatty(fd):  # a hung-up terminal is none any more
                    os.dup2(devnull, fd)
            os.close(devnull)
        if self.signum is not None:
            os._exit(128 + signum)
        self.signum = signum
        if reason := self.delay():
            tqdm.write(f"{self.name}: {reason}", file=sys.stderr)
