"""Checks every index backend applies to the vectors it is asked to store."""

from __future__ import annotations

import numpy as np

from candor.ports import Vectors


def as_matrix(vectors: Vectors, *, rows: int, dimensions: int) -> Vectors:
    """A contiguous little-endian float32 matrix of shape (rows, dimensions), all finite."""
    matrix = np.ascontiguousarray(vectors, dtype="<f4")
    if rows == 0 and matrix.size == 0:
        return matrix.reshape(0, dimensions)
    if matrix.shape != (rows, dimensions):
        raise ValueError(f"expected vectors of shape ({rows}, {dimensions}), got {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors contain NaN or infinity")
    return matrix
