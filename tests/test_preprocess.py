"""scale_y (net_downsample_2x_full_y) and byte storage."""
import cv2
import numpy as np
import pytest

from dqn_nature.preprocess import shrink_plan, scale_y, to_bytes

pytestmark = pytest.mark.usefixtures("single_threaded")
F32 = np.float32


def torch_shrink(line: np.ndarray, n_out: int) -> np.ndarray:
    """A scalar transcription of the shrink branch of Torch7's ``Main_scaleLinear_rowcol``,
    every operation in float32 as the C code does it."""
    n_in, out = len(line), np.empty(n_out, F32)
    scale = F32(n_in) / F32(n_out)
    first, first_frac = 0, F32(0)
    for i in range(n_out):
        end = F32(i + 1) * scale
        last = int(end)
        last_frac = end - F32(last)
        acc = (F32(1) - first_frac) * line[first]
        n = F32(1) - first_frac
        for j in range(first + 1, last):
            acc += line[j]
            n += F32(1)
        if last < n_in:
            acc += last_frac * line[last]
            n += last_frac
        out[i] = acc / n
        first, first_frac = last, last_frac
    return out


def test_shrink_plan_5_to_2_by_hand():
    # Each output cell covers 2.5 source cells; the middle one is split half and half.
    index, weight, count = shrink_plan(5, 2)
    np.testing.assert_array_equal(index, [[0, 2], [1, 3], [2, 4]])
    np.testing.assert_array_equal(weight, [[1.0, 0.5], [1.0, 1.0], [0.5, 1.0]])
    np.testing.assert_array_equal(count, [2.5, 2.5])
    assert weight.dtype == count.dtype == np.float32
    with pytest.raises(ValueError):
        shrink_plan(2, 5)


def test_shrink_plan_keeps_torchs_float32_cell_bounds():
    # Output column 82 of 84 ends at 83 x 160/84 = 158.0952381 (2/21 into source column 158),
    # but float32 160/84 times 83 is 158.0952454: source 158 weighs 0.0500036 of the cell, not 0.05.
    index, weight, count = shrink_plan(160, 84)
    assert index[:, 82].tolist() == [156, 157, 158]
    assert weight[2, 82] == F32(83) * (F32(160) / F32(84)) - F32(158) == F32(0.09524536)
    assert abs(weight[2, 82] / count[82] - 0.0500036) < 1e-7


def test_scale_y_single_red_row_by_hand():
    screen = np.zeros((210, 160, 3), np.float32)
    screen[2, :, 0] = 1.0  # pure red: luminance 0.299
    out = scale_y(screen).reshape(84, 84)
    # Row 2 is half of output row 0's span [0, 2.5) and half of row 1's [2.5, 5): weight 0.5 / 2.5.
    np.testing.assert_allclose(out[:2], 0.299 * 0.2, atol=1e-7)
    assert not out[2:].any()


def test_scale_y_single_green_column_by_hand():
    screen = np.zeros((210, 160, 3), np.float32)
    screen[:, 0, 1] = 1.0  # pure green: luminance 0.587
    out = scale_y(screen).reshape(84, 84)
    # Output column 0 spans [0, 160/84): source column 0 contributes 1 / (160/84).
    np.testing.assert_allclose(out[:, 0], 0.587 * 84 / 160, atol=1e-7)
    assert not out[:, 1:].any()


def test_scale_y_is_torchs_arithmetic_bit_for_bit(pong_screens):
    screen = pong_screens[50]
    # image.rgb2y of 2015: y:zero():add(0.299, R):add(0.587, G):add(0.114, B), in float32.
    y = F32(0.299) * screen[..., 0] + F32(0.587) * screen[..., 1] + F32(0.114) * screen[..., 2]
    rows = np.stack([torch_shrink(row, 84) for row in y])  # rows first (210, 84), then columns
    expected = np.stack([torch_shrink(column, 84) for column in rows.T]).T
    np.testing.assert_array_equal(scale_y(screen), expected.reshape(-1))
    assert expected.std() > 0.01  # a real, non-uniform screen


def test_scale_y_stores_uniform_greys_as_torch_does():
    def stored(grey):
        return np.unique(to_bytes(scale_y(np.full((210, 160, 3), F32(grey) / F32(255)))), return_counts=True)

    # Pong's walls (grey 236): every cell 236, where exact area weights store 235 in 2,688 cells.
    assert [a.tolist() for a in stored(236)] == [[236], [7056]]
    # Breakout's walls (grey 142): 255 y lands just under 142 in 5,124 cells (672 with exact weights).
    assert [a.tolist() for a in stored(142)] == [[141, 142], [5124, 1932]]


def test_scale_y_is_near_opencv_area(pong_screens):
    # OpenCV averages exact areas; Torch7's float32 cell bounds move a value by up to 2.1e-6.
    screen = pong_screens[50]
    y = (0.299 * screen[..., 0] + 0.587 * screen[..., 1] + 0.114 * screen[..., 2]).astype(np.float32)
    reference = cv2.resize(y, (84, 84), interpolation=cv2.INTER_AREA)
    out = scale_y(screen)
    assert out.dtype == np.float32 and out.shape == (7056,)
    assert 0 <= out.min() and out.max() <= 1
    assert np.abs(out.reshape(84, 84) - reference).max() < 3e-6


def test_scale_y_white_screen_is_one():
    np.testing.assert_array_equal(scale_y(np.ones((210, 160, 3), np.float32)), 1.0)


def test_to_bytes_truncates():
    y = np.array([0.0, 0.5, 0.999, 1.0, 0.0039], np.float32)
    out = to_bytes(y)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [0, 127, 254, 255, 0])

