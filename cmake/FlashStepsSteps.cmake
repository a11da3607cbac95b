# SPDX-License-Identifier: Apache-2.0
# The registry of the course: one add_step() line per step in the root CMakeLists.txt.
#
#   flashsteps_isa_set(NAME CUDA <regex>... HIP <regex>...)
#       Names a set of instructions a step's device code must contain, once, so that steps
#       built on the same instructions share it (e.g. TENSOR_CORES for steps 04-06).
#
#   add_step(NN slug [BASE MM] [ISA <set>...] [ISA_CUDA <regex>...] [ISA_HIP <regex>...]
#            [REQUIRES CUDA_SM90A] [WERROR_PTXAS])
#       NN        two digits, optionally followed by one lowercase letter for an intermediate
#                 step (04a and 04b climb from 03 to 04); the step's folder is
#                 steps/NN_slug/ and its code step.cu; `make stepN` drops the leading zero
#                 (step4a).
#       BASE MM   the step this one builds on: the book diffs steps/NN_slug/step.cu against
#                 steps/MM_*/step.cu. Default: the step registered just before (none for the
#                 first). A step that branches off earlier says so (a split-KV step after the
#                 Hopper ones would say BASE 06).
#       ISA       named sets (flashsteps_isa_set), joined; ISA_CUDA / ISA_HIP add one-off
#                 patterns. Checked by the ctest isa.stepNN (label isa), see below. A
#                 pattern that starts with ! must NOT match (step 04a: "!ldmatrix").
#       REQUIRES CUDA_SM90A
#                 the step uses Hopper-only instructions (wgmma, setmaxnreg, TMA). It is built
#                 only by a CUDA build whose CMAKE_CUDA_ARCHITECTURES lists 90a (or 90a-real /
#                 90a-virtual), and then its library is compiled for 90a alone, whatever the
#                 other architectures are (its test and benchmark executables, which hold no
#                 kernel of the step, are compiled for all of them). Elsewhere (HIP, CUDA
#                 without 90a, the CPU build) it is skipped, see "Skipped steps".
#       WERROR_PTXAS
#                 ptxas may not complain about the step's library: its warnings are errors
#                 (ptxas --warning-as-error, so -warn-spills' spill report fails the build),
#                 and so is any "Potential Performance Loss" notice (wgmma.mma_async
#                 serialized, setmaxnreg ignored), which ptxas prints as info, not as a warning:
#                 cmake/ptxas_check.sh, set as the library's CUDA compiler launcher, runs the
#                 compile and fails it when that text appears. For the Hopper steps, whose speed
#                 depends on those not happening. Ignored on HIP (no ptxas).
#
# For a step that is built, add_step makes
#   flashsteps_stepNN   the step's library (step.cu; its code in namespace flashsteps::stepNN)
#   test_stepNN         the shared conformance suite (tests/conformance_test.cu) linked to it,
#                       registered with ctest (labels: gpu, stepNN), discovered at test time
#   bench_stepNN        the shared benchmark (bench/bench_attention.cu) linked to it
#   isa_stepNN          the device code the ISA check reads, and the ctest isa.stepNN
#   stepN               the umbrella target: `make step1 && ./bench`
# and then includes steps/NN_slug/step.cmake when there is one: a step's extras (more
# sources, more tests, a tool of its own). The file runs inside add_step, after the targets
# above exist, with these variables set:
#   STEP_NUMBER, STEP_SLUG, STEP_ID (stepNN), STEP_DIR (absolute folder),
#   STEP_LIBRARY (flashsteps_stepNN), STEP_TEST (test_stepNN, empty without tests),
#   STEP_BENCH (bench_stepNN, empty without benchmarks), STEP_TARGET (stepN)
# and may call flashsteps_gpu_sources(<target> <file>...) to add CUDA/HIP sources,
# flashsteps_add_trace_tool() (a Hopper step whose kernel makes the trace calls of
# common/include/flashsteps/trace_sm90.h) to get trace_stepNN in a -DFLASHSTEPS_TRACE=ON build,
# and flashsteps_add_tuner(HEADER <file>) (a step whose shape the shared tuner chooses) to get
# its tuned tables compiled in and tune_stepNN.
#
# Skipped steps: FLASHSTEPS_BACKEND=NONE skips every step, and REQUIRES skips a step where
# it cannot be built. Configure prints "Step NN slug: not built (<reason>)", and `make stepN`
# prints the same reason and FAILS (so `make step7 && ./bench` does not bench the steps
# before it as if step 07 were there). No other target of the step exists.
#
# The registry: every add_step() is recorded, built or not, and
# flashsteps_write_registry(<file>) writes it as JSON once all steps are registered
# (the root CMakeLists.txt writes ${CMAKE_BINARY_DIR}/steps.json), for the book tooling:
#   {"version": 1, "backend": "CUDA" | "HIP" | "NONE",
#    "steps": [{"number": "06", "slug": "autotuned", "name": "06_autotuned",
#               "folder": "steps/06_autotuned", "base": "05" (null for the first step),
#               "built": true, "reason": "" (why not, when built is false),
#               "requires": ["CUDA_SM90A"] or [], "target": "step6",
#               "extras": "steps/06_autotuned/step.cmake" or null}, ...]}
# in registration order; paths relative to the source folder. A folder steps/NN_* without an
# add_step() line is reported as a configure warning.
#
# ISA checks: the ctest isa.stepNN (label isa) reads the device code the compiler generates
# for step.cu (PTX for sm_90a on CUDA, the ISA of every CMAKE_HIP_ARCHITECTURES target on
# HIP) and fails unless every pattern of the step's sets matches, and no !pattern does, so
# CI, which has no GPU, sees that the kernels use the instructions they were written for
# (and, for the intermediate steps 04a and 04b, not yet the ones a later step brings).

# Compile options every GPU translation unit gets.
function(flashsteps_gpu_options target)
  if(FLASHSTEPS_BACKEND STREQUAL "CUDA")
    # constexpr helpers of the contract (last_visible_key) are called from device code;
    # -lineinfo lets ncu and compute-sanitizer point at source lines.
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills>)
  endif()
endfunction()

# flashsteps_gpu_sources(target file...): adds files compiled as CUDA or HIP to target.
function(flashsteps_gpu_sources target)
  set_source_files_properties(${ARGN} PROPERTIES LANGUAGE ${FLASHSTEPS_GPU_LANG})
  target_sources(${target} PRIVATE ${ARGN})
endfunction()

# flashsteps_add_trace_tool(): called from a step's step.cmake. In a build configured with
# -DFLASHSTEPS_TRACE=ON it adds trace_stepNN (built by `make stepN`): tools/timeline/trace_main.cu,
# which includes the step's own step.cu with FLASHSTEPS_TRACE defined, so the kernel's trace
# calls record the phases of one block, and writes them as JSON (tools/timeline/README.md).
# It is compiled as the step's library is: the same architecture (90a alone), compile options
# (ptxas warnings are errors) and compiler launcher (the serialized-wgmma check), and linked to
# the same libraries. Without the option it adds nothing, and in no build are the step's
# library, tests or benchmark traced.
function(flashsteps_add_trace_tool)
  if(NOT FLASHSTEPS_TRACE)
    return()
  endif()
  if(NOT FLASHSTEPS_BACKEND STREQUAL "CUDA")
    message(FATAL_ERROR "flashsteps_add_trace_tool (${STEP_ID}): the trace calls are CUDA (sm_90a) only")
  endif()
  set(tool trace_${STEP_ID})
  add_executable(${tool})
  flashsteps_gpu_sources(${tool} ${CMAKE_SOURCE_DIR}/tools/timeline/trace_main.cu)
  target_include_directories(${tool} PRIVATE ${STEP_DIR} ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(${tool} PRIVATE FLASHSTEPS_STEP_NS=${STEP_ID} FLASHSTEPS_TRACE)
  foreach(property CUDA_ARCHITECTURES CUDA_COMPILER_LAUNCHER COMPILE_OPTIONS)
    get_target_property(value ${STEP_LIBRARY} ${property})
    if(value)
      set_target_properties(${tool} PROPERTIES ${property} "${value}")
    endif()
  endforeach()
  get_target_property(step_libs ${STEP_LIBRARY} LINK_LIBRARIES)
  target_link_libraries(${tool} PRIVATE ${step_libs} flashsteps_reference CLI11::CLI11 nlohmann_json::nlohmann_json)
  add_dependencies(${tool} flashsteps_commit)
  add_dependencies(${STEP_TARGET} ${tool})
endfunction()

# flashsteps_add_tuner(HEADER <file>): called from the step.cmake of a step that compiles a
# configuration space and chooses among it with the shared tuner (common/include/flashsteps/
# tuner.h; the step's <file> declares its flashsteps::stepNN::tuner()). It
#  - compiles the step's tuned tables, steps/NN_slug/tuned/*.json, into the generated header
#    flashsteps/stepNN_tuned_tables.h as flashsteps::stepNN::kTunedTables[] (JSON texts,
#    nullptr-terminated), which the step passes to its tuner; editing or adding a table re-runs CMake;
#  - adds tune_stepNN (tools/tune/tune_main.cu), built by `make stepN`: the tuner over the
#    standard problem set, writing a table for tuned/.
function(flashsteps_add_tuner)
  cmake_parse_arguments(ARG "" "HEADER" "" ${ARGN})
  if(NOT ARG_HEADER OR ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "flashsteps_add_tuner (${STEP_ID}): give HEADER <the step's header that declares tuner()>")
  endif()
  file(GLOB tuned_tables CONFIGURE_DEPENDS ${STEP_DIR}/tuned/*.json)
  set(tables_h "// Generated by CMake from steps/${STEP_NUMBER}_${STEP_SLUG}/tuned/*.json: do not edit.\n#pragma once\n")
  string(APPEND tables_h "namespace flashsteps::${STEP_ID} {\ninline constexpr const char* kTunedTables[] = {\n")
  foreach(table IN LISTS tuned_tables)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${table})  # edits re-run cmake
    file(READ ${table} text)
    string(APPEND tables_h "R\"flashsteps_json(${text})flashsteps_json\",\n")
  endforeach()
  string(APPEND tables_h "nullptr};\n}  // namespace flashsteps::${STEP_ID}\n")
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/flashsteps/${STEP_ID}_tuned_tables.h CONTENT "${tables_h}" @ONLY)

  set(tool tune_${STEP_ID})
  add_executable(${tool})
  flashsteps_gpu_sources(${tool} ${CMAKE_SOURCE_DIR}/tools/tune/tune_main.cu)
  target_include_directories(${tool} PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(${tool} PRIVATE FLASHSTEPS_STEP_NS=${STEP_ID} FLASHSTEPS_STEP_HEADER="${ARG_HEADER}"
                                             FLASHSTEPS_STEP_TOOL="${tool}")
  target_link_libraries(${tool} PRIVATE ${STEP_LIBRARY} CLI11::CLI11)
  add_dependencies(${tool} flashsteps_commit)
  add_dependencies(${STEP_TARGET} ${tool})
endfunction()

# flashsteps_isa_set(NAME CUDA <regex>... [HIP <regex>...]): see the top of this file. A set
# without HIP patterns is for steps that are never built for HIP (REQUIRES CUDA_SM90A).
function(flashsteps_isa_set name)
  cmake_parse_arguments(ARG "" "" "CUDA;HIP" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS OR NOT ARG_CUDA)
    message(FATAL_ERROR "flashsteps_isa_set(${name}): give CUDA <regex>... [HIP <regex>...], "
                        "not '${ARG_UNPARSED_ARGUMENTS}'")
  endif()
  set_property(GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${name} TRUE)
  set_property(GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${name}_CUDA "${ARG_CUDA}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${name}_HIP "${ARG_HIP}")
endfunction()

# The ISA check of one step (see the top of this file).
function(flashsteps_add_isa_check id src cuda_patterns hip_patterns)
  set(includes -I${CMAKE_SOURCE_DIR}/common/include -I${CMAKE_BINARY_DIR}/generated)  # generated: tuned tables
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

# Why a step with these REQUIRES cannot be built here (empty: it can); the 90a entry of
# CMAKE_CUDA_ARCHITECTURES goes to out_arch.
function(_flashsteps_requires_reason requires out_reason out_arch)
  set(reason "")
  set(arch "")
  foreach(req IN LISTS requires)
    if(req STREQUAL "CUDA_SM90A")
      if(NOT FLASHSTEPS_BACKEND STREQUAL "CUDA")
        set(reason "needs NVIDIA sm_90a (REQUIRES CUDA_SM90A), and FLASHSTEPS_BACKEND is ${FLASHSTEPS_BACKEND}")
      else()
        foreach(a IN LISTS CMAKE_CUDA_ARCHITECTURES)
          if(a MATCHES "^90a(-real|-virtual)?$")
            set(arch "${a}")
          endif()
        endforeach()
        if(NOT arch)
          string(REPLACE ";" "," archs "${CMAKE_CUDA_ARCHITECTURES}")
          set(reason "needs NVIDIA sm_90a (REQUIRES CUDA_SM90A), and CMAKE_CUDA_ARCHITECTURES (${archs}) has no 90a: configure with -DCMAKE_CUDA_ARCHITECTURES=90a (or 80 and 90a)")
        endif()
      endif()
    else()
      message(FATAL_ERROR "add_step: unknown REQUIRES '${req}' (known: CUDA_SM90A)")
    endif()
  endforeach()
  set(${out_reason} "${reason}" PARENT_SCOPE)
  set(${out_arch} "${arch}" PARENT_SCOPE)
endfunction()

# add_step(NN slug ...): see the top of this file.
function(add_step number slug)
  cmake_parse_arguments(ARG "WERROR_PTXAS" "BASE" "ISA;ISA_CUDA;ISA_HIP;REQUIRES" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "add_step(${number} ${slug}): unknown arguments '${ARG_UNPARSED_ARGUMENTS}'")
  endif()
  if(NOT number MATCHES "^[0-9][0-9][a-z]?$")
    message(FATAL_ERROR "add_step(${number} ${slug}): the number must have two digits, optionally "
                        "followed by one lowercase letter (01, 07, 04a, ...)")
  endif()
  get_property(written GLOBAL PROPERTY FLASHSTEPS_REGISTRY_WRITTEN)
  if(written)
    message(FATAL_ERROR "add_step(${number} ${slug}) comes after flashsteps_write_registry(): move it up")
  endif()
  set(id step${number})
  string(REGEX REPLACE "^0" "" short "${number}")  # 01 -> 1, 04a -> 4a, for `make step1`
  set(name ${number}_${slug})
  set(dir ${CMAKE_SOURCE_DIR}/steps/${name})
  if(NOT EXISTS ${dir}/step.cu)
    message(FATAL_ERROR "add_step(${number} ${slug}): ${dir}/step.cu does not exist")
  endif()
  get_property(registered GLOBAL PROPERTY FLASHSTEPS_STEP_NUMBERS)
  if(number IN_LIST registered)
    message(FATAL_ERROR "add_step(${number} ${slug}): step ${number} is registered twice")
  endif()

  # The step it builds on: BASE, else the one registered before.
  if(DEFINED ARG_BASE)
    if(NOT ARG_BASE IN_LIST registered)
      message(FATAL_ERROR "add_step(${number} ${slug}): BASE ${ARG_BASE} is not a step registered before it")
    endif()
    set(base ${ARG_BASE})
  else()
    get_property(base GLOBAL PROPERTY FLASHSTEPS_LAST_STEP)
  endif()

  # The instructions it must contain: its named sets, then its one-off patterns.
  set(isa_cuda)
  set(isa_hip)
  foreach(set_name IN LISTS ARG_ISA)
    get_property(known GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${set_name})
    if(NOT known)
      message(FATAL_ERROR "add_step(${number} ${slug}): no ISA set '${set_name}' (define it with flashsteps_isa_set)")
    endif()
    get_property(cuda GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${set_name}_CUDA)
    get_property(hip GLOBAL PROPERTY FLASHSTEPS_ISA_SET_${set_name}_HIP)
    list(APPEND isa_cuda ${cuda})
    list(APPEND isa_hip ${hip})
  endforeach()
  list(APPEND isa_cuda ${ARG_ISA_CUDA})
  list(APPEND isa_hip ${ARG_ISA_HIP})

  # Built here, or why not.
  set(reason "")
  set(sm90a_arch "")
  if(FLASHSTEPS_BACKEND STREQUAL "NONE")
    set(reason "FLASHSTEPS_BACKEND is NONE: the CPU build has no GPU code")
  else()
    _flashsteps_requires_reason("${ARG_REQUIRES}" reason sm90a_arch)
  endif()

  # The registry entry (flashsteps_write_registry).
  set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_STEP_NUMBERS ${number})
  set_property(GLOBAL APPEND PROPERTY FLASHSTEPS_STEPS ${name})
  set_property(GLOBAL PROPERTY FLASHSTEPS_LAST_STEP ${number})
  set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_SLUG ${slug})
  set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_BASE "${base}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_REASON "${reason}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_REQUIRES "${ARG_REQUIRES}")
  set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_TARGET step${short})
  if(EXISTS ${dir}/step.cmake)
    set_property(GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_EXTRAS steps/${name}/step.cmake)
  endif()

  if(reason)
    if(NOT FLASHSTEPS_BACKEND STREQUAL "NONE")  # the CPU build says it once, in the registry's summary
      message(STATUS "Step ${number} ${slug}: not built (${reason})")
    endif()
    add_custom_target(step${short}
      COMMAND ${CMAKE_COMMAND} -E echo "step ${number} (${slug}) is not built in this build folder: ${reason}"
      COMMAND ${CMAKE_COMMAND} -E false
      VERBATIM)
    return()
  endif()

  # The step's library.
  set(lib flashsteps_${id})
  add_library(${lib} STATIC)
  flashsteps_gpu_sources(${lib} ${dir}/step.cu)
  target_link_libraries(${lib} PUBLIC flashsteps_gpu)
  target_include_directories(${lib} PUBLIC ${dir} PRIVATE ${CMAKE_BINARY_DIR}/generated)
  target_compile_definitions(${lib} PRIVATE FLASHSTEPS_STEP_NS=${id})
  flashsteps_gpu_options(${lib})
  if(sm90a_arch)
    set_target_properties(${lib} PROPERTIES CUDA_ARCHITECTURES ${sm90a_arch})
  endif()
  if(ARG_WERROR_PTXAS AND FLASHSTEPS_BACKEND STREQUAL "CUDA" AND FLASHSTEPS_MBARRIER_TIMEOUT)
    # The debug build's timed-out wait prints (a call to vprintf), and a call inside the
    # wgmma pipeline makes ptxas serialize it: that build is for finding hangs, not for speed.
    message(STATUS "Step ${number} ${slug}: FLASHSTEPS_MBARRIER_TIMEOUT is on, so its wgmmas are serialized "
                   "and WERROR_PTXAS is not applied (a debug build; do not time it)")
  elseif(ARG_WERROR_PTXAS AND FLASHSTEPS_BACKEND STREQUAL "CUDA")
    target_compile_options(${lib} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=--warning-as-error>)
    # The launcher runs the compile; any launcher of the user's (ccache) comes after it.
    set(launcher ${CMAKE_SOURCE_DIR}/cmake/ptxas_check.sh ${CMAKE_CUDA_COMPILER_LAUNCHER})
    set_target_properties(${lib} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
  endif()
  set(step_libs ${lib})
  if(NOT id STREQUAL "step01")
    list(APPEND step_libs flashsteps_step01)  # the baseline of the FlashAttention error rule
  endif()
  set(umbrella ${lib})

  set(test_target "")
  if(FLASHSTEPS_BUILD_TESTS)
    set(test_target test_${id})
    add_executable(${test_target})
    flashsteps_gpu_sources(${test_target} ${CMAKE_SOURCE_DIR}/tests/conformance_test.cu ${CMAKE_SOURCE_DIR}/tests/gpu_main.cu)
    target_compile_definitions(${test_target} PRIVATE FLASHSTEPS_STEP_NS=${id})
    target_link_libraries(${test_target} PRIVATE ${step_libs} flashsteps_reference GTest::gtest)
    flashsteps_gpu_options(${test_target})
    # Listing the tests never touches the device, so discovery works without a GPU.
    gtest_discover_tests(${test_target} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS "gpu;${id}")
    list(APPEND umbrella ${test_target})
  endif()

  set(bench_target "")
  if(FLASHSTEPS_BUILD_BENCH)
    set(bench_target bench_${id})
    add_executable(${bench_target})
    flashsteps_gpu_sources(${bench_target} ${CMAKE_SOURCE_DIR}/bench/bench_attention.cu)
    target_compile_definitions(${bench_target} PRIVATE FLASHSTEPS_STEP_NS=${id})
    target_include_directories(${bench_target} PRIVATE ${CMAKE_BINARY_DIR}/generated)
    add_dependencies(${bench_target} flashsteps_commit)
    target_link_libraries(${bench_target} PRIVATE ${step_libs} flashsteps_reference benchmark::benchmark CLI11::CLI11)
    flashsteps_gpu_options(${bench_target})
    list(APPEND umbrella ${bench_target})
  endif()

  if(isa_cuda OR isa_hip)
    flashsteps_add_isa_check(${id} ${dir}/step.cu "${isa_cuda}" "${isa_hip}")
    list(APPEND umbrella isa_${id})
  endif()

  add_custom_target(step${short} DEPENDS ${umbrella})

  # The step's extras.
  if(EXISTS ${dir}/step.cmake)
    set(STEP_NUMBER ${number})
    set(STEP_SLUG ${slug})
    set(STEP_ID ${id})
    set(STEP_DIR ${dir})
    set(STEP_LIBRARY ${lib})
    set(STEP_TEST ${test_target})
    set(STEP_BENCH ${bench_target})
    set(STEP_TARGET step${short})
    include(${dir}/step.cmake)
  endif()
endfunction()

# flashsteps_write_registry(<file>): every registered step as JSON (format at the top).
function(flashsteps_write_registry file)
  get_property(numbers GLOBAL PROPERTY FLASHSTEPS_STEP_NUMBERS)
  set(steps "[]")
  set(i 0)
  set(built_list)
  foreach(number IN LISTS numbers)
    foreach(key SLUG BASE REASON REQUIRES TARGET EXTRAS)
      get_property(${key} GLOBAL PROPERTY FLASHSTEPS_STEP_${number}_${key})
    endforeach()
    set(entry "{}")
    string(JSON entry SET "${entry}" number "\"${number}\"")
    string(JSON entry SET "${entry}" slug "\"${SLUG}\"")
    string(JSON entry SET "${entry}" name "\"${number}_${SLUG}\"")
    string(JSON entry SET "${entry}" folder "\"steps/${number}_${SLUG}\"")
    if(BASE)
      string(JSON entry SET "${entry}" base "\"${BASE}\"")
    else()
      string(JSON entry SET "${entry}" base "null")
    endif()
    if(REASON)
      string(JSON entry SET "${entry}" built "false")
    else()
      string(JSON entry SET "${entry}" built "true")
      list(APPEND built_list ${number})
    endif()
    string(REPLACE "\\" "\\\\" REASON "${REASON}")
    string(REPLACE "\"" "\\\"" REASON "${REASON}")
    string(JSON entry SET "${entry}" reason "\"${REASON}\"")
    set(requires "[]")
    set(j 0)
    foreach(req IN LISTS REQUIRES)
      string(JSON requires SET "${requires}" ${j} "\"${req}\"")
      math(EXPR j "${j} + 1")
    endforeach()
    string(JSON entry SET "${entry}" requires "${requires}")
    string(JSON entry SET "${entry}" target "\"${TARGET}\"")
    if(EXTRAS)
      string(JSON entry SET "${entry}" extras "\"${EXTRAS}\"")
    else()
      string(JSON entry SET "${entry}" extras "null")
    endif()
    string(JSON steps SET "${steps}" ${i} "${entry}")
    math(EXPR i "${i} + 1")
  endforeach()
  set(json "{}")
  string(JSON json SET "${json}" version 1)
  string(JSON json SET "${json}" backend "\"${FLASHSTEPS_BACKEND}\"")
  string(JSON json SET "${json}" steps "${steps}")
  file(CONFIGURE OUTPUT ${file} CONTENT "${json}\n" @ONLY)  # rewritten only when it changes
  set_property(GLOBAL PROPERTY FLASHSTEPS_REGISTRY_WRITTEN TRUE)
  string(REPLACE ";" " " numbers "${numbers}")
  string(REPLACE ";" " " built_list "${built_list}")
  if(NOT built_list)
    set(built_list "none")
  endif()
  message(STATUS "Steps: ${numbers}; built here: ${built_list} (registry: ${file})")
  # A step folder nobody registered is most likely a forgotten add_step line.
  file(GLOB folders LIST_DIRECTORIES true RELATIVE ${CMAKE_SOURCE_DIR}/steps
       ${CMAKE_SOURCE_DIR}/steps/[0-9][0-9]_* ${CMAKE_SOURCE_DIR}/steps/[0-9][0-9][a-z]_*)
  get_property(names GLOBAL PROPERTY FLASHSTEPS_STEPS)
  foreach(folder IN LISTS folders)
    if(IS_DIRECTORY ${CMAKE_SOURCE_DIR}/steps/${folder} AND NOT folder IN_LIST names)
      message(WARNING "steps/${folder} has no add_step() line in CMakeLists.txt, so it is not built and not in the registry (steps.json)")
    endif()
  endforeach()
endfunction()
