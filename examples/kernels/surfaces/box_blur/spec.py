"""A 3x3 (or 3x3x3) box blur of an 8-bit image (or volume), read through a surface with its
edges clamped and written as float32 through another surface. The reference pads by repeating
the edge and averages in float64."""

import numpy as np

from harness.spec import Case, KernelSpec, Launch, Problem, Scalar, Surface, Tolerance, Work

BLOCK_2D, BLOCK_3D = (32, 8, 1), (8, 8, 4)


def _grid(shape, block):
    extent = tuple(reversed(shape)) + (1,) * (3 - len(shape))  # x first
    return tuple(-(-n // b) for n, b in zip(extent, block, strict=True))


def setup(case, rng, device):
    shape = tuple(case.params["shape"])
    image = rng.integers(0, 256, shape, dtype=np.uint8)
    sizes = tuple(Scalar(np.int32(n)) for n in reversed(shape))
    if len(shape) == 2:
        launch = Launch(
            "box_blur_2d",
            _grid(shape, BLOCK_2D),
            BLOCK_2D,
            (Surface("image"), Surface("out"), *sizes),
        )
    else:
        launch = Launch(
            "box_blur_3d",
            _grid(shape, BLOCK_3D),
            BLOCK_3D,
            (Surface("image"), Surface("out"), *sizes),
        )
    return Problem(
        inputs={"image": image},
        outputs={"out": np.empty(shape, np.float32)},
        launches=(launch,),
    )


def reference(case, inputs):
    image = inputs["image"].astype(np.float64)
    padded = np.pad(image, 1, mode="edge")
    total = np.zeros(image.shape)
    for offsets in np.ndindex(*(3,) * image.ndim):
        window = tuple(slice(o, o + n) for o, n in zip(offsets, image.shape, strict=True))
        total += padded[window]
    return {"out": (total / 3**image.ndim).astype(np.float32)}


SPEC = KernelSpec(
    cases=(
        Case("image_1920x1080", {"shape": [1080, 1920]}, Tolerance(rtol=1e-6, atol=0.0)),
        Case("image_37x13", {"shape": [13, 37]}, Tolerance(rtol=1e-6, atol=0.0)),
        Case("one_pixel", {"shape": [1, 1]}, Tolerance(rtol=1e-6, atol=0.0)),
        Case("volume_128", {"shape": [128, 128, 128]}, Tolerance(rtol=1e-6, atol=0.0)),
        Case("volume_5x7x3", {"shape": [3, 7, 5]}, Tolerance(rtol=1e-6, atol=0.0)),
    ),
    setup=setup,
    reference=reference,
    work=lambda case: Work(bytes=5 * int(np.prod(case.params["shape"]))),
)
