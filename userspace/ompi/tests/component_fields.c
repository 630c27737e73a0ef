// SPDX-License-Identifier: Apache-2.0
// Reads the fields of a coll component (as Open MPI's headers lay it out)
// into a plain struct for the C++ test, which does not include them.
#include "component_fields.h"

#include <stdio.h>
#include <string.h>

#include "ompi/mca/coll/coll.h"
#include "ompi_config.h"

void incin_read_component_fields(const void* component, struct incin_component_fields* out) {
  const mca_coll_base_component_2_0_0_t* c = (const mca_coll_base_component_2_0_0_t*)component;
  memset(out, 0, sizeof(*out));
  out->base_major = c->collm_version.mca_major_version;
  out->base_minor = c->collm_version.mca_minor_version;
  out->base_release = c->collm_version.mca_release_version;
  snprintf(out->project, sizeof(out->project), "%s", c->collm_version.mca_project_name);
  out->project_major = c->collm_version.mca_project_major_version;
  out->project_minor = c->collm_version.mca_project_minor_version;
  snprintf(out->type, sizeof(out->type), "%s", c->collm_version.mca_type_name);
  out->type_major = c->collm_version.mca_type_major_version;
  out->type_minor = c->collm_version.mca_type_minor_version;
  out->type_release = c->collm_version.mca_type_release_version;
  snprintf(out->name, sizeof(out->name), "%s", c->collm_version.mca_component_name);
  out->has_register = c->collm_version.mca_register_component_params != NULL;
  out->has_close = c->collm_version.mca_close_component != NULL;
  out->has_init_query = c->collm_init_query != NULL;
  out->has_comm_query = c->collm_comm_query != NULL;
  out->expect_base_major = MCA_BASE_VERSION_MAJOR;
  out->expect_base_minor = MCA_BASE_VERSION_MINOR;
  out->expect_project_major = OMPI_MAJOR_VERSION;
  out->expect_project_minor = OMPI_MINOR_VERSION;
}
