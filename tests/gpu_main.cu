// SPDX-License-Identifier: Apache-2.0
// main() of every step's GPU test binary: Kokkos (for the reference) around GoogleTest.
// Listing tests (--gtest_list_tests, used by ctest discovery) never touches the device.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  return RUN_ALL_TESTS();
}
