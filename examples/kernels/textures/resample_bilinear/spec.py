"""A 2-D image resampled with the texture unit's bilinear filtering over a CUDA array, its
coordinates normalized, edges clamped or wrapped. The reference filters in float64; the texture
unit's weights have 8 fractional bits, so outputs of inputs in [0, 1) may differ by 2/256."""

import numpy as np

from harness.spec import (
    Buf,
    Case,
    KernelSpec,
    Launch,
    Problem,
    Scalar,
    Texture,
    Tolerance,
    Work,
    grid_2d,
)

BLOCK = (16, 16, 1)


def setup(case, rng, device):
    p = case.params
    image = rng.random((p["in_rows"], p["in_cols"]), dtype=np.float32)
    texture = Texture(
        "image", dims=2, array=True, filter="linear", address=p["address"], normalized=True
    )
    args = (
        texture,
        Buf("out"),
        Scalar(np.int32(p["rows"])),
        Scalar(np.int32(p["cols"])),
        Scalar(np.float32(p["shift"])),
        Scalar(np.float32(p["shift"])),
    )
    grid = grid_2d(p["cols"], p["rows"], BLOCK[0], BLOCK[1])
    return Problem(
        inputs={"image": image},
        outputs={"out": np.empty((p["rows"], p["cols"]), np.float32)},
        launches=(Launch("resample_bilinear", grid, BLOCK, args),),
    )


def reference(case, inputs):
    p = case.params
    image = inputs["image"].astype(np.float64)
    height, width = image.shape
    wrap = p["address"] == "wrap"
    u = (np.arange(p["cols"]) + 0.5) / p["cols"] + p["shift"]
    v = (np.arange(p["rows"]) + 0.5) / p["rows"] + p["shift"]
    if wrap:  # wrap takes the fraction of a normalized coordinate
        u, v = u - np.floor(u), v - np.floor(v)
    x, y = u * width - 0.5, v * height - 0.5  # texel centres lie at half-integers
    i0, j0 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
    a, b = (x - i0)[None, :], (y - j0)[:, None]

    def texel(j, i):
        if wrap:
            return image[np.ix_(j % height, i % width)]
        return image[np.ix_(np.clip(j, 0, height - 1), np.clip(i, 0, width - 1))]

    out = (
        (1 - a) * (1 - b) * texel(j0, i0)
        + a * (1 - b) * texel(j0, i0 + 1)
        + (1 - a) * b * texel(j0 + 1, i0)
        + a * b * texel(j0 + 1, i0 + 1)
    )
    return {"out": out.astype(np.float32)}


def _case(name, in_rows, in_cols, rows, cols, address, shift=0.0):
    params = {
        "in_rows": in_rows,
        "in_cols": in_cols,
        "rows": rows,
        "cols": cols,
        "address": address,
        "shift": shift,
    }
    return Case(name, params, Tolerance(rtol=0.0, atol=2 / 256))


SPEC = KernelSpec(
    cases=(
        _case("up2x_clamp_2048", 2048, 2048, 4096, 4096, "clamp"),
        _case("up2x_wrap_shifted", 1000, 1000, 2000, 2000, "wrap", shift=0.25),
        _case("down3x_clamp", 999, 1536, 333, 512, "clamp"),
        _case("one_texel", 1, 1, 3, 5, "clamp"),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(
        bytes=4 * (case.params["in_rows"] * case.params["in_cols"])
        + 4 * case.params["rows"] * case.params["cols"],
        flops=8 * case.params["rows"] * case.params["cols"],
    ),
)
