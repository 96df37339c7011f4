"""Sets of runs for plots and reports: history files and folders loaded and grouped by game and
configuration, so that the seeds of one configuration draw as one curve and share a table row.
No Lua counterpart (DQN 3.0 left comparing runs to its users)."""
from __future__ import annotations

import dataclasses
import os

from .config import FIELDS
from .files import printable
from .history import HistoryError, load_history

LABEL_ARGUMENTS = 3  # differing arguments named in a run set's label

# Arguments that do not change what is learned (the seed, the ROM's folder, and the options a
# resumed run may change: output, logging, resources); runs differing only in these are seeds of
# one configuration.
RUN_ONLY_ARGUMENTS = frozenset({"seed", "game_path"} | {f.name for f in FIELDS if f.metadata["resume"]})


@dataclasses.dataclass
class RunSet:
    """Runs of one game and configuration (differing only in ``RUN_ONLY_ARGUMENTS``, e.g. seeds).

    Attributes: ``game``; ``arguments`` (the shared configuration, without ``RUN_ONLY_ARGUMENTS``);
    ``runs`` (list of ``History``, in the order given); ``label`` (a short name for legends and tables).
    """

    game: str
    arguments: dict
    runs: list
    label: str = ""

    def notes(self) -> list[str]:
        """One-line notes for reports and plots of the set: evaluations that finished no episode
        (their recorded 0 is left out), and runs that share a seed (on a CPU, one run twice)."""
        notes = []
        unscored = sum(int((r.episode_counts == 0).sum()) for r in self.runs)
        if unscored:
            total = sum(len(r.episode_counts) for r in self.runs)
            notes.append(f"{self.label}: {unscored} of {total} evaluations finished no episode; their recorded 0 "
                         "is not a score and is left out (a longer --eval-steps finishes episodes)")
        seeds = [r.arguments.get("seed") for r in self.runs]
        shared = sorted({s for s in seeds if s is not None and seeds.count(s) > 1})
        if shared:
            notes.append(f"{self.label}: several runs have seed {', '.join(map(str, shared))}; each counts as a "
                         "seed (on a CPU they repeat one run)")
        return notes


def history_paths(inputs) -> list:
    """Expand ``inputs`` (files and folders) to history paths: a folder gives every ``*.h5``
    below it, sorted, except ``*.params.h5``. A file met twice is kept once (the first time).

    Raises:
        HistoryError: a folder without any history file.
    """
    paths = {}  # real path: the first path met for it
    for item in inputs:
        found = [item]
        if os.path.isdir(item):
            found = sorted(os.path.join(root, name) for root, _, names in os.walk(item) for name in names
                           if name.endswith(".h5") and not name.endswith(".params.h5"))
            if not found:
                raise HistoryError(f"{item}: no .h5 history file in this folder")
        for path in found:
            paths.setdefault(os.path.realpath(path), path)
    return list(paths.values())


def _name_label(runs) -> str:
    """The runs' file names without folder and suffix, or their common prefix: text for legends
    and tables, with any bytes of a name that are not UTF-8 shown as U+FFFD."""
    names = [printable(os.path.splitext(os.path.basename(r.path))[0]) for r in runs]
    if len(names) == 1:
        return names[0]
    return os.path.commonprefix(names).rstrip("_-.0123456789") or names[0]


def _latest_versions(runs: list) -> list:
    """``runs`` (``History``s) with the ``--save-versions`` snapshots of each run (files in one
    folder with its stored name and seed) reduced to the one of most steps, in its first's place."""
    kept = {}
    for h in runs:
        a = h.arguments
        key = (os.path.dirname(os.path.realpath(h.path)), a.get("name"), a.get("seed")) if a.get("save_versions") \
            else id(h)
        if key not in kept or h.steps > kept[key].steps:
            kept[key] = h
    return list(kept.values())


def load_runs(paths, skip=None) -> list:
    """Load histories (files, or folders searched by ``history_paths``) grouped into ``RunSet``s
    by game and configuration, in order of first appearance. No Lua counterpart.

    A run's ``--save-versions`` snapshots count once, by the one of most steps. Labels: the file names
    (their common prefix for several seeds) and, where a game has several configurations, the first
    ``LABEL_ARGUMENTS`` arguments they differ in, alphabetically, e.g. ``pong_fast [update_freq=1]``.

    Args:
        skip: if given, a file found in a folder that is not a readable history is left out
            and ``skip`` called with the one-line reason; a file named in ``paths`` still raises.

    Raises:
        HistoryError: a path that is not a readable history, or no readable history at all.
    """
    paths = list(paths)
    named = {os.path.realpath(path) for path in paths if not os.path.isdir(path)}
    sets = {}
    for path in history_paths(paths):
        try:
            h = load_history(path)
        except HistoryError as e:
            if skip is None or os.path.realpath(path) in named:
                raise
            skip(str(e))
            continue
        config = {k: v for k, v in sorted(h.arguments.items()) if k not in RUN_ONLY_ARGUMENTS}
        sets.setdefault((h.game, repr(config)), RunSet(h.game, config, [])).runs.append(h)
    if not sets:
        raise HistoryError(f"no readable history in {', '.join(map(str, paths))}")
    result = list(sets.values())
    for s in result:
        s.runs = _latest_versions(s.runs)
        same_game = [o.arguments for o in result if o.game == s.game]
        differing = sorted({k for a in same_game for k in a if any(b.get(k) != a[k] for b in same_game)})
        s.label = _name_label(s.runs)
        if differing:
            shown = [f"{k}={s.arguments.get(k)}" for k in differing[:LABEL_ARGUMENTS]]
            if len(differing) > LABEL_ARGUMENTS:
                shown.append(f"+{len(differing) - LABEL_ARGUMENTS} more")
            s.label += " [" + ", ".join(shown) + "]"
    return result
