// SPDX-License-Identifier: Apache-2.0
// main() of the CPU test binary: the reference runtime (Kokkos, host execution space) around GoogleTest.
#include <gtest/gtest.h>

#include "flashsteps/reference.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  flashsteps::reference::Runtime reference_runtime;
  return RUN_ALL_TESTS();
}
