"""scale_y (net_downsample_2x_full_y) and byte storage."""
import cv2
import numpy as np
import pytest

from dqn_nature.preprocess import area_weights, scale_y, to_bytes

pytestmark = pytest.mark.usefixtures("single_threaded")


def test_area_weights_5_to_2_by_hand():
    # Each output cell covers 2.5 source cells; the middle one is split half and half.
    expected = np.array([[0.4, 0.4, 0.2, 0.0, 0.0],
                         [0.0, 0.0, 0.2, 0.4, 0.4]])
    np.testing.assert_allclose(area_weights(5, 2), expected, atol=1e-7)
    assert area_weights(5, 2).dtype == np.float32
    with pytest.raises(ValueError):
        area_weights(2, 5)


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


def test_scale_y_matches_opencv_area_on_a_real_pong_screen(pong_screens):
    screen = pong_screens[50]
    y = (0.299 * screen[..., 0] + 0.587 * screen[..., 1] + 0.114 * screen[..., 2]).astype(np.float32)
    reference = cv2.resize(y, (84, 84), interpolation=cv2.INTER_AREA)
    out = scale_y(screen)
    assert out.dtype == np.float32 and out.shape == (7056,)
    assert 0 <= out.min() and out.max() <= 1
    assert np.abs(out.reshape(84, 84) - reference).max() < 1e-6
    assert reference.std() > 0.01  # a real, non-uniform screen


def test_scale_y_white_screen_stays_in_range():
    out = scale_y(np.ones((210, 160, 3), np.float32))
    assert out.max() <= 1.0 and out.min() > 0.999


def test_to_bytes_truncates():
    y = np.array([0.0, 0.5, 0.999, 1.0, 0.0039], np.float32)
    out = to_bytes(y)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, [0, 127, 254, 255, 0])
