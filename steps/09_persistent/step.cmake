# SPDX-License-Identifier: Apache-2.0
# Step 09's extras, included by add_step() (cmake/FlashStepsSteps.cmake says which variables
# it sets): the host side of the Hopper vocabulary, the tests of every shape of the space, and
# with -DFLASHSTEPS_TRACE=ON the timeline tool trace_step09.

# tile_sm90.h's host functions (TMA tensor maps, the sm_90 check): common/src/tile_sm90.cu.
target_link_libraries(${STEP_LIBRARY} PUBLIC flashsteps_sm90)

# Every shape of the space against the float64 reference, in test_step09.
if(STEP_TEST)
  flashsteps_gpu_sources(${STEP_TEST} ${CMAKE_SOURCE_DIR}/tests/step09_shapes_test.cu)
endif()

# trace_step09: the kernel with its trace calls compiled in; one block's phases as JSON (tools/timeline/).
flashsteps_add_trace_tool()

# The tuner (step 06's, common/src/tuner.cpp) chooses the shape of a call: tuned/*.json
# compiled in (generated/flashsteps/step09_tuned_tables.h), and tune_step09, which writes them.
flashsteps_add_tuner(HEADER shapes.h)
