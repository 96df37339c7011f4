"""Reference scores (mean undiscounted episode returns, in game points) and curves per game, keyed by
ale-py ROM id. No Lua counterpart. The package ships them in ``dqn_nature/reference/``, whose README
gives each file's source and licence:

- ``nature_dqn_scores.csv``: DQN's score in Extended Data Table 2 of Mnih et al., Nature 518,
  529-533 (2015), and its standard deviation where the table lists one (29 games);
- ``atari57_random_human.csv``: the random-agent and human scores of the 57-game protocol, as
  DQN Zoo lists them;
- ``dopamine_dqn_curves.csv``: Dopamine's DQN, 5 runs of each of its 60 games, one mean
  training return per 1,000,000 frames.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import os
import typing
from importlib import resources

from .files import printable

CURVE_COLUMNS = ("game", "run", "frames", "mean_return")
# Curves shipped with the package, by the name that --reference gives them: file and label.
SHIPPED_CURVES = {"dopamine": ("dopamine_dqn_curves.csv", "Dopamine DQN")}


class Score(typing.NamedTuple):
    """One game's reference scores (game points per episode); None where unknown."""

    nature_mean: float | None
    nature_std: float | None
    random: float | None
    human: float | None


class CurvesError(ValueError):
    """Reference curves that cannot be read; the message is one line naming the file."""


def shipped(name: str) -> str:
    """The text of the file ``name`` in the package's ``reference`` folder. Raises OSError."""
    return (resources.files(__package__) / "reference" / name).read_text(encoding="utf-8")


def _number(text: str) -> float | None:
    return float(text) if text else None


@functools.cache
def _scores() -> dict[str, Score]:
    """Every game of either shipped score file: its Nature scores and random and human scores."""
    baselines = {row["game"]: (float(row["random_score"]), float(row["human_score"]))
                 for row in csv.DictReader(io.StringIO(shipped("atari57_random_human.csv")))}
    nature = {row["game"]: (_number(row["dqn_nature_mean"]), _number(row["dqn_nature_std"]))
              for row in csv.DictReader(io.StringIO(shipped("nature_dqn_scores.csv")))}
    return {game: Score(*nature.get(game, (None, None)), *baselines.get(game, (None, None)))
            for game in sorted(baselines.keys() | nature.keys())}


def reference(game: str) -> Score:
    """The reference scores of ``game`` (ale-py ROM id); all None for a game not listed."""
    return _scores().get(game, Score(None, None, None, None))


def human_normalised(score: float, game: str) -> float | None:
    """``100 (score - random) / (human - random)`` in percent; None when random/human are unknown."""
    ref = reference(game)
    if ref.random is None or ref.human is None:
        return None
    return 100.0 * (score - ref.random) / (ref.human - ref.random)


def dqn_normalised(score: float, game: str) -> float | None:
    """``100 (score - random) / (Nature DQN - random)`` in percent: 0 plays as a random agent,
    100 as the paper's DQN; None when either is unknown (or they are equal)."""
    ref = reference(game)
    if ref.random is None or ref.nature_mean is None or ref.nature_mean == ref.random:
        return None
    return 100.0 * (score - ref.random) / (ref.nature_mean - ref.random)


@dataclasses.dataclass
class Curves:
    """Learning curves of several runs per game: ``label`` names them in legends and tables ("Dopamine
    DQN" for the shipped curves, the file's name for others); ``points`` is ``{game: {frames: [value
    of each run with a point there, in the file's order]}}``, frames and values as float."""

    label: str
    points: dict

    def runs(self, game: str) -> int:
        """How many runs ``game`` has (0 for a game not in the curves)."""
        return max(map(len, self.points.get(game, {}).values()), default=0)


def read_curves(source: str) -> Curves:
    """Curves from ``source``: a name of ``SHIPPED_CURVES`` ("dopamine"), or the path of a
    UTF-8 CSV file (with or without a byte-order mark, as Excel saves it) with the columns
    ``CURVE_COLUMNS`` (others ignored).

    Raises:
        CurvesError: unreadable file, missing columns or a value that is not a finite number.
    """
    if source in SHIPPED_CURVES:
        name, label = SHIPPED_CURVES[source]
        return Curves(label, _parse(shipped(name).splitlines(), name))
    try:
        with open(source, newline="", encoding="utf-8-sig") as f:
            points = _parse(f, source)
    except OSError as e:
        raise CurvesError(f"{source}: cannot read the reference CSV ({e.strerror})") from None
    except UnicodeDecodeError:
        raise CurvesError(f"{source}: not a text CSV file") from None
    stem = printable(os.path.splitext(os.path.basename(source))[0])
    return Curves(stem or source, points)


def _parse(lines, source: str) -> dict:
    """The ``Curves.points`` of CSV ``lines``; ``source`` names them in errors."""
    try:
        reader = csv.DictReader(lines)
        missing = [c for c in CURVE_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise CurvesError(f"{source}: reference CSV lacks column(s) {', '.join(missing)} "
                              f"(needs {','.join(CURVE_COLUMNS)})")
        points = {}
        for line, row in enumerate(reader, start=2):
            try:
                frames, value = float(row["frames"]), float(row["mean_return"])
                if not (math.isfinite(frames) and math.isfinite(value)):
                    raise ValueError
            except (TypeError, ValueError):
                raise CurvesError(f"{source}:{line}: frames and mean_return must be finite numbers") from None
            points.setdefault(row["game"], {}).setdefault(frames, []).append(value)
    except csv.Error as e:  # e.g. a field over the csv module's size limit
        raise CurvesError(f"{source}: not a readable CSV file ({e})") from None
    return points
