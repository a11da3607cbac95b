// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/harness.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "flashsteps/host_dtype.h"
#include "flashsteps/random.h"

namespace flashsteps {

namespace {
constexpr unsigned char kGuardPattern = 0xA5;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  base_ = static_cast<unsigned char*>(vendor::malloc_device(bytes + 2 * kGuardBytes));
  vendor::memset_device(base_, kGuardPattern, kGuardBytes);
  vendor::memset_device(base_ + kGuardBytes + bytes, kGuardPattern, kGuardBytes);
}

DeviceBuffer::~DeviceBuffer() { vendor::free_device(base_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    vendor::free_device(base_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const std::vector<unsigned char>& host) {
  if (host.size() != bytes_) throw InvalidArgument("DeviceBuffer::upload: size mismatch");
  vendor::copy_to_device(data(), host.data(), bytes_);
}

std::vector<unsigned char> DeviceBuffer::download() const {
  std::vector<unsigned char> host(bytes_);
  vendor::copy_to_host(host.data(), data(), bytes_);
  return host;
}

bool DeviceBuffer::guards_intact() const {
  if (base_ == nullptr) return true;
  std::vector<unsigned char> guard(kGuardBytes);
  for (unsigned char* at : {base_, base_ + kGuardBytes + bytes_}) {
    vendor::copy_to_host(guard.data(), at, kGuardBytes);
    for (unsigned char c : guard)
      if (c != kGuardPattern) return false;
  }
  return true;
}

DeviceInfo device_info() {
  DeviceInfo info;
  int device = 0, driver = 0, runtime = 0;
#if FLASHSTEPS_VENDOR_HIP
  FLASHSTEPS_CHECK(hipGetDevice(&device));
  hipDeviceProp_t prop;
  FLASHSTEPS_CHECK(hipGetDeviceProperties(&prop, device));
  FLASHSTEPS_CHECK(hipDriverGetVersion(&driver));
  FLASHSTEPS_CHECK(hipRuntimeGetVersion(&runtime));
  info.vendor = "amd";
  info.name = prop.name;
  info.arch = prop.gcnArchName;
  info.arch = info.arch.substr(0, info.arch.find(':'));
  info.sm_count = prop.multiProcessorCount;
  info.max_clock_mhz = prop.clockRate / 1000;
  info.mem_clock_mhz = prop.memoryClockRate / 1000;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.driver = std::to_string(driver);
  info.runtime = "HIP " + std::to_string(runtime / 10000000) + "." + std::to_string(runtime / 100000 % 100);
  const double per_clk = info.arch == "gfx90a" ? 1024.0 : info.arch.rfind("gfx94", 0) == 0 ? 2048.0 : 0.0;
#else
  FLASHSTEPS_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  FLASHSTEPS_CHECK(cudaGetDeviceProperties(&prop, device));
  FLASHSTEPS_CHECK(cudaDriverGetVersion(&driver));
  FLASHSTEPS_CHECK(cudaRuntimeGetVersion(&runtime));
  int clock_khz = 0, mem_khz = 0;
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  info.vendor = "nvidia";
  info.name = prop.name;
  info.arch = "sm_" + std::to_string(prop.major * 10 + prop.minor);
  info.sm_count = prop.multiProcessorCount;
  info.max_clock_mhz = clock_khz / 1000;
  info.mem_clock_mhz = mem_khz / 1000;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.driver = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  info.runtime = "CUDA " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  const int cc = prop.major * 10 + prop.minor;
  const double per_clk = cc == 80 ? 2048.0 : cc == 90 ? 4096.0 : 0.0;
#endif
  info.peak_tc_tflops = per_clk * info.sm_count * info.max_clock_mhz * 1e6 / 1e12;
  return info;
}

DeviceCase::DeviceCase(const HostInputs& in) : problem_(in.problem), layout_(in.layout) {
  for (int b = 0; b < 3; ++b) {
    inputs_[b] = DeviceBuffer(in.buffers[b].size());
    inputs_[b].upload(in.buffers[b]);
  }
  allocate();
}

namespace {

// One tensor of a problem for fill_random_kernel: where its rows go and which stream they
// draw from. Row r is canonical row (b, h, s) = (r / (H N), r / N % H, r % N).
struct RandomFill {
  std::int64_t rows;         // B * H * N
  std::int64_t heads, seqlen, head_dim;
  std::int64_t offset;       // element offset of [0, 0, 0, 0] in the buffer
  std::int64_t stride[3];    // element strides of batch, head, sequence (dim: 1)
  std::uint64_t stream;      // random::input_stream(seed, tensor)
  int tensor;                // 0 = Q, 1 = K, 2 = V
};

// make_inputs()'s loop on the device: element c = row * D + d of the canonical order gets
// random::input_value(stream, tensor, c) rounded to T, at its strided place. threadIdx.x
// walks a row's D elements, threadIdx.y and the blocks walk rows (three divisions per row,
// not per element: the decode set's largest caches hold 17 G elements).
template <typename T>
__global__ void fill_random_kernel(T* base, RandomFill f) {
  for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < f.rows;
       row += static_cast<std::int64_t>(gridDim.x) * blockDim.y) {
    const std::int64_t s = row % f.seqlen, bh = row / f.seqlen, h = bh % f.heads, b = bh / f.heads;
    T* dst = base + f.offset + b * f.stride[0] + h * f.stride[1] + s * f.stride[2];
    const std::uint64_t c0 = static_cast<std::uint64_t>(row * f.head_dim);
    for (std::int64_t d = threadIdx.x; d < f.head_dim; d += blockDim.x)
      dst[d] = vendor::from_float<T>(random::input_value(f.stream, f.tensor, c0 + static_cast<std::uint64_t>(d)));
  }
}

}  // namespace

DeviceCase::DeviceCase(const Problem& problem, std::uint64_t seed) : problem_(problem), layout_(make_layout(problem)) {
  const std::size_t esize = dtype_size(problem_.dtype);
  for (int b = 0; b < 3; ++b) inputs_[b] = DeviceBuffer(static_cast<std::size_t>(layout_.buffer_elems[b]) * esize);
  const Placement* placements[3] = {&layout_.q, &layout_.k, &layout_.v};
  for (int t = 0; t < 3; ++t) {
    const Placement& pl = *placements[t];
    RandomFill f;
    f.heads = t == 0 ? problem_.heads_q : problem_.heads_kv;
    f.seqlen = t == 0 ? problem_.seqlen_q : problem_.seqlen_k;
    f.head_dim = problem_.head_dim;
    f.rows = problem_.batch * f.heads * f.seqlen;
    f.offset = pl.offset;
    for (int i = 0; i < 3; ++i) f.stride[i] = pl.stride[i];
    f.stream = random::input_stream(seed, t);
    f.tensor = t;
    if (f.rows == 0 || f.head_dim == 0) continue;
    const dim3 block(32, 8);
    const std::int64_t blocks = std::min<std::int64_t>((f.rows + block.y - 1) / block.y, 1 << 20);
    vendor::dispatch_dtype(problem_.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      fill_random_kernel<T><<<static_cast<unsigned>(blocks), block>>>(static_cast<T*>(inputs_[pl.buffer].data()), f);
    });
    FLASHSTEPS_CHECK_LAUNCH("fill_random_kernel");
  }
  vendor::synchronize();
  allocate();
}

void DeviceCase::allocate() {
  const std::size_t esize = dtype_size(problem_.dtype);
  o_ = DeviceBuffer(static_cast<std::size_t>(layout_.o_elems) * esize);
  const std::int64_t rows = problem_.batch * problem_.heads_q * problem_.seqlen_q;
  if (problem_.with_lse) lse_ = DeviceBuffer(static_cast<std::size_t>(rows) * sizeof(float));
  args_.q = make_view(problem_, layout_, 'q', inputs_[layout_.q.buffer].data());
  args_.k = make_view(problem_, layout_, 'k', inputs_[layout_.k.buffer].data());
  args_.v = make_view(problem_, layout_, 'v', inputs_[layout_.v.buffer].data());
  args_.o = make_view(problem_, layout_, 'o', o_.data());
  args_.lse = problem_.with_lse ? static_cast<float*>(lse_.data()) : nullptr;
  args_.softmax_scale = problem_.softmax_scale;
  args_.mask = problem_.mask;
}

void DeviceCase::reserve_workspace(std::size_t bytes) {
  if (bytes > workspace_.size()) workspace_ = DeviceBuffer(bytes);
  args_.workspace = workspace_.data();
  args_.workspace_size = workspace_.size();
}

void DeviceCase::poison_outputs() {
  // 0xFF bytes are a NaN in fp32, fp16 and bf16 alike (all-ones exponent, non-zero mantissa).
  vendor::memset_device(o_.data(), 0xFF, o_.size());
  vendor::memset_device(lse_.data(), 0xFF, lse_.size());
}

namespace {
// True when the stored bits of one element of @p dtype are a NaN.
bool is_nan_bits(const unsigned char* at, DType dtype) {
  if (dtype == DType::f32) {
    std::uint32_t u;
    std::memcpy(&u, at, 4);
    return (u & 0x7fffffffu) > 0x7f800000u;
  }
  std::uint16_t u;
  std::memcpy(&u, at, 2);
  return (u & 0x7fffu) > (dtype == DType::f16 ? 0x7c00u : 0x7f80u);
}
}  // namespace

DeviceCase::Output DeviceCase::download(const std::vector<std::int64_t>& rows) const {
  vendor::synchronize();
  Output out;
  const Problem& p = problem_;
  const std::size_t esize = dtype_size(p.dtype);
  const std::vector<unsigned char> o_host = o_.download();
  for (std::size_t e = 0; e < o_host.size(); e += esize) out.unwritten += is_nan_bits(&o_host[e], p.dtype) ? 1 : 0;
  out.o.assign(static_cast<std::size_t>(layout_.o_elems), std::nan(""));
  const std::vector<std::int64_t> row_list = query_rows(rows, p.seqlen_q);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t n : row_list)
        for (std::int64_t d = 0; d < p.head_dim; ++d)
          out.o[static_cast<std::size_t>(((b * p.heads_q + h) * p.seqlen_q + n) * p.head_dim + d)] =
              read_element(o_host.data(), layout_.o, p.dtype, b, h, n, d);
  if (p.with_lse) {
    const std::vector<unsigned char> lse_host = lse_.download();
    out.lse.resize(lse_host.size() / sizeof(float));
    for (std::size_t i = 0; i < out.lse.size(); ++i) {
      float x;
      std::memcpy(&x, lse_host.data() + i * sizeof(float), sizeof(float));
      out.unwritten += std::isnan(x) ? 1 : 0;
      out.lse[i] = x;
    }
  }
  out.guards_intact = o_.guards_intact() && lse_.guards_intact() && workspace_.guards_intact() &&
                      inputs_[0].guards_intact() && inputs_[1].guards_intact() && inputs_[2].guards_intact();
  return out;
}

DeviceCase::Output run_once(DeviceCase& device_case, const StepFns& step, const std::vector<std::int64_t>& rows) {
  device_case.reserve_workspace(step.workspace_bytes(device_case.args()));
  device_case.poison_outputs();
  step.attention_forward(device_case.args(), nullptr);
  return device_case.download(rows);
}

}  // namespace flashsteps
