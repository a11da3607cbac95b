# SPDX-License-Identifier: Apache-2.0
# Step 06's extras, included by add_step() (cmake/FlashStepsSteps.cmake says which variables
# it sets): the tuner's wiring, the tuned tables compiled in, tune_step06, the tests of the whole space.

# Step 06's shapes and its tuner (the shared one, common/src/tuner.cpp, given step 06's space).
flashsteps_gpu_sources(${STEP_LIBRARY} ${STEP_DIR}/tuner.cpp)
# tuned/*.json compiled in (generated/flashsteps/step06_tuned_tables.h), and tune_step06:
# the tuner over the standard set, which writes the tables of tuned/. Built by `make step6`.
flashsteps_add_tuner(HEADER tuner.h)

# Every configuration of the space against the float64 reference, and the shared tuner on a
# made-up space (tests/tuner_test.cu), in test_step06.
if(STEP_TEST)
  flashsteps_gpu_sources(${STEP_TEST} ${CMAKE_SOURCE_DIR}/tests/step06_configs_test.cu ${CMAKE_SOURCE_DIR}/tests/tuner_test.cu)
endif()
