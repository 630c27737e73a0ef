// SPDX-License-Identifier: Apache-2.0
// Job credentials as JoinGroup carries them (common/job_credential.cc
// ParseJobCredential, JobCredentials::Verify): input "JOB\nCREDENTIAL".
// Invariants: a credential issued for the input's job id names that job and
// verifies (from a listed host, before it expires, unrevoked) and nowhere
// else; the input's own credential verifies only if its MAC is the one its
// claims get under the secret, and then its claims hold (job, host, time);
// every refusal is PERMISSION_DENIED.
#include <algorithm>
#include <string>

#include "common/job_credential.h"
#include "fuzz_check.h"

namespace {

const inc::JobCredentials& Credentials() {
  static const inc::JobCredentials c = *inc::JobCredentials::FromHex(std::string(64, 'f'), "fuzz");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string job = input.substr(0, newline);
  const std::string credential = newline == std::string::npos ? "" : input.substr(newline + 1);

  inc::JobCredentialClaims claims;
  claims.job = job;
  claims.issued_ms = 1000;
  claims.expires_ms = 5000;
  claims.hosts = {"h0", "h1"};
  auto issued = Credentials().Issue(claims);
  FUZZ_CHECK(issued.ok() == !job.empty());
  if (issued.ok()) {
    auto named = inc::ParseJobCredential(*issued);
    FUZZ_CHECK(named.ok() && named->job == job && named->hosts == claims.hosts);
    FUZZ_CHECK(Credentials().Verify(job, "h1", *issued, 2000, 0).ok());
    FUZZ_CHECK(!Credentials().Verify(job, "h2", *issued, 2000, 0).ok());
    FUZZ_CHECK(!Credentials().Verify(job, "h1", *issued, 5000, 0).ok());
    FUZZ_CHECK(!Credentials().Verify(job, "h1", *issued, 2000, 1000).ok());
    FUZZ_CHECK(Credentials().Verify(job, "h1", *issued, 2000, 999).ok());
  }

  inc::Status verdict = Credentials().Verify(job, "h0", credential, 2000, 0);
  auto of = inc::ParseJobCredential(credential);
  if (verdict.ok()) {
    FUZZ_CHECK(of.ok() && of->job == job && of->expires_ms > 2000);
    FUZZ_CHECK(of->hosts.empty() || of->hosts[0] == "h0" ||
               std::find(of->hosts.begin(), of->hosts.end(), "h0") != of->hosts.end());
    // Re-issuing its claims gives it back, up to the case of its hex digits.
    auto again = Credentials().Issue(*of);
    FUZZ_CHECK(again.ok() && again->size() == credential.size());
  } else {
    FUZZ_CHECK(verdict.code() == inc::Code::kPermissionDenied);
  }
  return 0;
}
