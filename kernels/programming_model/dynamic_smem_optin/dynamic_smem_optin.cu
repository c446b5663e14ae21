// dynamic_smem_optin.cu: one `extern __shared__` buffer whose size is chosen at launch time,
// above the 48 KB that a block gets without asking, up to the device's opt-in limit.
//
// Static __shared__ arrays are sized by the compiler; dynamic shared memory is sized by the
// launch (the third <<<>>> argument, cuLaunchKernel's sharedMemBytes). Up to 48 KB that just
// works; beyond it the host must first raise the kernel's
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (cudaFuncSetAttribute with
// cudaFuncAttributeMaxDynamicSharedMemorySize), at most sharedMemPerBlockOptin (163 KB on
// sm_80, 227 KB on sm_90 / sm_100). This kernel declares no static shared memory, so the
// whole opt-in limit is available to the dynamic buffer.
//
// To prove the block really owns all `smem_bytes`, each block stages a chunk of exactly
// smem_bytes / 4 floats of x in shared memory, synchronises, and writes the chunk back out
// REVERSED: y[c*chunk + i] = x[c*chunk + count - 1 - i], where count is the chunk's length
// (the last chunk may be shorter). Every shared word is written once and read once, and the
// output of element i depends on the word at the far end of the buffer.
//
// Launch: grid = (ceil(n / chunk), 1, 1), block = (kThreads, 1, 1),
// dynamic shared memory = smem_bytes (a multiple of 16), the same value passed as an argument.

#include <cstddef>

namespace {

constexpr int kThreads = 1024;  // one block per SM at these sizes: use all its warps

// Reverses the four lanes of a float4: the reversal of an aligned group of four inside the
// reversal of the whole chunk.
__device__ __forceinline__ float4 reversed(const float4 v) {
  return make_float4(v.w, v.z, v.y, v.x);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    dynamic_smem_reverse(const float* __restrict__ x, float* __restrict__ y, int n,
                         int smem_bytes) {
  // Sized by the launch, not here. float4 gives the buffer 16-byte alignment for vector access.
  extern __shared__ float4 stage4[];
  float* stage = reinterpret_cast<float*>(stage4);

  const size_t chunk = static_cast<size_t>(smem_bytes) / sizeof(float);
  const size_t begin = static_cast<size_t>(blockIdx.x) * chunk;
  const size_t end_full = begin + chunk;
  const size_t end = end_full < static_cast<size_t>(n) ? end_full : static_cast<size_t>(n);
  const size_t count = end - begin;  // grid = ceil(n / chunk): never empty

  if (count % 4 == 0) {
    // Fast path, every full chunk (chunk is a multiple of 4): 16-byte loads and stores. Output
    // float4 j is input float4 (count4 - 1 - j) with its lanes reversed.
    const size_t count4 = count / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x + begin);
    float4* y4 = reinterpret_cast<float4*>(y + begin);
#pragma unroll 4
    for (size_t i = threadIdx.x; i < count4; i += kThreads) stage4[i] = x4[i];
    __syncthreads();  // element i's output lives in another warp's part of the buffer
#pragma unroll 4
    for (size_t j = threadIdx.x; j < count4; j += kThreads) {
      y4[j] = reversed(stage4[count4 - 1 - j]);
    }
  } else {
    // A ragged last chunk: its global start is 16-byte aligned but the reversal pairs element
    // i with count - 1 - i, which is not, so go element by element. One block at most.
    for (size_t i = threadIdx.x; i < count; i += kThreads) stage[i] = x[begin + i];
    __syncthreads();
    for (size_t i = threadIdx.x; i < count; i += kThreads) y[begin + i] = stage[count - 1 - i];
  }
}
