// SPDX-License-Identifier: Apache-2.0
// The fields of a coll component that the unit test checks, and what the
// installed Open MPI headers expect of them.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

struct incin_component_fields {
  int base_major, base_minor, base_release;
  char project[32];
  int project_major, project_minor;
  char type[32];
  int type_major, type_minor, type_release;
  char name[64];
  int has_register, has_close, has_init_query, has_comm_query;
  int expect_base_major, expect_base_minor, expect_project_major, expect_project_minor;
};

void incin_read_component_fields(const void* component, struct incin_component_fields* out);

#ifdef __cplusplus
}
#endif
