"""JAX's default PRNG (threefry2x32) in numpy: just enough to recompute the port's fixed seed
``r0`` (``jax.random.bernoulli(jax.random.split(jax.random.PRNGKey(seed), 1)[0], shape=(bits,))``)
without installing JAX.

JAX derives keys and bits from the cipher in two ways: the "partitionable" one (the default
since jax 0.5: counters ``(0, i)``, a word is the XOR of the two outputs) and the original one
of jax 0.4 (counters ``0 .. 2n-1`` split in halves). The port's ``requirements.txt`` pins jax
0.4.21, but its deterministic checkpoints were trained on the partitionable derivation's seed:
at ``N = 12`` (``deterministic_q1``) the model gets 0.96 of 256 inputs right at that seed, and
at most 0.27 at any other of the 1,024 (``bench/port_import.py`` prints both). The cipher and
the original derivation are checked against published outputs in the tests (the Threefry
known-answer vector; ``split(PRNGKey(0))`` of jax 0.4)."""

from __future__ import annotations

import numpy as np

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(key: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The threefry-2x32 block cipher (20 rounds) of ``(x0, x1)`` (uint32 arrays) under ``key``."""
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x = [x0.astype(np.uint32) + ks[0], x1.astype(np.uint32) + ks[1]]
    with np.errstate(over="ignore"):
        for i in range(5):
            for r in _ROTATIONS[i % 2]:
                x[0] = x[0] + x[1]
                x[1] = _rotl(x[1], r) ^ x[0]
            x[0] = x[0] + ks[(i + 1) % 3]
            x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x[0], x[1]


def _threefry_counts(key: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``jax.prng.threefry_2x32(key, count)``: the counts split in halves, enciphered, joined."""
    flat = count.astype(np.uint32).ravel()
    odd = flat.size % 2
    if odd:
        flat = np.concatenate([flat, np.zeros(1, np.uint32)])
    half = flat.size // 2
    with np.errstate(over="ignore"):
        a, b = threefry2x32(key, flat[:half], flat[half:])
    out = np.concatenate([a, b])
    return (out[:-1] if odd else out).reshape(count.shape)


def prng_key(seed: int) -> np.ndarray:
    """``jax.random.PRNGKey(seed)`` (32-bit seeds): ``[0, seed]`` as uint32."""
    return np.array([0, seed & 0xFFFFFFFF], dtype=np.uint32)


def _counter_pairs(key: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The partitionable derivation's cipher outputs of counters ``(0, i)``, ``i < n``."""
    return threefry2x32(key, np.zeros(n, np.uint32), np.arange(n, dtype=np.uint32))


def split(key: np.ndarray, num: int = 2, partitionable: bool = True) -> np.ndarray:
    """``jax.random.split(key, num)``: ``[num, 2]`` uint32 keys."""
    if partitionable:
        return np.stack(_counter_pairs(key, num), axis=1)
    return _threefry_counts(key, np.arange(num * 2, dtype=np.uint32)).reshape(num, 2)


def random_bits(key: np.ndarray, n: int, partitionable: bool = True) -> np.ndarray:
    """``n`` 32-bit words, as ``jax.random.bits(key, (n,))``."""
    if partitionable:
        high, low = _counter_pairs(key, n)
        return high ^ low
    return _threefry_counts(key, np.arange(n, dtype=np.uint32))


def bernoulli_half(key: np.ndarray, n: int, partitionable: bool = True) -> np.ndarray:
    """``jax.random.bernoulli(key, 0.5, (n,))`` as 0/1: its float32 uniform is below 1/2 exactly
    when the word's top bit is 0."""
    return (random_bits(key, n, partitionable) < np.uint32(1 << 31)).astype(np.int64)


def port_fixed_seed(seed: int, bits: int, partitionable: bool = True) -> np.ndarray:
    """The port's deterministic seed: ``bernoulli(split(PRNGKey(seed), 1)[0], (bits,))``."""
    return bernoulli_half(split(prng_key(seed), 1, partitionable)[0], bits, partitionable)


__all__ = ["bernoulli_half", "port_fixed_seed", "prng_key", "random_bits", "split", "threefry2x32"]
