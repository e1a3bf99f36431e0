"""Seeded values for the model-zoo fixtures, the same bit for bit as tests/util/seeded.c.

Weights are not stored with the fixtures: the generator (scripts/gen_model_zoo.py) and the C
test (tests/check_zoo.c) both compute every parameter, auxiliary state and input from its
name and shape with this formula, so the stored MXNet outputs prove mxc gives the same
numbers for the same weights.

    h     = FNV-1a 64 of the name's bytes
    z_i   = mix64(h + (i + 1) * 0x9E3779B97F4A7C15)    (splitmix64's i-th draw from state h)
    u_i   = (z_i >> 40) * 2^-24                         (top 24 bits: a float32 in [0, 1) exactly)
    t_i   = 2 * u_i - 1                                 (exact: [-1, 1) on a 2^-23 grid)
    value = offset + t_i * scale                        (float32, each step rounded once)

with (offset, scale) by the name's ending (Gluon's and MXNet's parameter suffixes):

    *_weight                     0, sqrt(6 / fan_in)   fan_in = product of shape[1:]
                                                          (He uniform: activations stay O(1)
                                                          through deep ReLU nets)
    *_gamma                      1, 0.25
    *_running_var, *_moving_var  1, 0.25                (positive: in [0.75, 1.25))
    *_bias, *_beta,
    *_running_mean, *_moving_mean 0, 0.125
    anything else (inputs)       0, 1

Token inputs (a language model's word ids in [0, vocab)) take the same 24 bits k_i = z_i >> 40
as integers: token_i = (k_i * vocab) >> 24, stored as float32 (MXNet's Embedding input).

sqrt(6 / fan_in) is computed in float32 (a correctly rounded division and square root),
and the power-of-two scales make t * scale exact, so an FMA cannot change the result.
"""
import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & MASK
    return h


def _mix64(z):
    """splitmix64's finaliser on a uint64 numpy array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def unit(name, count):
    """u_0 .. u_{count-1} for `name`: float32 in [0, 1)."""
    h = np.uint64(fnv1a64(name))
    i = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = _mix64(h + i * np.uint64(GOLDEN))
    return ((z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)).astype(np.float32)


def kind(name, shape):
    """(offset, scale) as float32 for a parameter called `name` with `shape`."""
    if name.endswith("_weight"):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        return np.float32(0), np.sqrt(np.float32(6) / np.float32(fan_in))
    if name.endswith(("_gamma", "_running_var", "_moving_var")):
        return np.float32(1), np.float32(0.25)
    if name.endswith(("_bias", "_beta", "_running_mean", "_moving_mean")):
        return np.float32(0), np.float32(0.125)
    return np.float32(0), np.float32(1)


def values(name, shape):
    """The seeded float32 array for `name` with `shape`."""
    count = int(np.prod(shape))
    t = unit(name, count) * np.float32(2) - np.float32(1)
    offset, scale = kind(name, shape)
    return (offset + t * scale).astype(np.float32).reshape(shape)


def tokens(name, shape, vocab):
    """Seeded word ids in [0, vocab) as float32, for `name` with `shape`."""
    count = int(np.prod(shape))
    h = np.uint64(fnv1a64(name))
    i = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        k = _mix64(h + i * np.uint64(GOLDEN)) >> np.uint64(40)
    return ((k * np.uint64(vocab)) >> np.uint64(24)).astype(np.float32).reshape(shape)
