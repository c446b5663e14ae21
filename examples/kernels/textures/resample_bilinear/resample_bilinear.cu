// An image resampled to another size by the texture unit: a CUDA array read with tex2D, linear
// filtering (bilinear, in hardware) and normalized coordinates, so the same kernel serves any
// input size; the texture's addressing (clamp or wrap) decides what lies past the edges.
#include <cuda_runtime.h>

extern "C" __global__ void resample_bilinear(cudaTextureObject_t image, float* out, int rows,
                                             int cols, float shift_u, float shift_v) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    // The centre of output pixel (r, c) in [0, 1) of the image, moved by the shift: past 1 it
    // reads what the addressing mode puts there.
    const float u = (c + 0.5f) / cols + shift_u;
    const float v = (r + 0.5f) / rows + shift_v;
    out[static_cast<size_t>(r) * cols + c] = tex2D<float>(image, u, v);
}
