// SPDX-License-Identifier: Apache-2.0
// Host side of the Hopper vocabulary (tile_sm90.h): TMA tensor maps and the device check.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <string>

#include "flashsteps/tile_sm90.h"

namespace flashsteps::sm90 {

namespace {

// cuTensorMapEncodeTiled, found once through the runtime (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FLASHSTEPS_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw DeviceError("cuTensorMapEncodeTiled is not available from this driver (needs CUDA 12 or newer)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tensor_map(const TensorView& t, const char* name, int box_rows) {
  const std::uint64_t esize = dtype_size(t.dtype);
  // Dimensions innermost first: {head_dim, seqlen, heads, batch}. An empty dimension is
  // given size 1 (the kernel then reads none of it; TMA rejects size 0).
  cuuint64_t dims[4], strides[3];
  for (int d = 0; d < 4; ++d) dims[d] = static_cast<cuuint64_t>(t.shape[3 - d] > 0 ? t.shape[3 - d] : 1);
  for (int d = 1; d < 4; ++d) {
    if (t.shape[3 - d] > 1 && t.stride[3 - d] == 0)  // a broadcast view: TMA strides must be positive
      throw Unsupported(std::string(name) + ".stride[" + std::to_string(3 - d) + "] = 0 over " + name + ".shape[" +
                        std::to_string(3 - d) + "] = " + std::to_string(t.shape[3 - d]) +
                        ": the Hopper steps read tensors through TMA, which takes no zero stride");
    // A dimension of size 1 is never stepped along: any legal stride will do (TMA wants
    // multiples of 16 bytes), so take the extent of the dimensions inside it.
    const std::uint64_t bytes = t.shape[3 - d] > 1 ? static_cast<std::uint64_t>(t.stride[3 - d]) * esize
                                                   : dims[0] * esize * (d > 1 ? dims[1] : 1);
    if (bytes >= (1ull << 40))
      throw Unsupported(std::string(name) + ".stride[" + std::to_string(3 - d) + "] = " +
                        std::to_string(t.stride[3 - d]) + " elements: TMA strides must be under 2^40 bytes");
    strides[d - 1] = static_cast<cuuint64_t>(bytes);
  }
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(kChunkCols), static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMap map;
  const CUresult r = encode_tiled()(&map, type, 4, t.data, dims, strides, box, element_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw DeviceError(std::string("cuTensorMapEncodeTiled failed for ") + name + " (CUresult " + std::to_string(r) +
                      ")");
  return map;
}

void require_sm90(const char* step_name) {
  int device = 0, major = 0, minor = 0;
  FLASHSTEPS_CHECK(cudaGetDevice(&device));
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major != 9 || minor != 0)
    throw Unsupported(std::string(step_name) + " runs on sm_90 (Hopper: H100, H200) only: its wgmma and TMA code " +
                      "is compiled for sm_90a; this device is sm_" + std::to_string(major) + std::to_string(minor));
}

}  // namespace flashsteps::sm90
