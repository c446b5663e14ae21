// A box blur read and written through surfaces: the image sits in a CUDA array, read with
// surf2Dread/surf3Dread whose clamped boundary mode repeats the edge (no bounds checks in the
// loop), and the mean is stored into another array with surf2Dwrite/surf3Dwrite. A surface's x
// coordinate counts bytes, not elements: hence the sizeof at every x.
#include <cuda_runtime.h>

extern "C" __global__ void box_blur_2d(cudaSurfaceObject_t image, cudaSurfaceObject_t out,
                                       int width, int height) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    constexpr int kByte = sizeof(unsigned char);
    float sum = 0.0f;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            sum += surf2Dread<unsigned char>(image, (x + dx) * kByte, y + dy,
                                             cudaBoundaryModeClamp);
        }
    }
    surf2Dwrite(sum / 9.0f, out, x * static_cast<int>(sizeof(float)), y);
}

extern "C" __global__ void box_blur_3d(cudaSurfaceObject_t volume, cudaSurfaceObject_t out,
                                       int width, int height, int depth) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= width || y >= height || z >= depth) return;
    constexpr int kByte = sizeof(unsigned char);
    float sum = 0.0f;
    for (int dz = -1; dz <= 1; ++dz) {
        for (int dy = -1; dy <= 1; ++dy) {
            for (int dx = -1; dx <= 1; ++dx) {
                sum += surf3Dread<unsigned char>(volume, (x + dx) * kByte, y + dy, z + dz,
                                                 cudaBoundaryModeClamp);
            }
        }
    }
    surf3Dwrite(sum / 27.0f, out, x * static_cast<int>(sizeof(float)), y, z);
}
