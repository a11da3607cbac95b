# SPDX-License-Identifier: Apache-2.0
# Third-party libraries, all from Debian's packages (see README: Quick start).
find_package(Kokkos REQUIRED)
# Debian's Trilinos Kokkos config gives Kokkos::kokkos the include directory
# <prefix>/lib/include, which does not exist (the headers live in include/trilinos, which
# the same file reports as Kokkos_INCLUDE_DIRS), and puts a -D flag among its link
# libraries. Correct the imported target here rather than patching system files.
get_filename_component(_kokkos_include "${Kokkos_INCLUDE_DIRS}" REALPATH)
if(NOT EXISTS "${_kokkos_include}/Kokkos_Core.hpp")
  message(FATAL_ERROR "Kokkos_Core.hpp not found in ${_kokkos_include} (Kokkos_INCLUDE_DIRS)")
endif()
set_target_properties(Kokkos::kokkos PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_kokkos_include}"
  INTERFACE_LINK_LIBRARIES "trilinos_kokkoscore")
# Imath's half (fp16 conversions on the host), header-only: only its header is needed (its
# Debian CMake package also names a Python module that is not installed, and warns).
find_path(FLASHSTEPS_IMATH_INCLUDE_DIR Imath/half.h REQUIRED)
find_package(nlohmann_json REQUIRED)  # the real-input fixture's header
if(FLASHSTEPS_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(FLASHSTEPS_BUILD_BENCH AND NOT FLASHSTEPS_BACKEND STREQUAL "NONE")
  find_package(benchmark REQUIRED)
endif()
if(NOT FLASHSTEPS_BACKEND STREQUAL "NONE")
  # The options of the benchmarks, the tuners, tools/ceilings and trace_stepNN
  # (tools/timeline/trace_main.cu, CUDA builds only).
  find_package(CLI11 REQUIRED)
endif()
