"""Carry a DQN 3.0 run over: ``<name>.t7`` (or ``.params.t7``) to a ``.h5`` history (the work of
``dqn-convert``, ``commands/convert.py``)."""
from __future__ import annotations

import math

from . import __version__
from .environment import GameEnvironment
from .history import HISTORY_FIELDS, save_history


def convert(source: str, target: str, game: str | None = None, n_actions: int | None = None,
            cuda_conv: bool = False) -> str:
    """Write the history ``target`` from the DQN 3.0 file ``source``; return a summary line.

    A snapshot gives networks, histories (``step_history`` rebuilt from ``eval_freq`` and
    ``learn_start``) and arguments; a ``.params.t7`` vector gives ``model`` alone, for
    ``game``, which it does not name itself. The file's root attributes ``converted_from``
    and ``source`` record where it came from. No Lua counterpart.

    Args:
        game: ROM id; needed for a vector; for a snapshot, overrides its ``env`` argument.
        n_actions: expected action count (checked against a snapshot's network too).
        cuda_conv: a vector's convolution weights are in ``SpatialConvolutionCUDA`` order.

    Raises:
        torch7.LegacyError: unreadable or unsuitable file (``torch7.load_snapshot``), a frame
            count beyond 2^53, an action count that is not ``n_actions`` or the game's, or
            no game for a vector.
        environment.GameError: unknown game.
        OSError: ``target`` cannot be written.
    """
    from .network_files import network_misfit
    from .torch7 import LegacyError, load_snapshot, param_vector, params_state, read_t7, whole_number

    data = read_t7(source)
    vector = param_vector(data)
    if vector is not None:
        model = params_state(vector, source, n_actions, cuda_conv=cuda_conv)
        history = {key: [] for key in HISTORY_FIELDS}
        history["time_history"] = [0.0]
        arguments, best, steps = dict(game=game, hist_len=model["conv1.weight"].shape[1]), None, 0
        summary = f"a parameter vector ({model['fc2.weight'].shape[0]} actions)"
        no_game = "a parameter vector names no game"
    else:
        snap = load_snapshot(source, data)
        game = game or snap.game
        model, best, history, steps = snap.model, snap.best_model, snap.history, snap.steps
        arguments = {**snap.arguments, "game": game}
        rewards = history["reward_history"]
        # Scores as dqn-report takes them: not NaN (a hole in the Lua table), nor an evaluation's
        # recorded 0 where it finished no episode. max() of a list starting with NaN is NaN.
        scores = [r for r, n in zip(rewards, history["episode_counts"]) if n > 0 and not math.isnan(r)]
        summary = (f"{game}, {steps} steps, {len(rewards)} evaluations"
                   + (f", best reward {max(scores):g}" if scores else ""))
        no_game = "its arguments name no game (env)"
    if not game:  # a history without one is refused by every reader
        raise LegacyError(f"{source}: {no_game}; give one with --game")
    found = model["fc2.weight"].shape[0]
    if n_actions is not None and n_actions != found:  # a vector's is checked by params_state
        raise LegacyError(f"{source}: its network has {found} actions but --n-actions is {n_actions}")
    if misfit := network_misfit(model, game, len(GameEnvironment(game, random_starts=0).get_actions())):
        raise LegacyError(f"{source}: {misfit}")
    actrep = whole_number(arguments.get("actrep"), 1, source, "actrep")
    frames = whole_number(steps * actrep, 0, source, "frames (steps x actrep)")
    save_history(target, game=game, steps=steps, frames=frames, history=history, model=model,
                 best_model=best, arguments=arguments, package_version=__version__,
                 attrs=dict(converted_from=source, source="DQN 3.0 .t7"))
    return f"Converted {source} ({summary}) to {target}"
