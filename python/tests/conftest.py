"""Shared by the tandem pytest suite: the backends to run on, and NumPy references."""
import math
import os
import tempfile

import numpy as np
import pytest

# The CPU tunings the suite measures (while it loads the machine) go to a directory of their own,
# not to the user's cache, where later programs would read them; a caller's TANDEM_CACHE_DIR wins.
os.environ.setdefault(
    "TANDEM_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"tandem-pytest-tuning-cache-{os.getuid()}")
)

import tandem  # noqa: E402  (after the environment it reads)

# Every backend tandem knows; one that cannot run here is reported SKIPPED with its reason.
ALL_BACKENDS = [b["name"] for b in tandem.backends()]
_REASONS = {b["name"]: b["reason"] for b in tandem.backends() if not b["available"]}


@pytest.fixture(params=ALL_BACKENDS)
def backend(request):
    name = request.param
    if name in _REASONS:
        pytest.skip(f"{name}: {_REASONS[name]}")
    return tandem.get_backend(name)


def tolerance(dtype, n=1):
    """Relative tolerance for a result of n roundings in dtype (Higham's gamma, with margin)."""
    u = {"float32": 2.0**-24, "float64": 2.0**-53}[dtype]
    return max(8 * n * u, 32 * u)


_erfc = np.vectorize(math.erfc)


def numpy_unary(name, x):
    return {
        "relu": lambda: np.maximum(x, 0),
        "sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "tanh": lambda: np.tanh(x),
        "exp": lambda: np.exp(x),
        "log": lambda: np.log(x),
        "sqrt": lambda: np.sqrt(x),
        "square": lambda: x * x,
        "abs": lambda: np.abs(x),
        "neg": lambda: -x,
        "gelu": lambda: 0.5 * x * _erfc(-x / math.sqrt(2)),
        "silu": lambda: x / (1 + np.exp(-x)),
    }[name]()


def numpy_binary(name, v, dy):
    s = 1 / (1 + np.exp(-v))
    return {
        "add": lambda: v + dy,
        "sub": lambda: v - dy,
        "mul": lambda: v * dy,
        "div": lambda: v / dy,
        "relu_grad": lambda: np.where(v > 0, dy, 0),
        "sigmoid_grad": lambda: dy * v * (1 - v),  # from the output
        "tanh_grad": lambda: dy * (1 - v * v),     # from the output
        "gelu_grad": lambda: dy * (0.5 * _erfc(-v / math.sqrt(2)) + v * np.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)),
        "silu_grad": lambda: dy * (s * (1 + v * (1 - s))),
    }[name]()
