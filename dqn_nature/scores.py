"""Reference scores: the Nature DQN results and the random and human baselines, per game.

Sources:
- ``nature_mean``, ``nature_std``: DQN's score in Extended Data Table 2 of Mnih et al., "Human-level
  control through deep reinforcement learning", Nature 518, 529-533 (2015); the standard deviation
  where the table lists one. Only games whose score was cross-checked against a second public
  transcription are included.
- ``random``, ``human``: the random-agent and human scores of the 57-game protocol, as listed in
  DQN Zoo's ``atari_data.py`` (google-deepmind/dqn_zoo).

Scores are mean undiscounted episode returns (game points). Games are keyed by ale-py ROM id.
"""
from __future__ import annotations

import typing


class Score(typing.NamedTuple):
    """One game's reference scores (game points per episode); None where unknown."""

    nature_mean: float | None
    nature_std: float | None
    random: float | None
    human: float | None


SCORES: dict[str, Score] = {
    "alien": Score(3069, None, 227.8, 7127.7),
    "amidar": Score(739.5, None, 5.8, 1719.5),
    "assault": Score(3359, None, 222.4, 742.0),
    "asterix": Score(6012, None, 210.0, 8503.3),
    "bank_heist": Score(429.7, None, 14.2, 753.1),
    "battle_zone": Score(26300, None, 2360.0, 37187.5),
    "beam_rider": Score(6846, 1619, 363.9, 16926.5),
    "boxing": Score(71.8, None, 0.1, 12.1),
    "breakout": Score(401.2, 26.9, 1.7, 30.5),
    "chopper_command": Score(6687, None, 811.0, 7387.8),
    "crazy_climber": Score(114103, None, 10780.5, 35829.4),
    "demon_attack": Score(9711, None, 152.1, 1971.0),
    "enduro": Score(301.8, 24.6, 0.0, 860.5),
    "freeway": Score(30.3, None, 0.0, 29.6),
    "frostbite": Score(328.3, None, 65.2, 4334.7),
    "gopher": Score(8520, None, 257.6, 2412.5),
    "hero": Score(19950, None, 1027.0, 30826.4),
    "jamesbond": Score(576.7, None, 29.0, 302.8),
    "kangaroo": Score(6740, None, 52.0, 3035.0),
    "krull": Score(3805, None, 1598.0, 2665.5),
    "kung_fu_master": Score(23270, None, 258.5, 22736.3),
    "ms_pacman": Score(2311, None, 307.3, 6951.6),
    "pong": Score(18.9, 1.3, -20.7, 14.6),
    "private_eye": Score(1788, None, 24.9, 69571.3),
    "qbert": Score(10596, None, 163.9, 13455.0),
    "road_runner": Score(18257, None, 11.5, 7845.0),
    "seaquest": Score(5286, 1310, 68.4, 42054.7),
    "space_invaders": Score(1976, 893, 148.0, 1668.7),
    "up_n_down": Score(8456, None, 533.4, 11693.2),
}


def reference(game: str) -> Score:
    """The reference scores of ``game`` (ale-py ROM id); all None for a game not listed."""
    return SCORES.get(game, Score(None, None, None, None))


def human_normalised(score: float, game: str) -> float | None:
    """``100 * (score - random) / (human - random)`` in percent; None when random/human are unknown."""
    ref = reference(game)
    if ref.random is None or ref.human is None:
        return None
    return 100.0 * (score - ref.random) / (ref.human - ref.random)


def percent_of_nature(score: float, game: str) -> float | None:
    """``100 * score / nature_mean`` in percent; None when the paper's score is unknown (or zero)."""
    paper = reference(game).nature_mean
    return None if not paper else 100.0 * score / paper
