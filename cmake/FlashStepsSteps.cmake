# SPDX-License-Identifier: Apache-2.0
# add_step(NN slug): the single registry of the course.
#
# For steps/NN_slug/step.cu it makes
#   flashsteps_stepNN   the step's library (its code in namespace flashsteps::stepNN)
#   test_stepNN         the shared conformance suite (tests/conformance_test.cu) linked to it,
#                       registered with ctest (labels: gpu, stepNN), discovered at test time
#   bench_stepNN        the shared benchmark (bench/bench_attention.cu) linked to it
#   stepN               the umbrella target: `make step1 && ./bench`
# and appends NN to the global property FLASHSTEPS_STEPS (read by the book and CI).

# Compile options every GPU translation unit gets.
function(flashsteps_gpu_options target)
  if(FLASHSTEPS_BACKEND STREQUAL "CUDA")
    # constexpr helpers of the contract (last_visible_key) are called from device code;
    # -lineinfo lets ncu and compute-sanitizer point at source lines.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills>)
  endif()
endfunction()

# The instructions a step must contain, checked by the ctest `isa.stepNN` (label isa) in
# the device code the compiler generates: PTX for sm_90a on CUDA, the ISA of every
# CMAKE_HIP_ARCHITECTURES target on HIP. Lets CI, which has no GPU, see that the kernels
# use the instructions they were written for.
function(flashsteps_add_isa_check id src cuda_patterns hip_patterns)
  set(includes -I${CMAKE_SOURCE_DIR}/common/include)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/isa)
  set(outputs)
  if(FLASHSTEPS_BACKEND STREQUAL "CUDA")
    set(out ${CMAKE_BINARY_DIR}/isa/${id}.sm_90a.ptx)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_CUDA_COMPILER} -ptx -std=c++17 -O3 --expt-relaxed-constexpr -arch=compute_90a
              ${includes} -DFLASHSTEPS_STEP_NS=${id} ${src} -o ${out}
      DEPENDS ${src} VERBATIM COMMENT "PTX of ${id} for the ISA check")
    list(APPEND outputs ${out})
    set(patterns "${cuda_patterns}")
  else()
    separate_arguments(hip_flags UNIX_COMMAND "${CMAKE_HIP_FLAGS}")
    foreach(arch IN LISTS CMAKE_HIP_ARCHITECTURES)
      set(out ${CMAKE_BINARY_DIR}/isa/${id}.${arch}.s)
      add_custom_command(OUTPUT ${out}
        COMMAND ${CMAKE_HIP_COMPILER} -x hip --offload-arch=${arch} --cuda-device-only -S -O3 -std=c++17
                ${hip_flags} ${includes} -DFLASHSTEPS_STEP_NS=${id} ${src} -o ${out}
        DEPENDS ${src} VERBATIM COMMENT "${arch} ISA of ${id} for the ISA check")
      list(APPEND outputs ${out})
    endforeach()
    set(patterns "${hip_patterns}")
  endif()
  add_custom_target(isa_${id} ALL DEPENDS ${outputs})
  if(FLASHSTEPS_BUILD_TESTS)
    string(REPLACE ";" "@@" files_arg "${outputs}")  # lists travel with @@ between items
    string(REPLACE ";" "@@" patterns_arg "${patterns}")
    add_test(NAME isa.${id} COMMAND ${CMAKE_COMMAND} "-DFILES=${files_arg}" "-DPATTERNS=${patterns_arg}"
             -P ${CMAKE_SOURCE_DIR}/cmake/CheckIsa.cmake)
    set_tests_properties(isa.${id} PROPERTIES LABELS "isa;${id}")
  endif()
endfunction()

# add_step(NN slug [SOURCES <file>...] [TEST_SOURCES <file>...] ISA_CUDA <regex>... ISA_HIP <regex>...)
# SOURCES: more files of the step's library (beside step.cu, compiled as CUDA/HIP);
# TEST_SOURCES: more test files linked into test_stepNN beside the conformance suite.
function(add_step number slug)
  cmake_parse_arguments(ARG "" "" "ISA_CUDA;ISA_HIP;SOURCES;TEST_SOURCES" ${ARGN})
  set(id step${number})
  math(EXPR short "${number}")  # 01 -> 1, for `make step1`
  set(dir ${CMAKE_SOURCE_DIR}/steps/${number}_${slug})
  list(TRANSFORM ARG_SOURCES PREPEND ${dir}/)
  set_source_files_properties(${dir}/step.cu ${ARG_SOURCES} PROPERTIES LANGUAGE ${FLASHSTEPS_GPU_LANG})

  add_library(flashsteps_${id} STATIC ${dir}/step.cu ${ARG_SOURCES})
  target_link_libraries(flashsteps_${id} PUBLIC flashsteps_gpu)
  target_include_directories(flashsteps_${id} PUBLIC ${dir} PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(flashsteps_${id} PRIVATE FLASHSTEPS_STEP_NS=${id})
  flashsteps_gpu_options(flashsteps_${id})
  set(step_libs flashsteps_${id})
  if(NOT id STREQUAL "step01")
    list(APPEND step_libs flashsteps_step01)  # the baseline of the FlashAttention error rule
  endif()
  set(umbrella flashsteps_${id})

  if(FLASHSTEPS_BUILD_TESTS)
    list(TRANSFORM ARG_TEST_SOURCES PREPEND ${CMAKE_SOURCE_DIR}/tests/)
    set(test_src ${CMAKE_SOURCE_DIR}/tests/conformance_test.cu ${CMAKE_SOURCE_DIR}/tests/gpu_main.cu ${ARG_TEST_SOURCES})
    set_source_files_properties(${test_src} PROPERTIES LANGUAGE ${FLASHSTEPS_GPU_LANG})
    add_executable(test_${id} ${test_src})
    target_compile_definitions(test_${id} PRIVATE FLASHSTEPS_STEP_NS=${id})
    target_link_libraries(test_${id} PRIVATE ${step_libs} flashsteps_reference GTest::gtest)
    flashsteps_gpu_options(test_${id})
    # Listing the tests never touches the device, so discovery works without a GPU.
    gtest_discover_tests(test_${id} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS "gpu;${id}")
    list(APPEND umbrella test_${id})
  endif()

  if(FLASHSTEPS_BUILD_BENCH)
    set(bench_src ${CMAKE_SOURCE_DIR}/bench/bench_attention.cu)
    set_source_files_properties(${bench_src} PROPERTIES LANGUAGE ${FLASHSTEPS_GPU_LANG})
    add_executable(bench_${id} ${bench_src})
    target_compile_definitions(bench_${id} PRIVATE FLASHSTEPS_STEP_NS=${id})
    target_include_directories(bench_${id} PRIVATE ${CMAKE_BINARY_DIR}/generated)
    add_dependencies(bench_${id} flashsteps_commit)
    target_link_libraries(bench_${id} PRIVATE ${step_libs} flashsteps_reference benchmark::benchmark CLI11::CLI11)
    flashsteps_gpu_options(bench_${id})
    list(APPEND umbrella bench_${id})
  endif()

  if(ARG_ISA_CUDA OR ARG_ISA_HIP)
    flashsteps_add_isa_check(${id} ${dir}/step.cu "${ARG_ISA_CUDA}" "${ARG_ISA_HIP}")
    list(APPEND umbrella isa_${id})
  endif()

  add_custom_target(step${short} DEPENDS ${umbrella})
  set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_STEPS ${number}_${slug})
endfunction()
