// SPDX-License-Identifier: Apache-2.0
// Job credentials: issued for one job id under the AM's secret, with an
// expiry and the hosts that may join with them; every other job id, secret,
// host, time, revoked one, tampered digit or malformed spelling is refused
// with a message that says which.
#include "common/job_credential.h"

#include <gtest/gtest.h>

namespace inc {
namespace {

const std::string kSecretHex(64, 'a');
constexpr uint64_t kIssued = 1'700'000'000'000;
constexpr uint64_t kExpires = kIssued + 3'600'000;

JobCredentials Credentials(const std::string& hex = kSecretHex) {
  auto c = JobCredentials::FromHex(hex, "job_secret_file");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

std::string Issue(const JobCredentials& creds, const std::string& job, std::vector<std::string> hosts = {},
                  uint64_t issued = kIssued, uint64_t expires = kExpires) {
  auto c = creds.Issue({job, issued, expires, std::move(hosts)});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : "";
}

TEST(JobCredential, SaysItsJobTimesAndHostsInTheClear) {
  const JobCredentials creds = Credentials();
  const std::string cred = Issue(creds, "train-7:epoch/2", {"w0", "w1"});
  EXPECT_EQ(cred.rfind("incjob2:", 0), 0u) << cred;
  EXPECT_EQ(cred.substr(72), ":1700000000000:1700003600000:w0,w1:train-7:epoch/2");
  auto claims = ParseJobCredential(cred);
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  EXPECT_EQ(claims->job, "train-7:epoch/2");  // a job id may hold ':' and '/'
  EXPECT_EQ(claims->issued_ms, kIssued);
  EXPECT_EQ(claims->expires_ms, kExpires);
  EXPECT_EQ(claims->hosts, (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(*JobOfCredential(cred), "train-7:epoch/2");
  EXPECT_TRUE(creds.Verify("train-7:epoch/2", "w1", cred, kIssued + 1, 0).ok());
  auto any = ParseJobCredential(Issue(creds, "j"));
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->hosts.empty());  // "*": any host
}

TEST(JobCredential, EveryWrongCredentialIsRefusedSayingWhy) {
  const JobCredentials creds = Credentials();
  const std::string good = Issue(creds, "jobA", {"w0", "w1"});
  std::string tampered = good;
  tampered[10] = tampered[10] == '0' ? '1' : '0';
  std::string upper = good;
  for (size_t i = 8; i < 72; i++)
    upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
  std::string longer = good;  // the expiry pushed out by hand
  longer.replace(longer.find(":1700003600000:"), 15, ":1800003600000:");
  std::string zero = good;  // the same claims spelled otherwise
  zero.replace(zero.find(":1700000000000:"), 15, ":01700000000000:");
  std::string more_hosts = good;
  more_hosts.replace(more_hosts.find(":w0,w1:"), 7, ":w0,w1,w2:");
  struct Case {
    const char* name;
    std::string job;
    std::string host;
    std::string credential;
    uint64_t now;
    uint64_t revoked;
    bool ok;
    std::string words;  // in the message
  };
  const uint64_t in_time = kIssued + 1000;
  const Case cases[] = {
      {"the right one", "jobA", "w0", good, in_time, 0, true, ""},
      {"hex digits in capitals", "jobA", "w1", upper, in_time, 0, true, ""},
      {"revoked before it was issued", "jobA", "w0", good, in_time, kIssued - 1, true, ""},
      {"none", "jobA", "w0", "", in_time, 0, false, "needs the job's credential (INCIN_JOB_CREDENTIAL"},
      {"another job's", "jobB", "w0", good, in_time, 0, false, "is for job 'jobA', not 'jobB'"},
      {"another job's, relabelled", "jobB", "w0", good.substr(0, good.size() - 4) + "jobB", in_time, 0, false,
       "was not issued by this AM"},
      {"one digit changed", "jobA", "w0", tampered, in_time, 0, false, "was not issued by this AM"},
      {"expiry pushed out", "jobA", "w0", longer, kExpires + 5000, 0, false, "was not issued by this AM"},
      {"a host added", "jobA", "w2", more_hosts, in_time, 0, false, "was not issued by this AM"},
      {"a time with a leading zero", "jobA", "w0", zero, in_time, 0, false, "was not issued by this AM"},
      {"another AM's secret", "jobA", "w0", Issue(Credentials(std::string(64, 'b')), "jobA"), in_time, 0,
       false, "was not issued by this AM"},
      {"expired", "jobA", "w0", good, kExpires + 5000, 0, false, "expired 5 s ago"},
      {"at its expiry", "jobA", "w0", good, kExpires, 0, false, "expired 0 s ago"},
      {"revoked after it was issued", "jobA", "w0", good, in_time, kIssued, false, "was revoked"},
      {"from another host", "jobA", "w3", good, in_time, 0, false, "is for hosts w0,w1, not for host 'w3'"},
      {"old format", "jobA", "w0", "incjob1:" + std::string(64, 'a') + ":jobA", in_time, 0, false,
       "old format incjob1 (no expiry, no hosts), which is no longer accepted"},
      {"not a credential", "jobA", "w0", "hunter2", in_time, 0, false, "does not start with incjob2:"},
      {"short", "jobA", "w0", "incjob2:abc:jobA", in_time, 0, false, "wrong length or layout"},
      {"no hosts field", "jobA", "w0", good.substr(0, 72) + ":1:2:jobA", in_time, 0, false,
       "wrong length or layout"},
      {"no job id", "jobA", "w0", good.substr(0, good.size() - 4), in_time, 0, false, "no job id"},
      {"times not numbers", "jobA", "w0", good.substr(0, 72) + ":x:2:*:jobA", in_time, 0, false,
       "the times are not numbers"},
      {"an empty host", "jobA", "w0", good.substr(0, 72) + ":1:2:w0,:jobA", in_time, 0, false,
       "a host name in a job credential is empty"},
      {"not hex", "jobA", "w0", "incjob2:" + std::string(64, 'g') + ":1:2:*:jobA", in_time, 0, false,
       "not hex digits"},
  };
  for (const Case& c : cases) {
    Status st = creds.Verify(c.job, c.host, c.credential, c.now, c.revoked);
    EXPECT_EQ(st.ok(), c.ok) << c.name << ": " << st.ToString();
    if (c.ok) continue;
    EXPECT_EQ(st.code(), Code::kPermissionDenied) << c.name;
    EXPECT_NE(st.message().find(c.words), std::string::npos) << c.name << ": " << st.message();
    // The secret part is never repeated.
    if (c.credential.size() > 72) {
      EXPECT_EQ(st.message().find(c.credential.substr(8, 64)), std::string::npos) << c.name;
    }
  }
}

TEST(JobCredential, IssuingRefusesWhatCouldNotBeReadBack) {
  const JobCredentials creds = Credentials();
  EXPECT_EQ(creds.Issue({"", kIssued, kExpires, {}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(creds.Issue({"j", kIssued, kIssued, {}}).status().code(), Code::kInvalidArgument);
  for (const char* host : {"", "a,b", "a:b", "*", "a b", "a\nb"}) {
    auto c = creds.Issue({"j", kIssued, kExpires, {host}});
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << host;
  }
}

TEST(JobCredential, TenantIsTheJobIdUpToTheFirstSlash) {
  EXPECT_EQ(TenantOfJob("acme/train-7"), "acme");
  EXPECT_EQ(TenantOfJob("acme/a/b"), "acme");
  EXPECT_EQ(TenantOfJob("train-7"), "");
  EXPECT_EQ(TenantOfJob("/x"), "");
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
