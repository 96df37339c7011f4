"""The documentation agrees with the code: every ``dqn-*`` command line shown in README.md and
docs/*.md names only options its command has, every relative link and image there resolves
(``#anchor`` parts to a heading of the target), and docs/options.md is what
docs/make_options.py generates from the click declarations. Runs on the real click commands;
nothing is trained or executed."""
from __future__ import annotations

import fnmatch
import glob
import importlib.util
import re
import shlex
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console", "zsh"}  # fenced blocks whose lines are commands
WRAPPERS = {"time", "nohup", "exec", "env"}  # words that may stand before a command
SEPARATORS = {"&&", "||", "|", ";"}
NOT_COMMANDS = {"dqn-nature"}  # the package's name, as in pip install "dqn-nature[ray]"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_options", ROOT / "docs" / "make_options.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_options = _load_generator()


def split_markdown(text: str) -> tuple[list[tuple[str, int, list[str]]], list[str]]:
    """Fenced code blocks as (language, first line number, lines), and the text's lines with
    the blocks blanked (so line numbers stay). Fences may be indented (inside list items) or
    quoted (``> ```sh``)."""
    blocks, prose, block = [], [], None
    for number, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"^\s*(>\s?)+", "", line)  # inside a block quote
        stripped = line.strip()
        if block is None and re.match(r"(```|~~~)", stripped):
            fence = stripped[:3]
            block = (stripped[3:].strip().split(" ")[0].lower(), number + 1, [], fence)
            prose.append("")
        elif block is not None and stripped.startswith(block[3]):
            blocks.append(block[:3])
            block = None
            prose.append("")
        elif block is not None:
            block[2].append(line)
            prose.append("")
        else:
            prose.append(line)
    return blocks, prose


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote: prose in a code span
        return line.split()


def commands_in(words: list[str]) -> list[list[str]]:
    """The ``dqn-*`` commands among shell words: split at ``&&``, ``|``, ``;``, each part's
    leading ``VAR=value`` and wrappers (``time``) skipped; ``...`` placeholders dropped."""
    found, part = [], []
    for word in [*words, ";"]:
        if word not in SEPARATORS:
            part.append(word)
            continue
        while part and (re.fullmatch(r"\w+=.*", part[0]) or part[0] in WRAPPERS):
            part.pop(0)
        if part and re.fullmatch(r"dqn-[a-z]+", part[0]) and part[0] not in NOT_COMMANDS:
            found.append([w for w in part if w != "..."])
        part = []
    return found


def command_lines(text: str) -> list[tuple[int, list[str], bool]]:
    """Every ``dqn-*`` command in a Markdown text, as (line number, argv, fragment): from
    fenced shell blocks (backslash continuations joined, ``$ `` prompts and comments dropped)
    and from inline code spans that start with ``dqn-`` (``fragment``: such a span may name an
    option without its value)."""
    blocks, prose = split_markdown(text)
    found = []
    for language, first, lines in blocks:
        if language not in SHELL_LANGUAGES:
            continue
        logical, start = "", first
        for number, line in enumerate(lines, first):
            if not logical:
                start = number
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            stripped = logical.strip()
            stripped = stripped[2:] if stripped.startswith("$ ") else stripped
            logical = ""
            if "dqn-" in stripped and not stripped.startswith("#"):
                found += [(start, argv, False) for argv in commands_in(_words(stripped))]
    joined = "\n".join(prose)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", joined):
        span = " ".join(m[1].split())
        if span.startswith("dqn-"):
            number = joined.count("\n", 0, m.start()) + 1
            found += [(number, argv, True) for argv in commands_in(_words(span))]
    return found


def command_problem(argv: list[str], fragment: bool = False) -> str | None:
    """Why ``argv`` is not a valid command line of the current CLI, or None: an unknown
    command or option, an option without its value (unless ``fragment``), or a surplus
    argument. Option values are not checked (docs show placeholders such as ``RUN.h5``).
    ``dqn-sweep``'s unknown options are checked as ``dqn-train``'s, to which it passes them."""
    name, args = argv[0], argv[1:]
    if name not in make_options.COMMANDS:
        return f"{name}: no such command (commands: {', '.join(make_options.COMMANDS)})"
    ctx = make_options.context(name)
    try:
        _, rest, _ = ctx.command.make_parser(ctx).parse_args(list(args))
    except click.BadOptionUsage as e:
        if fragment and "requires an argument" in e.message:
            return None
        return f"{name}: {e.format_message()}"
    except click.UsageError as e:  # NoSuchOption
        return f"{name}: {e.format_message()}"
    if name == "dqn-sweep":
        problem = command_problem(["dqn-train", *rest], fragment)
        return problem and f"dqn-sweep passes to {problem}"
    if rest:  # what the command's arguments did not take
        return f"{name}: unexpected argument(s) {rest}"
    return None


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but ``-`` and ``_``
    dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of the headings of the Markdown file ``path`` (repeats get ``-1``, ``-2``...)."""
    _, prose = split_markdown(path.read_text(encoding="utf-8"))
    seen, result = {}, set()
    for line in prose:
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m[1])
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def link_problems(path: Path) -> list[str]:
    """The relative links and images of the Markdown file ``path`` that do not resolve: a
    missing file or folder, or an ``#anchor`` that is no heading of the target Markdown file."""
    _, prose = split_markdown(path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`]*`", "", "\n".join(prose))  # links in code spans are code
    targets = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    targets += re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", text, re.M)
    problems = []
    for target in targets:
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{path.name}: {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor.lower() not in anchors(resolved):
            problems.append(f"{path.name}: {target}: no heading #{anchor} in {resolved.name}")
    return problems


def _documented_commands():
    """One case per distinct command line of each file, named by the file and line of its first use."""
    cases, seen = [], set()
    for path in DOC_FILES:
        if path.exists():
            for number, argv, fragment in command_lines(path.read_text(encoding="utf-8")):
                if (path, tuple(argv), fragment) not in seen:
                    seen.add((path, tuple(argv), fragment))
                    cases.append(pytest.param(argv, fragment, id=f"{path.name}:{number}:{' '.join(argv)[:60]}"))
    return cases


@pytest.mark.parametrize("argv, fragment", _documented_commands())
def test_documented_command_lines_parse(argv, fragment):
    assert command_problem(argv, fragment) is None, command_problem(argv, fragment)


@pytest.mark.parametrize("line", [
    "dqn-train --no-such-flag",
    "dqn-train --game pong -eval_frq 5000",
    "dqn-test --network run.h5 --gif pong.gif",           # no abbreviations of --gif-file
    "dqn-sweep --games pong --out sweeps/x --no-such-flag",  # passed on to dqn-train, which lacks it
    "dqn-plot run.h5 --reference",                       # an option without its value
    "dqn-slim run.h5 slim.h5 extra.h5",                  # a surplus argument
    "dqn-trian --game pong",                             # no such command
])
def test_a_wrong_command_line_is_caught(line):
    assert command_problem(shlex.split(line)) is not None


def test_command_lines_are_found_as_a_reader_types_them():
    text = "\n".join([
        "Run `dqn-test --network run.h5 --best` or `dqn-train --network`, not `dqn-nature`.",
        "```sh",
        "$ dqn-train --game pong \\",
        "    --steps 3000   # a comment --not-an-option",
        "# dqn-train --commented-out",
        "RAY_AUTH_MODE=token dqn-sweep --games pong --out s ... && time dqn-report s | head",
        "```",
        "   ```text",
        "   dqn-train --output-only",
        "   ```",
        "```python",
        "subprocess.run(['dqn-train', '--x'])",
        "```",
        "> ```sh",
        "> dqn-slim a.h5 b.h5",
        "> ```",
    ])
    found = [(number, " ".join(argv), fragment) for number, argv, fragment in command_lines(text)]
    assert found == [
        (3, "dqn-train --game pong --steps 3000", False),
        (6, "dqn-sweep --games pong --out s", False),
        (6, "dqn-report s", False),
        (15, "dqn-slim a.h5 b.h5", False),
        (1, "dqn-test --network run.h5 --best", True),
        (1, "dqn-train --network", True),
    ]
    assert command_problem(["dqn-train", "--network"], fragment=True) is None
    assert command_problem(["dqn-train", "--network"]) is not None


def test_documented_links_resolve():
    problems = [p for path in DOC_FILES if path.exists() for p in link_problems(path)]
    assert not problems, "\n".join(problems)


def test_a_broken_link_or_anchor_is_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: yes\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "# Page", "",
        "[fine](other.md#a-code-heading-yes) [self](#page) [web](https://example.com) ![img](other.md)",
        "[missing](nothere.md) ![gone](img/none.png) [bad anchor](other.md#no-such) [bad self](#nope)",
        "`[in code](ignored.md)`",
        "[ref]: missing_ref.md",
    ]), encoding="utf-8")
    assert link_problems(page) == [
        "page.md: nothere.md: no such file",
        "page.md: img/none.png: no such file",
        "page.md: other.md#no-such: no heading #no-such in other.md",
        "page.md: #nope: no heading #nope in page.md",
        "page.md: missing_ref.md: no such file",
    ]


def test_options_reference_is_current():
    current = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert current == make_options.render(), (
        "docs/options.md is out of date with the commands' options: run `python docs/make_options.py` "
        "and commit docs/options.md")


def test_the_options_reference_covers_every_console_script():
    scripts = re.findall(r'"(dqn-[a-z]+)=dqn_nature\.commands:\w+"', (ROOT / "setup.py").read_text(encoding="utf-8"))
    assert scripts and sorted(scripts) == sorted(make_options.COMMANDS)
    for name in scripts:
        assert isinstance(make_options.command(name), click.Command)


# -- the files the examples name -------------------------------------------------------------

PLACEHOLDER = re.compile(r"(^|/)[A-Z][A-Z0-9_]*(\.[\w.]+)?$|[<>{}$]")  # RUN.h5, NEW.h5, <name>.h5


def run_files(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the files or folders a documented command line makes, those it reads) among histories,
    checkpoints and runs: ``dqn-train`` makes ``<name>.h5`` and ``<name>.ckpt`` and reads its
    ``--network`` and ``--resume``; ``dqn-sweep`` makes its ``--out`` folder; ``dqn-slim`` and
    ``dqn-convert`` make their second argument, and ``dqn-slim`` reads its first; ``dqn-test``
    reads its ``--network``; ``dqn-plot`` and ``dqn-report`` read their arguments. Lua-era
    ``.t7`` files are a user's own and placeholders (``RUN.h5``) are no files: neither is listed."""
    name, args = argv[0], argv[1:]
    ctx = make_options.context(name)
    try:
        parsed, _, _ = ctx.command.make_parser(ctx).parse_args(list(args))
    except click.UsageError:  # a fragment in prose (`dqn-test --csv-file`) names no file
        return [], []
    values = {k: v for k, v in parsed.items() if isinstance(v, (str, list, tuple))}  # not click's "unset"
    single = {k: v[-1] if isinstance(v, list) and v else v for k, v in values.items()}
    made, read = [], []
    if name == "dqn-train":
        resume = single.get("resume")
        base = single.get("name") or (resume and re.sub(r"\.(h5|ckpt)$", "", resume)) or (
            single.get("game") and f"DQN3_0_1_{single['game']}_FULL_Y")
        made = [base + ".h5", base + ".ckpt"] if base else []
        read = [p for p in (single.get("network"), resume) if p]
    elif name == "dqn-sweep":
        made = [single["out"].rstrip("/") + "/"] if single.get("out") else []
    elif name in ("dqn-slim", "dqn-convert"):
        made = [single["target"]] if single.get("target") else []
        read = [single["source"]] if name == "dqn-slim" and single.get("source") else []
    elif name == "dqn-test":
        read = [single["network"]] if single.get("network") else []
    elif name in ("dqn-plot", "dqn-report"):
        read = list(values.get("runs") or [])
    return made, [p for p in read if not PLACEHOLDER.search(p) and not p.endswith(".t7")]


def is_made(path: str, made: list[str]) -> bool:
    """Whether the history, checkpoint, run name or folder ``path`` (a shell pattern, maybe) is
    among, or holds one of, the files and folders ``made``, or is a file of the repository."""
    def base(p):
        return re.sub(r"\.(h5|ckpt)$", "", p)

    folder = path.rstrip("/") + "/"
    for m in made:
        if fnmatch.fnmatch(base(m), base(path)) or m.startswith(folder) or (m.endswith("/") and path.startswith(m)):
            return True
    return bool(glob.glob(str(ROOT / path)))


def unmade_files(pages: list[Path]) -> list[str]:
    """The files that an example on one of ``pages`` reads where no earlier example on its page,
    nor the README's, makes them (or the repository holds them)."""
    readme = [argv for _, argv, _ in sorted(command_lines((ROOT / "README.md").read_text(encoding="utf-8")))]
    quick_start = [file for argv in readme for file in run_files(argv)[0]]
    problems = []
    for path in pages:
        made = list(quick_start)
        for number, argv, _ in sorted(command_lines(path.read_text(encoding="utf-8")), key=lambda c: c[0]):
            new, read = run_files(argv)
            problems += [f"{path.name}:{number}: {' '.join(argv)}: {p} is made by no example before it"
                         for p in read if not is_made(p, made)]
            made += new
    return problems


def test_every_example_reads_files_an_earlier_example_makes():
    problems = unmade_files([p for p in DOC_FILES if p.exists()])
    assert not problems, "\n".join(problems)


def test_an_example_reading_a_file_no_example_makes_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "```sh",
        "dqn-plot runs/pong.h5                  # made by no example",
        "dqn-train --game pong --name runs/a",
        "dqn-test --network runs/a.h5 && dqn-slim runs/a.h5 runs/a_slim.h5 && dqn-report runs/a_slim.h5 runs/",
        "dqn-train --resume runs/a --steps 9 && dqn-train --resume runs/b.ckpt   # b: no run",
        "dqn-sweep --games pong --out sweeps/s && dqn-plot sweeps/s/pong RUN.h5",
        "```",
        "Then `dqn-test --network runs/quick.h5` (the quick start's) and `dqn-report docs/results/*.h5`.",
    ]), encoding="utf-8")
    assert [p.split(": ")[-1] for p in unmade_files([page])] == [
        "runs/pong.h5 is made by no example before it", "runs/b.ckpt is made by no example before it"]
