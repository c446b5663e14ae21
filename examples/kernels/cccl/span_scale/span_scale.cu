// span_scale.cu: y = a * x, with the buffers seen as cuda::std::span, libcu++'s std::span that
// also works in device code. A span carries its length beside its pointer, so bounds travel
// with the data and a block can carve out its own piece with subspan()/first().
//
// n is a size_t: a span's size_type, and a count that may pass 2^31 without overflow.
//
// Launch: grid = (ceil(n / blockDim.x), 1, 1), any block size, no dynamic shared memory.

#include <cuda/std/span>

extern "C" __global__ void span_scale(const float* __restrict__ x, float* __restrict__ y, float a,
                                      size_t n) {
  const cuda::std::span<const float> in(x, n);
  const cuda::std::span<float> out(y, n);

  // This block's tile of both spans: [begin, begin + blockDim.x) clipped to n. Only the last
  // block is short. subspan(offset) drops the front, first(count) keeps the front.
  const size_t begin = static_cast<size_t>(blockIdx.x) * blockDim.x;
  if (begin >= in.size()) return;
  const size_t rest = in.size() - begin;
  const size_t count = rest < blockDim.x ? rest : blockDim.x;
  const auto tile_in = in.subspan(begin).first(count);
  const auto tile_out = out.subspan(begin, count);

  if (threadIdx.x < tile_in.size()) tile_out[threadIdx.x] = a * tile_in[threadIdx.x];
}
