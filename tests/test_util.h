// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the CPU and GPU test suites.
#pragma once

#include <cctype>
#include <ostream>
#include <string>

#include "flashsteps/problem.h"

namespace flashsteps::testing {

/// GoogleTest parameter names allow letters, digits and '_' only.
inline std::string test_name(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

}  // namespace flashsteps::testing

namespace flashsteps {
/// GoogleTest prints a Problem parameter by its name.
inline void PrintTo(const Problem& p, std::ostream* os) { *os << p.name(); }
}  // namespace flashsteps
