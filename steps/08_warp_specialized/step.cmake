# SPDX-License-Identifier: Apache-2.0
# Step 08's extras, included by add_step() (cmake/FlashStepsSteps.cmake says which variables
# it sets): the host side of the Hopper vocabulary (the layout tests run with step 07's suite),
# and with -DFLASHSTEPS_TRACE=ON the timeline tool trace_step08.

# tile_sm90.h's host functions (TMA tensor maps, the sm_90 check): common/src/tile_sm90.cu.
target_link_libraries(${STEP_LIBRARY} PUBLIC flashsteps_sm90)

# trace_step08: the kernel with its trace calls compiled in; one block's phases as JSON (tools/timeline/).
flashsteps_add_trace_tool()
