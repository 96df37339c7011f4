"""The ``dqn-*`` console entry points. Each imports its command's module on the call, so that
a Ctrl-C while the imports run (a few tenths of a second) exits with status 130, as it does
later, instead of printing a traceback."""
import importlib
import sys


def _entry(module: str):
    """The entry point that runs ``dqn_nature.<module>.main()``, imported on the call."""
    def main():
        """Run the command; a Ctrl-C while it is imported exits 130. No Lua counterpart."""
        try:
            command = importlib.import_module(f"dqn_nature.{module}").main
        except KeyboardInterrupt:
            sys.exit(130)
        command()
    return main


train = _entry("commands.train")
test = _entry("commands.test")
convert = _entry("commands.convert")
plot = _entry("commands.plot")
report = _entry("commands.report")
sweep = _entry("commands.sweep")
slim = _entry("commands.slim")
