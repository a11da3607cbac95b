// SPDX-License-Identifier: Apache-2.0
/// @file host_device.h
/// @brief FLASHSTEPS_HD_INLINE: marks a small function callable from host and device code, in
/// headers that must also compile as plain C++ (no GPU runtime headers): fragment_layout.h and
/// causal_schedule.h, which the kernels, the host tests and the book's figures share.
#pragma once

#if defined(__HIP__)
// clang's HIP: the __host__ / __device__ macros come from the HIP headers, which may not be
// included yet; the attributes they stand for are always known.
/// Callable from host and device code, always inlined.
#define FLASHSTEPS_HD_INLINE __attribute__((host, device, always_inline)) inline
#elif defined(__CUDACC__)
/// Callable from host and device code, always inlined.
#define FLASHSTEPS_HD_INLINE __host__ __device__ __forceinline__
#else
/// Plain C++ (host tests, the book's figures): an inline function.
#define FLASHSTEPS_HD_INLINE inline
#endif
