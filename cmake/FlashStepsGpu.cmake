# SPDX-License-Identifier: Apache-2.0
# Enables the GPU language of FLASHSTEPS_BACKEND and sets FLASHSTEPS_GPU_LANG.
# Architectures come from the preset or the command line, never from this file:
#   CUDA: CMAKE_CUDA_ARCHITECTURES; if unset, the local GPU's (nvidia-smi), else 80;90a.
#   HIP:  CMAKE_HIP_ARCHITECTURES (the hip preset sets gfx90a;gfx940).
if(FLASHSTEPS_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
      OUTPUT_VARIABLE _cc RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND _cc MATCHES "^([0-9]+)\\.([0-9]+)")
      set(_arch "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
      if(_arch STREQUAL "90")
        set(_arch "90a")  # Hopper-only instructions (wgmma, setmaxnreg) need the 'a' target
      endif()
      set(CMAKE_CUDA_ARCHITECTURES "${_arch}" CACHE STRING "CUDA architectures (from the local GPU)")
    else()
      set(CMAKE_CUDA_ARCHITECTURES "80;90a" CACHE STRING "CUDA architectures (no local GPU found)")
    endif()
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(FLASHSTEPS_GPU_LANG CUDA)
  find_package(CUDAToolkit REQUIRED)
elseif(FLASHSTEPS_BACKEND STREQUAL "HIP")
  # Debian installs ROCm under /usr and hip-lang's package under the multiarch folder,
  # where CMake's HIP language does not look by itself.
  if(NOT DEFINED hip-lang_DIR AND EXISTS /usr/lib/x86_64-linux-gnu/cmake/hip-lang)
    set(hip-lang_DIR /usr/lib/x86_64-linux-gnu/cmake/hip-lang CACHE PATH "hip-lang package")
  endif()
  enable_language(HIP)
  set(FLASHSTEPS_GPU_LANG HIP)
elseif(NOT FLASHSTEPS_BACKEND STREQUAL "NONE")
  message(FATAL_ERROR "FLASHSTEPS_BACKEND must be CUDA, HIP or NONE, not '${FLASHSTEPS_BACKEND}'")
endif()
