"""Multi-class linear probes in closed form: ridge regression onto one-hot labels (a ridge
classifier), solved for every position of a hook at once.

One ``[d, d]`` solve per position serves every label set (all instances of a variable, its
control task), which is what makes "every layer x position" cheap: for a 2-layer model on
10,000 examples it is a handful of batched matmuls.
"""

from __future__ import annotations

from dataclasses import dataclass

import einops
import torch
from torch import Tensor


@dataclass(frozen=True)
class LinearProbe:
    """One fitted probe: ``logits = (x - mean) @ W + b`` over ``n_classes``.

    Attributes:
        hook, position, instance: where it reads and which instance of the variable it decodes.
        W: ``[d, n_classes]``; b: ``[n_classes]``; mean: ``[d]`` (training mean of ``x``).
    """

    hook: str
    position: int
    instance: int
    W: Tensor
    b: Tensor
    mean: Tensor

    def predict(self, x: Tensor) -> Tensor:
        """``x: [n, d]`` -> ``[n]`` long class ids."""
        return ((x - self.mean) @ self.W + self.b).argmax(-1)

    def basis(self, covariance: Tensor | None = None, tol: float = 1e-6) -> Tensor:
        """``[d, r]`` orthonormal basis (``r <= n_classes - 1``) of the probe's directions: the
        span of its class weight vectors relative to their mean, or, given the activations'
        ``covariance`` ``[d, d]``, of its *patterns* ``covariance @ W`` (Haufe et al. 2014): the
        directions along which the decoded classes actually differ in activation space (for
        a two-class least-squares probe, the class-mean difference)."""
        centred = self.W - self.W.mean(1, keepdim=True)
        if covariance is not None:
            centred = covariance @ centred
        u, s, _ = torch.linalg.svd(centred, full_matrices=False)
        return u[:, s > tol * max(float(s.max()), 1e-30)]


def one_hot_columns(label_sets: list[tuple[Tensor, int]]) -> tuple[Tensor, list[list[slice]]]:
    """Stack one-hot encodings of several ``([n, k] labels, n_classes)`` sets side by side.

    Returns ``[n, C_total]`` float and, per set and instance, the slice of its columns.
    """
    columns, slices, start = [], [], 0
    for labels, n_classes in label_sets:
        set_slices = []
        for j in range(labels.shape[1]):
            columns.append(torch.nn.functional.one_hot(labels[:, j], n_classes).float())
            set_slices.append(slice(start, start + n_classes))
            start += n_classes
        slices.append(set_slices)
    return torch.cat(columns, 1), slices


def fit_ridge(
    x: Tensor, targets: Tensor, train: Tensor, alpha: float = 1e-3
) -> tuple[Tensor, Tensor, Tensor]:
    """Ridge regression of ``targets`` on ``x`` for every position at once.

    Args:
        x: ``[n, P, d]`` activations.
        targets: ``[n, C]`` (one-hot columns).
        train: ``[n]`` bool, the rows to fit on.
        alpha: ridge strength relative to the mean variance of the features.

    Returns:
        ``W: [P, d, C]``, ``b: [P, C]``, ``mean: [P, d]``.
    """
    xt = einops.rearrange(x[train], "n p d -> p n d")  # positions as the bmm batch
    yt = targets[train]
    mean = xt.mean(1)  # [P, d]
    xc = xt - mean[:, None]
    y_mean = yt.mean(0)  # [C]
    # float32 bmm: centred features and a relative ridge keep the solve well conditioned
    gram = (xc.transpose(1, 2) @ xc).double()  # [P, d, d]
    cross = (xc.transpose(1, 2) @ (yt - y_mean)).double()  # [P, d, C]
    d = x.shape[-1]
    scale = gram.diagonal(dim1=1, dim2=2).mean(-1).clamp_min(1e-12)  # [P]
    ridge = alpha * scale[:, None, None] * torch.eye(d, dtype=gram.dtype)
    W = torch.linalg.solve(gram + ridge, cross)  # [P, d, C]
    b = y_mean.expand(x.shape[1], -1)
    return W.float(), b.float(), mean.float()


def probe_accuracy(
    x: Tensor, label_sets: list[tuple[Tensor, int]], train: Tensor, alpha: float = 1e-3
) -> tuple[list[Tensor], Tensor, Tensor, Tensor, list[list[slice]]]:
    """Fit ridge probes for every label set, instance and position; score on the held-out rows.

    Args:
        x: ``[n, P, d]``; label_sets: ``[([n, k_i] long, n_classes_i), ...]``; train: ``[n]`` bool.

    Returns:
        per label set the held-out accuracy ``[P, k_i]``; ``W [P, d, C]``, ``b [P, C]``,
        ``mean [P, d]``; the column slices of each set's instances.
    """
    if x.dim() != 3:
        raise ValueError(f"activations must be [n, positions, d]; got {tuple(x.shape)}")
    for labels, _ in label_sets:
        if labels.dim() != 2 or labels.shape[0] != x.shape[0]:
            raise ValueError(
                f"labels {tuple(labels.shape)} do not match the activations: expected "
                f"[n={x.shape[0]}, k] (one row per activation row)"
            )
    targets, slices = one_hot_columns(label_sets)
    W, b, mean = fit_ridge(x, targets, train, alpha)
    test = ~train
    # [P, n_test, d] @ [P, d, C] -> [n_test, P, C]
    xs = einops.rearrange(x[test], "n p d -> p n d") - mean[:, None]
    scores = einops.rearrange(xs @ W, "p n c -> n p c") + b
    accuracies = []
    for (labels, _), set_slices in zip(label_sets, slices):
        acc = torch.stack(
            [(scores[..., s].argmax(-1) == labels[test, j, None]).float().mean(0) for j, s in enumerate(set_slices)],
            dim=-1,
        )  # [P, k]
        accuracies.append(acc)
    return accuracies, W, b, mean, slices


__all__ = ["LinearProbe", "fit_ridge", "one_hot_columns", "probe_accuracy"]
