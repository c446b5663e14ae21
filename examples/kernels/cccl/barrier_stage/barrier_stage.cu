// barrier_stage.cu: each block stages its tile of x in shared memory, meets at a
// cuda::barrier, then writes the tile back reversed: y[start + i] = tile[count - 1 - i], where
// count is blockDim.x for a full tile and what is left of n for the last. Every element a thread
// writes was loaded by another thread, so without the barrier the result would be a race.
//
// cuda::barrier<thread_scope_block> (libcu++, sm_70+; hardware mbarrier from sm_80) is a
// split-phase barrier: here used as arrive_and_wait(), the same as __syncthreads(), but an
// object with its own expected count that async copies can also complete on.
//
// Launch: grid = (ceil(n / threads), 1, 1), block = (threads, 1, 1), threads <= 1024,
// dynamic shared memory = threads * sizeof(float).

#include <cuda/barrier>

extern "C" __global__ void barrier_stage(const float* __restrict__ x, float* __restrict__ y,
                                         int n) {
  extern __shared__ float tile[];
  // A __shared__ object cannot be constructed by its declaration (no per-block constructor
  // runs); init() below constructs it in place.
#pragma nv_diag_suppress static_var_with_dynamic_init
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;

  if (threadIdx.x == 0) init(&bar, blockDim.x);  // expected arrivals: every thread of the block
  __syncthreads();  // init is a plain store: publish it before anyone arrives

  const long long start = static_cast<long long>(blockIdx.x) * blockDim.x;
  const int count = static_cast<int>(n - start < blockDim.x ? n - start : blockDim.x);
  const int i = threadIdx.x;
  if (i < count) tile[i] = x[start + i];

  // Threads past n still arrive: the phase completes only after blockDim.x arrivals.
  bar.arrive_and_wait();

  if (i < count) y[start + i] = tile[count - 1 - i];
}
