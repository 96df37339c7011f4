"""Write docs/options.md, the options reference of every ``dqn-*`` command, from the commands'
click declarations (names, Lua spellings, value types, defaults, help), so that it never drifts
from the code. Run from anywhere: ``python docs/make_options.py``. ``tests/test_docs.py``
checks that the committed file equals ``render()``.
"""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import click

OUTPUT = Path(__file__).with_name("options.md")
# Console script -> (module, click command), as setup.py's entry points run them
# (dqn_nature.commands imports each module and runs its main(), which runs this command).
COMMANDS = {
    "dqn-train": ("dqn_nature.commands.train", "train"),
    "dqn-test": ("dqn_nature.commands.test", "test_command"),
    "dqn-convert": ("dqn_nature.commands.convert", "convert_command"),
    "dqn-plot": ("dqn_nature.commands.plot", "plot_command"),
    "dqn-report": ("dqn_nature.commands.report", "report_command"),
    "dqn-sweep": ("dqn_nature.commands.sweep", "sweep_command"),
    "dqn-slim": ("dqn_nature.commands.slim", "slim_command"),
}
# click's range text at the end of a help line: x>=1, 0<=x<=1, x>0, 10<=x<=1000
_RANGE = re.compile(r"(-?[\d.]+<=?)?x([<>]=?-?[\d.]+)?")
_TRAILING = re.compile(r"\s*\[([^\[\]]*)\]$")


def command(name: str) -> click.Command:
    """The click command that console script ``name`` (``dqn-train``, ...) runs."""
    module, attribute = COMMANDS[name]
    return getattr(importlib.import_module(module), attribute)


def context(name: str) -> click.Context:
    """A context of command ``name`` with its own settings (help option names, width...)."""
    cmd = command(name)
    return cmd.context_class(cmd, info_name=name, **cmd.context_settings)


def _text(text: str) -> str:
    """Plain help text as Markdown: ``<``, ``>`` and ``*`` escaped, so ``<name>`` shows."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")


def _cell(text: str) -> str:
    """``_text`` for a table cell (``|`` escaped)."""
    return _text(text).replace("|", r"\|")


def _code(text: str) -> str:
    """``text`` as inline code in a table cell."""
    return "`" + text.replace("|", r"\|") + "`" if text else ""


def split_help(help_text: str) -> tuple[str, str, str, bool]:
    """(meaning, default, range, required) from a help line as click shows it. The trailing
    ``[...]`` groups, those click appends (``[default: 1; x>=1]``, ``[required]``) and those the
    help writes itself (``[default: None]``: none), are taken off the meaning; a last group of
    other text (``[save_freq]``, ``[DQN3_0_1_<game>_FULL_Y]``) is a default computed from
    something else where no other default is given."""
    default, value_range, required = "", "", False
    while m := _TRAILING.search(help_text):
        parts = [p.strip() for p in m[1].split(";")]
        if all(p.startswith("default:") or p == "required" or _RANGE.fullmatch(p) for p in parts):
            for part in parts:
                if part.startswith("default:"):
                    value = part.removeprefix("default:").strip()
                    default = default or ("" if value == "None" else value)
                elif part == "required":
                    required = True
                else:
                    value_range = part
        elif not default:
            default = m[1]
        else:
            break
        help_text = help_text[:m.start()]
    return help_text.strip(), default, value_range, required


def option_row(name: str, ctx: click.Context, param: click.Option) -> str:
    """One table row: option, other spellings, value, default, meaning."""
    from dqn_nature.config import FIELD_BY_NAME

    names = param.opts + param.secondary_opts
    primary = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    main = [primary] + [o for o in param.secondary_opts if o.startswith("--")]
    others = [o for o in names if o not in main]
    metavar = "" if param.is_flag else param.make_metavar(ctx)
    meaning, default, value_range, required = split_help(param.get_help_record(ctx)[1])
    if name == "dqn-train" and param.name in FIELD_BY_NAME and FIELD_BY_NAME[param.name].metadata["agent"]:
        meaning += " (agent_params)"
    value = _code(metavar) + (f" ({_code(value_range)})" if value_range else "")
    default = "required" if required else _code(default)
    return (f"| {', '.join(map(_code, main))} | {', '.join(map(_code, others))} | {value} | {default} | "
            f"{_cell(meaning)} |")


def command_section(name: str) -> list[str]:
    """The Markdown section of command ``name``: usage, description and option table."""
    ctx = context(name)
    cmd = ctx.command
    usage = " ".join([name, *cmd.collect_usage_pieces(ctx)])
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(cmd.help or "").split("\n\n") if p.strip()]
    arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
    help_names = set(cmd.get_help_option_names(ctx))
    options = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden
               and not set(p.opts) <= help_names]
    lines = [f"## {name}", "", "```text", usage, "```", ""]
    for paragraph in paragraphs:
        lines += [_text(paragraph), ""]
    if arguments:
        lines += ["Arguments: " + ", ".join(f"`{p.make_metavar(ctx)}`" for p in arguments) + ".", ""]
    lines += ["| option | other spellings | value | default | meaning |", "|---|---|---|---|---|"]
    lines += [option_row(name, ctx, p) for p in options]
    return lines + [""]


def render() -> str:
    """The whole of docs/options.md."""
    lines = [
        "# Options of the dqn-* commands",
        "",
        "<!-- Generated from the commands' click declarations by docs/make_options.py; do not edit:",
        "     run `python docs/make_options.py` after changing an option. -->",
        "",
        "Every option of every command, as `--help` prints it (`-h` works too). The single-dash",
        "spellings (`-eval_freq`, `-csv_file`) are those of DQN 3.0's `train_agent.lua` and",
        "`test_agent.lua`, so the original argument strings work verbatim. For what the commands",
        "do, see [training.md](training.md), [watching.md](watching.md), [curves.md](curves.md),",
        "[sweeps.md](sweeps.md), [legacy.md](legacy.md) and [history.md](history.md).",
        "",
        *(f"- [{name}](#{name})" for name in COMMANDS),
        "",
    ]
    for name in COMMANDS:
        lines += command_section(name)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"Wrote {OUTPUT}")
