// SPDX-License-Identifier: Apache-2.0
// mca_coll_incin.so as Open MPI's component loader sees it: it loads with
// dlopen, exports mca_coll_incin_component with the version fields of
// Open MPI's coll framework 2.0.0 (else the loader skips it), and exports
// nothing else; libinc comes from libinc.so.0, not from a copy inside it.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "component_fields.h"

namespace {

// Loaded once and kept, as Open MPI does until MPI_Finalize: libinc's
// generated protobuf descriptors register with the shared libprotobuf at
// load, and a second load after an unload would register them twice.
class Component : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { handle_ = dlopen(INCIN_COMPONENT_PATH, RTLD_NOW | RTLD_LOCAL); }
  void SetUp() override { ASSERT_NE(handle_, nullptr) << dlerror(); }
  static void* handle_;
};
void* Component::handle_ = nullptr;

TEST_F(Component, FileNameHasNoLibPrefix) {
  std::string path = INCIN_COMPONENT_PATH;
  EXPECT_EQ(path.substr(path.rfind('/') + 1), "mca_coll_incin.so");
}

TEST_F(Component, ExportsCollComponentWithFrameworkVersion) {
  void* sym = dlsym(handle_, "mca_coll_incin_component");
  ASSERT_NE(sym, nullptr) << dlerror();
  incin_component_fields f;
  incin_read_component_fields(sym, &f);
  EXPECT_EQ(f.base_major, f.expect_base_major);
  EXPECT_EQ(f.base_minor, f.expect_base_minor);
  EXPECT_STREQ(f.project, "ompi");
  EXPECT_EQ(f.project_major, f.expect_project_major);
  EXPECT_EQ(f.project_minor, f.expect_project_minor);
  EXPECT_STREQ(f.type, "coll");
  EXPECT_EQ(f.type_major, 2);
  EXPECT_EQ(f.type_minor, 0);
  EXPECT_EQ(f.type_release, 0);
  EXPECT_STREQ(f.name, "incin");
  EXPECT_TRUE(f.has_register);
  EXPECT_TRUE(f.has_close);
  EXPECT_TRUE(f.has_init_query);
  EXPECT_TRUE(f.has_comm_query);
}

TEST_F(Component, ExportsNothingElse) {
  for (const char* name : {"incin_allreduce", "incin_prev_allreduce", "incin_shutdown", "incin_comm_new"}) {
    EXPECT_EQ(dlsym(handle_, name), nullptr) << name << " is exported";
  }
  // libinc's C++ API comes from libinc.so.0, which the component links (and
  // dlsym searches too), not from a copy inside the component.
  void* create = dlsym(handle_, "_ZN3inc6client12Communicator6CreateERKNS0_19CommunicatorOptionsE");
  ASSERT_NE(create, nullptr);
  Dl_info where{};
  ASSERT_NE(dladdr(create, &where), 0);
  const std::string file = where.dli_fname;
  EXPECT_EQ(file.substr(file.rfind('/') + 1), "libinc.so.0")
      << "libinc's Communicator::Create is defined in " << file;
}

}  // namespace
