# SPDX-License-Identifier: Apache-2.0
# Step 10's extras, included by add_step() (cmake/FlashStepsSteps.cmake says which variables
# it sets): its own tests beside the shared conformance suite.

# The plan (split count, workspace; CPU, no GPU needed) and the split-KV matrix against the
# float64 reference (forced split counts, decode shapes, GQA ratios), in test_step10.
if(STEP_TEST)
  flashsteps_gpu_sources(${STEP_TEST} ${CMAKE_SOURCE_DIR}/tests/step10_split_kv_test.cu)
endif()

# The benchmark records the split count of each call (counters num_splits, heuristic_splits)
# and takes --split-sweep: bench/bench_attention.cu includes splits.h (found through the step
# library's include folder) under this definition.
if(STEP_BENCH)
  target_compile_definitions(${STEP_BENCH} PRIVATE FLASHSTEPS_BENCH_SPLIT_KV)
endif()
