// SPDX-License-Identifier: Apache-2.0
// coll/incin's MCA parameters that stand for INCIN_* settings: one per
// setting the component reads, named coll_incin_<name>, registered as
// strings so that their values go through the settings table's parser
// (mpi/config.h ParseConfig with overrides) exactly as the variables do. A
// parameter the user set (command line, OMPI_MCA_* environment, a
// parameter file) wins over the INCIN_* variable; one left at its default
// leaves the variable (or the table's default) in charge. docs/openmpi.md.
#pragma once

#ifdef __cplusplus
#include <string>
#include <vector>

namespace inc::ompi {

struct McaParam {
  const char* setting;  // the INCIN_ name in the settings table
  int level;            // ompi_info's level (1..9)
  std::string name;     // without "coll_incin_": the setting's name lowercased, without INCIN_ (and MPI_)
  std::string help;     // ompi_info's help text
  std::string def;      // what an unset setting means to coll/incin, as text ("" = none)
};

// Every such parameter, in ompi_info's order.
const std::vector<McaParam>& McaParams();

// The settings coll/incin reads that deliberately have no parameter, each
// with the reason (docs/openmpi.md "Parameters").
struct Unregistered {
  const char* setting;
  const char* why;
};
const std::vector<Unregistered>& UnregisteredSettings();

}  // namespace inc::ompi

extern "C" {
#endif

// For component.c, which registers them: the number of parameters and the
// i-th one's name (without "coll_incin_"), help, default text and level.
// The strings live as long as the process.
int incin_param_count(void);
const char* incin_param_name(int i);
const char* incin_param_help(int i);
const char* incin_param_default(int i);
int incin_param_level(int i);

#ifdef __cplusplus
}
#endif
