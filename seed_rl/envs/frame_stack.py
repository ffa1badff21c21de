"""The last ``k`` frames of one env stacked on the channel axis: what Atari's ``frame_stack`` option observes.

`FrameRing` keeps the frames in a ring and interleaves them with OpenCV's ``merge`` in one pass: shifting a
channel-last ``[84, 84, 4]`` array in numpy and copying it out (what the stack did before) walks the array with a
stride of 4 bytes, several times, and cost a noticeable part of an Atari agent step. The gymnasium path
(`seed_rl.envs.atari.FrameStack`) and the vector engine (`seed_rl.envs.atari_vector`) both stack with it. OpenCV
is imported when a ring is made, as Atari needs it anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FrameRing"]


class FrameRing:
    """The last ``k`` frames ``[H, W, C]`` of one env as one ``[H, W, k * C]`` array, oldest first.

    ``start(frame)`` fills the stack with ``frame`` (a reset: no frame of a previous episode leaks into the next
    one); ``push(frame)`` drops the oldest. Both return a new array.
    """

    def __init__(self, k: int):
        if k < 1:
            raise ValueError(f"frame stack size must be >= 1, got {k}")
        import cv2  # Lazy: only Atari stacks frames.

        self._merge = cv2.merge
        self.k = k
        self._frames: list[Any] = []
        self._oldest = 0  # index of the oldest frame in _frames

    def start(self, frame: np.ndarray) -> np.ndarray:
        frame = np.array(frame)  # a copy: the caller may reuse its buffer
        self._frames = [frame] * self.k
        self._oldest = 0
        return self._stacked()

    def push(self, frame: np.ndarray) -> np.ndarray:
        if not self._frames:
            raise RuntimeError("push() before start()")
        self._frames[self._oldest] = np.array(frame)
        self._oldest = (self._oldest + 1) % self.k
        return self._stacked()

    def _stacked(self) -> np.ndarray:
        frames = self._frames[self._oldest:] + self._frames[:self._oldest]
        first = frames[0]
        channels = first.shape[2] if first.ndim == 3 else 1
        # merge drops a single channel's axis: the reshape puts it back (a view).
        return self._merge(frames).reshape(first.shape[0], first.shape[1], self.k * channels)
