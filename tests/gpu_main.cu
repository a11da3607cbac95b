// SPDX-License-Identifier: Apache-2.0
// main() of every step's GPU test binary: the reference runtime (Kokkos) around GoogleTest.
// Listing tests (--gtest_list_tests, used by ctest discovery) never touches the device.
#include <gtest/gtest.h>

#include "flashsteps/reference.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flashsteps::reference::Runtime reference_runtime;
  return RUN_ALL_TESTS();
}
