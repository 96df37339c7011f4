"""TransitionTable on hand-made frames: frame i holds the value i + 1 (0 once zeroed)."""
import numpy as np
import pytest

from dqn_nature import TransitionTable

HIST = 4


def make_table(n, terminals=(), max_size=100, buffer_size=16, seed=0):
    table = TransitionTable(3, 4, HIST, max_size, buffer_size, rng=np.random.default_rng(seed))
    for i in range(n):
        table.add(np.full(3, i + 1, np.uint8), i % 4, i / 10, i in terminals)
    return table


def ids(frames):
    """Frame values of a (hist_len, 3) state: the stored frame index + 1, or 0 when zeroed."""
    assert (frames == frames[:, :1]).all()
    return list(frames[:, 0])


def index_of(sample):
    """Start index of a transition returned by get(): its newest frame is never zeroed."""
    return int(sample[0][-1, 0]) - HIST


def test_concat_frames_zeroes_older_episodes():
    table = make_table(10, terminals={3, 5})
    assert ids(table.concat_frames(0)) == [1, 2, 3, 4]  # the newest frame's own flag is ignored
    assert ids(table.concat_frames(2)) == [0, 0, 5, 6]  # frame 3 ended an episode
    assert ids(table.concat_frames(4)) == [0, 0, 7, 8]
    assert ids(table.concat_frames(5)) == [0, 7, 8, 9]
    assert ids(table.concat_frames(6)) == [7, 8, 9, 10]
    assert table.concat_frames(2).dtype == np.uint8 and table.concat_frames(2).shape == (HIST, 3)
    assert table.s[3, 0] == 4  # zeroing works on a copy


def test_get_alignment():
    table = make_table(10, terminals={3, 5})
    s, a, r, s2, term = table.get(2)
    assert ids(s) == [0, 0, 5, 6] and ids(s2) == [0, 0, 0, 7]
    assert (a, r, term) == (5 % 4, pytest.approx(0.5), False)  # a, r at index+3; term at index+4
    s, a, r, s2, term = table.get(1)
    assert ids(s) == [0, 0, 0, 5] and ids(s2) == [0, 0, 5, 6]
    assert (a, r, term) == (0, pytest.approx(0.4), True)


def test_sample_one_range():
    table = make_table(20)
    drawn = {index_of(table.sample_one()) for _ in range(300)}
    assert drawn == set(range(1, 20 - HIST))  # [1, num_entries - hist_len - 1]


def test_sample_one_rejects_states_ending_an_episode():
    table = make_table(30, terminals=set(range(30)) - {7, 12})
    drawn = []
    for _ in range(50):
        sample = table.sample_one()
        i = index_of(sample)
        drawn.append(i)
        s, a, r, s2, term = table.get(i)
        np.testing.assert_array_equal(sample[0], s)
        assert sample[1:3] == (a, r) and sample[4] == term
    assert set(drawn) == {7 - 3, 12 - 3}  # only where the flag at index+3 is clear


def test_sample_indices_equals_sequential_sample_one():
    terminals = {5, 11, 12, 20, 33}
    one, many = make_table(40, terminals, seed=7), make_table(40, terminals, seed=7)
    sequential = [index_of(one.sample_one()) for _ in range(100)]
    assert list(many.sample_indices(100)) == sequential
    assert one.rng.bit_generator.state == many.rng.bit_generator.state


def test_sample_prefetches_and_refills_only_at_the_end():
    terminals = {5, 11, 12, 20, 33}
    table = make_table(40, terminals, buffer_size=16, seed=3)
    expected = make_table(40, terminals, seed=3).sample_indices(16)
    s, a, r, s2, term = table.sample(5)
    assert table.buf_ind == 5
    for j, i in enumerate(expected[:5]):
        gs, ga, gr, gs2, gterm = table.get(int(i))
        np.testing.assert_array_equal(s[j], gs)
        np.testing.assert_array_equal(s2[j], gs2)
        assert (a[j], r[j], term[j]) == (ga, np.float32(gr), float(gterm))
    state = table.rng.bit_generator.state
    s, *_ = table.sample(5)
    assert table.buf_ind == 10 and table.rng.bit_generator.state == state
    np.testing.assert_array_equal(s[0], table.get(int(expected[5]))[0])
    table.sample(5)
    assert table.buf_ind == 15 and table.rng.bit_generator.state == state
    table.sample(5)  # 15 + 5 > 16: refill
    assert table.buf_ind == 5 and table.rng.bit_generator.state != state


def default_sized_table():
    table = TransitionTable(3, 4, HIST, max_size=1000, rng=np.random.default_rng(0))
    for i in range(600):
        table.add(np.full(3, i % 250, np.uint8), 0, 0.0, i % 7 == 0)
    return table


@pytest.mark.parametrize("table, batch, per_refill", [(lambda: make_table(40, buffer_size=16, seed=3), 4, 4),
                                                      (default_sized_table, 32, 16)],
                         ids=["bufferSize 16", "bufferSize 512, the default"])
def test_sample_uses_the_buffer_to_its_last_slot(table, batch, per_refill):
    table = table()
    table.sample(batch)
    state = table.rng.bit_generator.state
    for _ in range(per_refill - 1):
        table.sample(batch)
    assert table.buf_ind == batch * per_refill and table.rng.bit_generator.state == state
    table.sample(batch)
    assert table.buf_ind == batch and table.rng.bit_generator.state != state


def test_sample_rejects_batches_as_large_as_the_buffer_and_small_tables():
    with pytest.raises(ValueError):
        make_table(40, buffer_size=16).sample(16)
    with pytest.raises(RuntimeError):
        make_table(10, buffer_size=16).sample(4)


def test_wrap_around():
    table = make_table(13, max_size=10)
    assert table.size() == 10 and table.num_entries == 10 and table.insert_index == 3
    assert list(table.s[:, 0]) == [11, 12, 13, 4, 5, 6, 7, 8, 9, 10]
    assert list(table.a[:3]) == [10 % 4, 11 % 4, 12 % 4]
    table.reset()
    assert table.empty() and table.size() == 0


def test_sampling_straddles_the_insert_position_once_wrapped():
    """As in the Lua, indices are drawn from [1, num_entries - hist_len - 1] whatever the insert
    position, so a state can join the newest frames to the oldest."""
    table = make_table(13, max_size=10, buffer_size=8)  # frames 11, 12, 13 | 4, ..., 10; insert position 3
    expected = {(12, 13, 4, 5), (13, 4, 5, 6), (4, 5, 6, 7), (5, 6, 7, 8), (6, 7, 8, 9)}
    assert {tuple(ids(table.sample_one()[0])) for _ in range(300)} == expected
    assert {tuple(ids(table.sample(1)[0][0])) for _ in range(300)} == expected


def test_add_stores_float_frames_by_truncation():
    table = make_table(0)
    table.add(np.array([0.999, 0.5, 1.0], np.float32), 2, -1.0, False)
    assert list(table.s[0]) == [254, 127, 255]


def test_get_recent_starts_from_zero_frames_flagged_terminal():
    table = make_table(0)
    assert table.recent_t.all()
    recent = table.get_recent()
    assert recent.dtype == np.float32 and recent.shape == (HIST, 3) and not recent.any()
    table.add_recent_state(np.full(3, 10, np.uint8), False)
    np.testing.assert_array_equal(table.get_recent()[:, 0], np.array([0, 0, 0, 10], np.float32) / 255)
    for v in (11, 12, 13):
        table.add_recent_state(np.full(3, v, np.uint8), False)
    assert ids(table.concat_frames(0, use_recent=True)) == [10, 11, 12, 13]
    table.add_recent_state(np.full(3, 14, np.uint8), True)
    assert ids(table.concat_frames(0, use_recent=True)) == [11, 12, 13, 14]
    table.add_recent_state(np.full(3, 15, np.uint8), False)
    assert ids(table.concat_frames(0, use_recent=True)) == [0, 0, 0, 15]
    table.add_recent_action(3)
    assert list(table.recent_a) == [0, 0, 0, 3]
