"""A concurrent load of our own for the shared-GPU tests: another process that keeps GPU 0 busy
with a spinning kernel for the seconds given, and says `ready` once its first batch ran.

    python tests/gpu_load.py 60
"""

from __future__ import annotations

import ctypes
import sys
import time

from cuda.core import Device, LaunchConfig, ObjectCode, launch

# One dependent FMA after another, `n` times: about 4 cycles each, whatever the memory does.
SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<2>;
    ld.param.u32 %r1, [n];
    mov.f32 %f1, 0f3F800000;
    mov.f32 %f2, 0f3F7FFFFF;
    mov.u32 %r2, 0;
LOOP:
    fma.rn.f32 %f1, %f1, %f2, 0f3C000000;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, %r1;
    @%p1 bra LOOP;
    setp.eq.f32 %p1, %f1, 0f00000000;
    @!%p1 bra DONE;
    ld.param.u64 %rd1, [out];
    st.global.f32 [%rd1], %f1;
DONE:
    ret;
}
"""


def main(seconds: float) -> None:
    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    kernel = ObjectCode.from_ptx(SPIN_PTX).get_kernel("spin")
    config = LaunchConfig(grid=4 * device.properties.multiprocessor_count, block=256)
    out = device.allocate(64, stream=stream)
    launch(stream, config, kernel, out, ctypes.c_uint32(1000))
    stream.sync()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):  # about half a millisecond each
            launch(stream, config, kernel, out, ctypes.c_uint32(200_000))
        stream.sync()


if __name__ == "__main__":
    main(float(sys.argv[1]))
