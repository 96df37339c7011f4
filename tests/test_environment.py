"""GameEnvironment (alewrap semantics) on the real ALE."""
import shutil

import numpy as np
import pytest
from ale_py import roms

from dqn_nature import GameEnvironment, environment
from dqn_nature.environment import GameError, GameScreen, rom_path

MINIMAL_ACTIONS = {"pong": [0, 1, 3, 4, 11, 12], "breakout": [0, 1, 3, 4]}
LIVES = {"pong": 0, "breakout": 5}


def raw_frame(env):
    return env.ale.getScreenRGB().astype(np.float32) / 255


def play_until_life_lost(env, training):
    """Step Breakout with FIRE/RIGHT/LEFT/NOOP in turn until a life is lost; return the step count
    and the (state before, frame number before, step result) of that step."""
    actions = env.get_actions()
    for i in range(2000):
        lives, frame, state = env.ale.lives(), env.ale.getFrameNumber(), env.ale.cloneState()
        result = env.step(actions[(i + 1) % len(actions)], training=training)
        if env.ale.lives() < lives:
            return i, state, frame, result
    raise AssertionError("no life lost in 2000 steps")


@pytest.mark.parametrize("game", ["pong", "breakout"])
def test_reset_state(game):
    env = GameEnvironment(game, seed=1)
    screen, reward, terminal = env.get_state()
    assert screen.dtype == np.float32 and screen.shape == (210, 160, 3)
    assert 0 <= screen.min() and screen.max() <= 1 and screen.max() > 0
    # One frame painted so far: the pooled screen is that frame, not a max with stale zeros.
    np.testing.assert_array_equal(screen, raw_frame(env))
    assert reward == 0 and terminal is False
    assert env.get_actions() == MINIMAL_ACTIONS[game]
    assert env.ale.lives() == LIVES[game]
    assert env.n_obs_feature() == 210 * 160 * 3


@pytest.mark.parametrize("game, pool_type, pool_size", [("pong", "max", 2), ("breakout", "max", 2),
                                                        ("breakout", "mean", 3)])
def test_step_pools_the_last_frames_and_sums_rewards(game, pool_type, pool_size):
    env = GameEnvironment(game, actrep=4, seed=3, pool_type=pool_type, pool_size=pool_size)
    actions = env.get_actions()
    rng = np.random.default_rng(0)
    pooled_differs = False
    for _ in range(60):
        a = actions[rng.integers(len(actions))]
        saved = env.ale.cloneState()
        rewards, frames = [], []
        for _ in range(4):
            rewards.append(env.ale.act(a))
            frames.append(env.ale.getScreenRGB())
        env.ale.restoreState(saved)
        screen, reward, terminal = env.step(a)
        last = np.array(frames[-pool_size:], np.float32)
        expected = (last.max(axis=0) if pool_type == "max" else last.sum(axis=0) / pool_size) / 255
        np.testing.assert_allclose(screen, expected, rtol=0, atol=1e-7)
        assert screen.dtype == np.float32
        assert reward == sum(rewards) and terminal is False
        assert env.get_state()[1] == reward
        pooled_differs |= not np.array_equal(frames[-2], frames[-1])
    assert pooled_differs  # otherwise the test could not tell pooling from the last frame


def test_reward_summed_over_repeats():
    # Doing nothing in Pong, the opponent scores twice within 400 frames.
    env = GameEnvironment("pong", actrep=400, seed=1)
    saved = env.ale.cloneState()
    expected = sum(env.ale.act(0) for _ in range(400))
    env.ale.restoreState(saved)
    frame = env.ale.getFrameNumber()
    assert env.step(0)[1] == expected == -2
    assert env.ale.getFrameNumber() - frame == 400


def test_life_loss_terminal_only_in_training():
    train_env = GameEnvironment("breakout", actrep=4, seed=1)
    test_env = GameEnvironment("breakout", actrep=4, seed=1)
    i_train, _, frame, (_, _, terminal) = play_until_life_lost(train_env, training=True)
    assert terminal is True and train_env.ale.lives() == 4 and not train_env.ale.game_over()
    i_test, _, frame, (_, _, terminal) = play_until_life_lost(test_env, training=False)
    assert i_test == i_train and terminal is False
    assert test_env.ale.getFrameNumber() - frame == 4  # no early stop without a terminal


def test_repetition_stops_at_life_loss():
    env = GameEnvironment("breakout", actrep=8, seed=1)
    i, saved, frame, _ = play_until_life_lost(env, training=True)
    played = env.ale.getFrameNumber() - frame
    env.ale.restoreState(saved)
    action = env.get_actions()[(i + 1) % 4]
    lives, n = env.ale.lives(), 0
    while env.ale.lives() == lives:
        env.ale.act(action)
        n += 1
    assert n < 8 and played == n


def test_new_game_after_life_loss_continues_after_game_over_resets():
    env = GameEnvironment("breakout", seed=1)
    play_until_life_lost(env, training=True)
    frame = env.ale.getEpisodeFrameNumber()
    env.new_game()
    assert env.ale.lives() == 4 and env.ale.getEpisodeFrameNumber() == frame + 1
    assert env.get_state()[2] is False
    for _ in range(3000):  # FIRE only until game over; life losses are not terminal here
        if env.step(1)[2]:
            break
    assert env.ale.game_over() and env.get_state()[2] is True
    screen, reward, terminal = env.new_game()
    assert env.ale.lives() == 5 and env.ale.getEpisodeFrameNumber() == 0
    assert reward == 0 and terminal is False
    np.testing.assert_array_equal(screen, raw_frame(env))  # the screen was cleared


def test_new_game_burns_a_running_game():
    env = GameEnvironment("breakout", seed=1)
    env.step(1)
    frame = env.ale.getFrameNumber()
    env.new_game()
    assert env.ale.getFrameNumber() > frame + 50  # the rest of the game was played randomly
    assert env.ale.getEpisodeFrameNumber() == 0 and env.ale.lives() == 5


def test_new_game_burns_with_uniform_random_minimal_actions():
    env = GameEnvironment("breakout", seed=1)
    env.step(1)
    played, step = [], env._step
    env._step = lambda action: (played.append(action), step(action))[1]  # the real frames, logged
    env.new_game()
    burnt, last = played[:-1], played[-1]
    assert last == 0 and env.ale.getEpisodeFrameNumber() == 0  # then one no-op that resets
    counts = np.bincount(burnt, minlength=5)[MINIMAL_ACTIONS["breakout"]]
    assert len(burnt) > 200 and counts.sum() == len(burnt)  # minimal-set actions only
    expected = len(burnt) / 4
    assert (abs(counts - expected) < 5 * np.sqrt(expected * 3 / 4)).all(), counts


def test_a_terminal_steps_reward_includes_its_last_frame():
    """Pong, no-ops until the game is over in one long step: the point lost in the last
    frame, the one that ends the game, is in the step's reward."""
    env = GameEnvironment("pong", actrep=100_000, seed=1)
    saved = env.ale.cloneState()
    rewards = []
    while not env.ale.game_over():
        rewards.append(env.ale.act(0))
    env.ale.restoreState(saved)
    assert rewards[-1] == -1 and len(rewards) < 100_000
    frame = env.ale.getFrameNumber()
    screen, reward, terminal = env.step(0)
    assert terminal is True and reward == sum(rewards) == -21
    assert env.ale.getFrameNumber() - frame == len(rewards)


@pytest.mark.parametrize("k", [1, 7])
def test_next_random_game_plays_k_frames_after_new_game(k):
    env = GameEnvironment("breakout", seed=1)
    play_until_life_lost(env, training=True)  # terminal: new_game() plays just its one no-op
    frame = env.ale.getFrameNumber()
    screen, reward, terminal = env.next_random_game(k)
    assert env.ale.getFrameNumber() - frame == 1 + k
    assert terminal is False and env.ale.lives() == 4
    for _ in range(3000):
        if env.step(1)[2]:
            break
    env.next_random_game(k)  # after game over: reset, then k frames
    assert env.ale.getEpisodeFrameNumber() == k and env.ale.lives() == 5


def test_next_random_game_draws_every_k_in_1_to_random_starts():
    env = GameEnvironment("breakout", random_starts=4, seed=2)
    ks = []
    while len(ks) < 40:
        play_until_life_lost(env, training=True)
        frame = env.ale.getFrameNumber()
        game_over = env.ale.game_over()
        env.next_random_game()  # after a life lost: its one no-op, then k frames, no reset
        if not game_over:
            ks.append(env.ale.getFrameNumber() - frame - 1)
    assert set(ks) == {1, 2, 3, 4}  # P(a value missing from 40 draws) < 1e-4


@pytest.mark.parametrize("game, hint", [
    ("pongg", "did you mean pong?"),
    ("PONG", "did you mean pong, "),  # other spellings and Gym/ALE ids: their ROM id first
    ("PongNoFrameskip-v4", "did you mean pong, "),
    ("ALE/SpaceInvaders-v5", "did you mean space_invaders, "),
    ("MontezumaRevenge", "did you mean montezuma_revenge, "),
    ("xyzzy", "see ale_py.roms.get_all_rom_ids()"),
])
def test_unknown_game_names_close_matches(game, hint):
    with pytest.raises(GameError) as err:
        GameEnvironment(game)
    assert str(err.value).startswith(f"unknown game {game!r}; {hint}")


@pytest.mark.parametrize("size, gigabytes", [(10**9, "100,800.0"), (10**14, "10,080,000,000.0")])
def test_a_pool_beyond_memory_is_one_line(size, gigabytes):  # 10**14 is beyond NumPy's largest array
    with pytest.raises(GameError, match=rf"^pool size {size}: its {gigabytes} GB of screens do not fit in memory$"):
        GameEnvironment("pong", pool_size=size)


def test_a_pool_beyond_available_memory_is_refused_before_allocating(monkeypatch):
    """Where the kernel overcommits (vm.overcommit_memory=1), NumPy would allocate it anyway."""
    monkeypatch.setattr(environment, "available_memory", lambda: 10**9)
    with pytest.raises(GameError, match=r"^pool size 20000: its 2.0 GB of screens do not fit in memory$"):
        GameScreen(20_000)


def test_mean_pooling_follows_torch7_float32_steps():
    """alewrap paints k / 255 in float32; Torch7's mean sums in double, rounds to float32 and
    halves: bytes 1 and 2 pool to 0x3BC0C0C2, where 1.5 / 255 would be 0x3BC0C0C1."""
    screen = GameScreen(2, "mean")
    for value in (1, 2):
        screen.paint_buffer()[:] = value
    pooled = screen.grab()
    assert pooled.dtype == np.float32
    assert (pooled.view(np.uint32) == 0x3BC0C0C2).all()


def test_a_game_path_without_the_rom_plays_ale_pys_and_says_so(tmp_path):
    # The Lua-era -game_path roms/ on a fresh checkout, whose roms/ holds no pong.bin.
    with pytest.warns(UserWarning, match=f"no ROM file '{tmp_path}/pong.bin' in --game-path '{tmp_path}': using "
                                         "the pong ROM that ale-py ships"):
        env = GameEnvironment("pong", game_path=str(tmp_path))
    assert env.get_actions() == MINIMAL_ACTIONS["pong"]
    with pytest.raises(GameError, match="unknown game 'pongg'"):  # refused before any warning
        rom_path("pongg", str(tmp_path))


def test_game_path_rom_is_used(tmp_path):
    shutil.copy(roms.get_rom_path("breakout"), tmp_path / "breakout.bin")
    assert rom_path("breakout", str(tmp_path)) == str(tmp_path / "breakout.bin")
    assert GameEnvironment("breakout", game_path=str(tmp_path)).get_actions() == MINIMAL_ACTIONS["breakout"]


def test_game_path_rom_must_be_the_games(tmp_path):
    # ALE takes a game's settings from the file name: another ROM would be scored as Pong,
    # and bytes that are no ROM hang the emulator.
    shutil.copy(roms.get_rom_path("breakout"), tmp_path / "pong.bin")
    with pytest.raises(GameError, match="is the ROM of breakout, not of pong"):
        GameEnvironment("pong", game_path=str(tmp_path))
    (tmp_path / "pong.bin").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(GameError, match=r"pong.bin' is no ROM that ALE knows \(unknown MD5\)"):
        GameEnvironment("pong", game_path=str(tmp_path))


def test_step_records_lives_even_outside_training():
    env = GameEnvironment("breakout", seed=1)
    play_until_life_lost(env, training=False)  # a life lost without a terminal, as in an evaluation
    assert env.ale.lives() == 4
    _, _, terminal = env.step(env.get_actions()[0], training=True)  # NOOP: the ball is not served
    assert terminal is False and env.ale.lives() == 4  # only a life lost in this step is terminal


def test_mean_pool_after_a_new_game_is_the_one_frame_painted():
    env = GameEnvironment("breakout", seed=1, pool_type="mean", pool_size=3)
    np.testing.assert_array_equal(env.get_state()[0], env.ale.getScreenRGB().astype(np.float32) / 255)
