# SPDX-License-Identifier: Apache-2.0
# Step 07's extras, included by add_step() (cmake/FlashStepsSteps.cmake says which variables
# it sets): the host side of the Hopper vocabulary, and its layout tests.

# tile_sm90.h's host functions (TMA tensor maps, the sm_90 check): common/src/tile_sm90.cu.
target_link_libraries(${STEP_LIBRARY} PUBLIC flashsteps_sm90)

# The swizzle and descriptor encodings against hand-computed addresses (no GPU needed).
if(STEP_TEST)
  flashsteps_gpu_sources(${STEP_TEST} ${CMAKE_SOURCE_DIR}/tests/sm90_layout_test.cu)
endif()
