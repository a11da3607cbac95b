# SPDX-License-Identifier: Apache-2.0
# The AMD device libraries (ocml, ockl, oclc_*: LLVM bitcode that clang links into every
# HIP kernel) for a clang newer than the ROCm they come from.
#
# The hip preset compiles with Debian 12's clang 19 against Debian's ROCm 5.2, whose device
# libraries (/usr/lib/<arch>/amdgcn/bitcode) predate gfx942: there is no
# oclc_isa_version_942.bc, and clang refuses a target whose ISA-version library is missing.
# That library is one constant, __oclc_ISA_version = major*1000 + minor*100 + stepping
# (gfx942: 9402). So, when FLASHSTEPS_HIP_DEVICE_LIBS names such a folder (the hip preset
# sets it), this file makes a device-library folder in the build tree, <build>/amdgcn-bitcode:
# a link to each library of FLASHSTEPS_HIP_DEVICE_LIBS, plus the ISA-version library of
# every CMAKE_HIP_ARCHITECTURES target that the folder lacks, compiled here from that one
# line of OpenCL. It then appends --rocm-device-lib-path=<build>/amdgcn-bitcode to
# CMAKE_HIP_FLAGS as a normal variable (the cached value stays as the preset or the command
# line gave it; the compile rules and the ISA checks read the normal variable). Nothing is
# written outside the build folder.
#
# Does nothing when FLASHSTEPS_HIP_DEVICE_LIBS is empty (the default: a full ROCm 6 install
# brings the libraries of all its targets) or when CMAKE_HIP_FLAGS already names a
# --rocm-device-lib-path. Included by FlashStepsGpu.cmake before enable_language(HIP), whose
# compiler check already compiles for every target and needs the libraries.

set(FLASHSTEPS_HIP_DEVICE_LIBS "" CACHE PATH
    "Device libraries (ocml.bc, ockl.bc, oclc_*.bc) to complete in the build tree for CMAKE_HIP_ARCHITECTURES; empty: the compiler's own")

if(FLASHSTEPS_HIP_DEVICE_LIBS AND NOT CMAKE_HIP_FLAGS MATCHES "--rocm-device-lib-path")
  if(NOT EXISTS "${FLASHSTEPS_HIP_DEVICE_LIBS}/ocml.bc")
    message(FATAL_ERROR "FLASHSTEPS_HIP_DEVICE_LIBS: no ocml.bc in '${FLASHSTEPS_HIP_DEVICE_LIBS}' "
      "(install Debian's rocm-device-libs, or set it to empty to use the compiler's own)")
  endif()
  set(_libs ${CMAKE_BINARY_DIR}/amdgcn-bitcode)
  file(MAKE_DIRECTORY ${_libs})
  file(GLOB _links ${_libs}/*.bc)  # links of an earlier configure: made again below
  foreach(_link IN LISTS _links)
    if(IS_SYMLINK ${_link})
      file(REMOVE ${_link})
    endif()
  endforeach()
  file(GLOB _given "${FLASHSTEPS_HIP_DEVICE_LIBS}/*.bc")
  foreach(_bc IN LISTS _given)
    get_filename_component(_name ${_bc} NAME)
    file(REMOVE ${_libs}/${_name})  # the folder's own library wins over one compiled here
    file(CREATE_LINK ${_bc} ${_libs}/${_name} SYMBOLIC)
  endforeach()

  # The compiler is only named so far (enable_language(HIP) finds it); find it the same way.
  find_program(_hip_clang NAMES ${CMAKE_HIP_COMPILER} clang++ NO_CACHE)
  if(NOT _hip_clang)
    message(FATAL_ERROR "HIP compiler '${CMAKE_HIP_COMPILER}' not found (the hip preset needs Debian's clang-19)")
  endif()
  foreach(_arch IN LISTS CMAKE_HIP_ARCHITECTURES)
    string(REGEX REPLACE ":.*" "" _arch "${_arch}")  # gfx90a:xnack+ -> gfx90a
    if(NOT _arch MATCHES "^gfx([0-9]+)([0-9a-f])([0-9a-f])$")
      message(FATAL_ERROR "CMAKE_HIP_ARCHITECTURES: '${_arch}' is not a gfx target name")
    endif()
    set(_file oclc_isa_version_${CMAKE_MATCH_1}${CMAKE_MATCH_2}${CMAKE_MATCH_3}.bc)
    if(EXISTS ${_libs}/${_file})
      continue()  # a link to the given folder's, or made by an earlier configure
    endif()
    math(EXPR _version "${CMAKE_MATCH_1} * 1000 + 0x${CMAKE_MATCH_2} * 100 + 0x${CMAKE_MATCH_3}")
    set(_cl ${CMAKE_BINARY_DIR}/CMakeFiles/oclc_isa_version/${_arch}.cl)
    file(WRITE ${_cl} "const __constant int __oclc_ISA_version = ${_version};\n")
    # -mcode-object-version=none: no code-object-version flag in the module, so it links
    # into kernels of any code-object version (the device libraries carry none either).
    execute_process(
      COMMAND ${_hip_clang} -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -nogpulib -emit-llvm -c
              -Xclang -mcode-object-version=none ${_cl} -o ${_libs}/${_file}
      RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "Compiling ${_file} (ISA version ${_version}) with ${_hip_clang} failed:\n${_err}")
    endif()
    message(STATUS "HIP device libraries: compiled ${_file} (ISA version ${_version}) beside ${FLASHSTEPS_HIP_DEVICE_LIBS}")
  endforeach()
  string(APPEND CMAKE_HIP_FLAGS " --rocm-device-lib-path=${_libs}")
  message(STATUS "HIP device libraries: ${_libs}")
endif()
