// SPDX-License-Identifier: Apache-2.0
// incinctl: operator CLI of incin's aggregation manager. The commands live in
// the inc_cli library (commands.h); this only hands them the process's
// arguments and streams.
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return inc::cli::Run(args, std::cout, std::cerr);
}
