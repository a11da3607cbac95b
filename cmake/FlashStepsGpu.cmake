# SPDX-License-Identifier: Apache-2.0
# Enables the GPU language of FLASHSTEPS_BACKEND and sets FLASHSTEPS_GPU_LANG.
# Architectures come from the preset or the command line, never from this file:
#   CUDA: CMAKE_CUDA_ARCHITECTURES; if unset, the local GPU's (nvidia-smi), else 80;90a.
#   HIP:  CMAKE_HIP_ARCHITECTURES (the hip preset sets gfx90a;gfx940;gfx942).
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
  # Debian installs ROCm under /usr but hip-lang's CMake package under the multiarch folder
  # (/usr/lib/<arch>/cmake/hip-lang), while CMake's HIP language insists on
  # <ROCm root>/lib/cmake/hip-lang. Give it a ROCm root in the build tree whose only content
  # is a link to Debian's package; the package resolves its real location and uses /usr.
  set(_debian_hip_lang /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang)
  if(NOT CMAKE_HIP_COMPILER_ROCM_ROOT AND NOT EXISTS /usr/lib/cmake/hip-lang/hip-lang-config.cmake
     AND EXISTS ${_debian_hip_lang}/hip-lang-config.cmake)
    set(_root ${CMAKE_BINARY_DIR}/debian-rocm-root)
    file(MAKE_DIRECTORY ${_root}/lib/cmake)
    if(NOT EXISTS ${_root}/lib/cmake/hip-lang)
      file(CREATE_LINK ${_debian_hip_lang} ${_root}/lib/cmake/hip-lang SYMBOLIC)
    endif()
    set(CMAKE_HIP_COMPILER_ROCM_ROOT ${_root} CACHE PATH "ROCm root as CMake's HIP language sees it")
  endif()
  # hip-lang then looks for amd_comgr and hsa-runtime64, also in the multiarch folder, also
  # from CMake's test project (which inherits this process's environment).
  foreach(_dep amd_comgr hsa-runtime64)
    if(NOT DEFINED ENV{${_dep}_ROOT} AND EXISTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/${_dep})
      set(ENV{${_dep}_ROOT} /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/${_dep})
    endif()
  endforeach()
  # hip-lang links compiler-rt's builtins (fp16 conversions) and takes the first it finds
  # under /usr/lib/clang/<any version>; take the HIP compiler's own instead.
  find_program(_hip_clang NAMES ${CMAKE_HIP_COMPILER} clang++ NO_CACHE)
  if(_hip_clang AND NOT CLANGRT_BUILTINS)
    execute_process(COMMAND ${_hip_clang} --rtlib=compiler-rt -print-libgcc-file-name
      OUTPUT_VARIABLE _builtins ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(EXISTS "${_builtins}")
      set(CLANGRT_BUILTINS ${_builtins} CACHE FILEPATH "compiler-rt builtins of the HIP compiler")
    endif()
  endif()
  # Debian's device libraries predate gfx942: complete them in the build tree.
  include(FlashStepsHipDeviceLibs)
  enable_language(HIP)
  set(FLASHSTEPS_GPU_LANG HIP)
elseif(NOT FLASHSTEPS_BACKEND STREQUAL "NONE")
  message(FATAL_ERROR "FLASHSTEPS_BACKEND must be CUDA, HIP or NONE, not '${FLASHSTEPS_BACKEND}'")
endif()
