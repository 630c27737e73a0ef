// SPDX-License-Identifier: Apache-2.0
// Job credentials: issued for one job id under the AM's secret; every other
// job id, secret, tampered digit or malformed spelling is refused with a
// message that says which.
#include "common/job_credential.h"

#include <gtest/gtest.h>

namespace inc {
namespace {

const std::string kSecretHex(64, 'a');

JobCredentials Credentials(const std::string& hex = kSecretHex) {
  auto c = JobCredentials::FromHex(hex, "job_secret_file");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TEST(JobCredential, IssuedForAJobItNamesItAndVerifiesForItOnly) {
  const JobCredentials creds = Credentials();
  const std::string cred = creds.Issue("train-7:epoch/2");
  EXPECT_EQ(cred.rfind("incjob1:", 0), 0u) << cred;
  auto job = JobOfCredential(cred);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(*job, "train-7:epoch/2");  // a job id may hold ':' and '/'
  EXPECT_TRUE(creds.Verify("train-7:epoch/2", cred).ok());
}

TEST(JobCredential, EveryWrongCredentialIsRefusedSayingWhy) {
  const JobCredentials creds = Credentials();
  const std::string good = creds.Issue("jobA");
  std::string tampered = good;
  tampered[10] = tampered[10] == '0' ? '1' : '0';
  std::string upper = good;
  for (size_t i = 8; i < 72; i++)
    upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  struct Case {
    const char* name;
    std::string job;
    std::string credential;
    bool ok;
    std::string words;  // in the message
  };
  const Case cases[] = {
      {"the right one", "jobA", good, true, ""},
      {"hex digits in capitals", "jobA", upper, true, ""},
      {"none", "jobA", "", false, "needs the job's credential (INCIN_JOB_CREDENTIAL"},
      {"another job's", "jobB", good, false, "is for job 'jobA', not 'jobB'"},
      {"another job's, relabelled", "jobB", good.substr(0, 73) + "jobB", false, "was not issued by this AM"},
      {"one digit changed", "jobA", tampered, false, "was not issued by this AM"},
      {"another AM's secret", "jobA", Credentials(std::string(64, 'b')).Issue("jobA"), false,
       "was not issued by this AM"},
      {"not a credential", "jobA", "hunter2", false, "does not start with incjob1:"},
      {"short", "jobA", "incjob1:abc:jobA", false, "wrong length or layout"},
      {"no job id", "jobA", good.substr(0, 73), false, "wrong length or layout"},
      {"not hex", "jobA", "incjob1:" + std::string(64, 'g') + ":jobA", false, "not hex digits"},
  };
  for (const Case& c : cases) {
    Status st = creds.Verify(c.job, c.credential);
    EXPECT_EQ(st.ok(), c.ok) << c.name << ": " << st.ToString();
    if (c.ok) continue;
    EXPECT_EQ(st.code(), Code::kPermissionDenied) << c.name;
    EXPECT_NE(st.message().find(c.words), std::string::npos) << c.name << ": " << st.message();
  }
}

TEST(JobCredential, SecretsAreSixtyFourHexDigitsAndNewOnesDiffer) {
  EXPECT_EQ(JobCredentials::FromHex(std::string(63, 'a'), "job_secret_file").status().code(),
            Code::kInvalidArgument);
  auto bad = JobCredentials::FromHex(std::string(64, 'z'), "job_secret_file");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("job_secret_file"), std::string::npos) << bad.status().message();
  EXPECT_EQ(JobCredentials::FromSecret("short").status().code(), Code::kInvalidArgument);
  auto a = JobCredentials::NewSecretHex(), b = JobCredentials::NewSecretHex();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 64u);
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(JobCredentials::FromHex(*a, "x").ok());
}

}  // namespace
}  // namespace inc
