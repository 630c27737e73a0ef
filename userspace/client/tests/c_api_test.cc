// SPDX-License-Identifier: Apache-2.0
// libinc's C API (include/inc/inc.h) as a C caller sees it, linked against
// libinc.so.0 only: defaults, argument checks with their status codes and
// messages, status names, the per-thread last error, the version. Joining a
// real group runs in lab.packages (the installed library and example).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "inc/inc.h"

namespace {

TEST(CApi, ConfigInitSetsStructSizeAndDefaults) {
  inc_comm_config c;
  std::memset(&c, 0xAB, sizeof(c));
  inc_comm_config_init(&c);
  EXPECT_EQ(c.struct_size, sizeof(inc_comm_config));
  EXPECT_EQ(c.am_address, nullptr);
  EXPECT_EQ(c.job_id, nullptr);
  EXPECT_EQ(c.job_credential, nullptr);
  EXPECT_EQ(c.transport, nullptr);
  EXPECT_EQ(c.rank, 0u);
  EXPECT_EQ(c.world_size, 0u);
  EXPECT_EQ(c.join_timeout_ms, 0u);
  inc_comm_config_init(nullptr);  // no crash
}

struct BadCreate {
  const char* name;
  void (*edit)(inc_comm_config*);
  inc_status want;
  const char* message_has;
};

TEST(CApi, CreateRejectsBadConfigsWithCodeAndReason) {
  const BadCreate cases[] = {
      {.name = "uninitialised struct_size",
       .edit = [](inc_comm_config* c) { c->struct_size = 0; },
       .want = INC_INVALID_ARGUMENT,
       .message_has = "inc_comm_config_init"},
      {.name = "no AM address",
       .edit = [](inc_comm_config* c) { c->am_address = nullptr; },
       .want = INC_INVALID_ARGUMENT,
       .message_has = "am_address is required"},
      {.name = "no job",
       .edit = [](inc_comm_config* c) { c->job_id = nullptr; },
       .want = INC_INVALID_ARGUMENT,
       .message_has = "job_id is required"},
      {.name = "credential of another job",
       .edit =
           [](inc_comm_config* c) {
             static const std::string other = "incjob2:" + std::string(64, '0') + ":1:2:*:other-job";
             c->job_credential = other.c_str();
           },
       .want = INC_INVALID_ARGUMENT,
       .message_has = "other-job"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    inc_comm_config c;
    inc_comm_config_init(&c);
    c.am_address = "127.0.0.1:1";
    c.job_id = "job";
    c.world_size = 1;
    c.iface = "lo";
    k.edit(&c);
    inc_comm* comm = reinterpret_cast<inc_comm*>(0x1);
    EXPECT_EQ(inc_comm_create(&c, &comm), k.want);
    EXPECT_EQ(comm, nullptr) << "a failed create must leave *comm NULL";
    EXPECT_NE(std::string(inc_last_error()).find(k.message_has), std::string::npos) << inc_last_error();
  }
}

TEST(CApi, NullArgumentsAreInvalidNotCrashes) {
  inc_comm_config c;
  inc_comm_config_init(&c);
  EXPECT_EQ(inc_comm_create(&c, nullptr), INC_INVALID_ARGUMENT);
  inc_comm* comm = nullptr;
  EXPECT_EQ(inc_comm_create(nullptr, &comm), INC_INVALID_ARGUMENT);
  int32_t x = 1;
  EXPECT_EQ(inc_allreduce(nullptr, &x, &x, 1, INC_INT32, INC_SUM), INC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(inc_last_error()).find("inc_allreduce: no communicator"), std::string::npos);
  EXPECT_EQ(inc_reduce(nullptr, &x, &x, 1, INC_INT32, INC_SUM, 0), INC_INVALID_ARGUMENT);
  EXPECT_EQ(inc_broadcast(nullptr, &x, 1, INC_INT32, 0), INC_INVALID_ARGUMENT);
  EXPECT_EQ(inc_barrier(nullptr), INC_INVALID_ARGUMENT);
  EXPECT_EQ(inc_allgather(nullptr, &x, &x, 1, INC_INT32), INC_INVALID_ARGUMENT);
  EXPECT_EQ(inc_reduce_scatter(nullptr, &x, &x, 1, INC_INT32, INC_SUM), INC_INVALID_ARGUMENT);
  EXPECT_EQ(inc_comm_rank(nullptr), 0u);
  EXPECT_EQ(inc_comm_size(nullptr), 0u);
  inc_comm_destroy(nullptr);
}

TEST(CApi, StatusNamesAreGrpcCodeNames) {
  EXPECT_STREQ(inc_status_name(INC_OK), "OK");
  EXPECT_STREQ(inc_status_name(INC_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(inc_status_name(INC_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(inc_status_name(INC_UNAVAILABLE), "UNAVAILABLE");
  EXPECT_STREQ(inc_status_name(INC_UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_STREQ(inc_status_name(static_cast<inc_status>(99)), "UNKNOWN");
  EXPECT_STREQ(inc_status_name(static_cast<inc_status>(-1)), "UNKNOWN");
}

TEST(CApi, LastErrorBelongsToTheThreadThatFailed) {
  inc_comm_config c;
  inc_comm_config_init(&c);
  c.job_id = "job";
  inc_comm* comm = nullptr;
  ASSERT_EQ(inc_comm_create(&c, &comm), INC_INVALID_ARGUMENT);
  const std::string mine = inc_last_error();
  std::string theirs;
  std::thread other([&] {
    theirs = inc_last_error();  // nothing failed on this thread yet
    (void)inc_barrier(nullptr);
  });
  other.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(inc_last_error(), mine) << "another thread's failure must not overwrite this thread's error";
}

// Front ends without a job id join as the job their launcher's credential
// names; they ask libinc's parser rather than splitting the text themselves.
TEST(CApi, CredentialJobIsTheJobTheCredentialNames) {
  const std::string mac(64, 'a');
  struct Case {
    const char* name;
    std::string credential;
    inc_status want;
    const char* job;
  };
  const Case cases[] = {
      {"any host", "incjob2:" + mac + ":1000:2000:*:train-7", INC_OK, "train-7"},
      {"a job id with colons", "incjob2:" + mac + ":1000:2000:w0,w1:tenant/a:b", INC_OK, "tenant/a:b"},
      {"the old format", "incjob1:" + mac + ":train-7", INC_INVALID_ARGUMENT, nullptr},
      {"no credential", "train-7", INC_INVALID_ARGUMENT, nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const char* job = nullptr;
    ASSERT_EQ(inc_credential_job(c.credential.c_str(), &job), c.want) << inc_last_error();
    if (c.job) {
      EXPECT_STREQ(job, c.job);
    }
  }
  const char* job = nullptr;
  EXPECT_EQ(inc_credential_job(nullptr, &job), INC_INVALID_ARGUMENT);
}

TEST(CApi, VersionIsTheProjectVersion) {
  EXPECT_STREQ(inc_version(), INC_PROJECT_VERSION);
  EXPECT_EQ(INC_API_VERSION, 1);
}

}  // namespace
