// SPDX-License-Identifier: Apache-2.0
// Job credentials as JoinGroup carries them (common/job_credential.cc
// JobOfCredential, JobCredentials::Verify): input "JOB\nCREDENTIAL".
// Invariants: a credential issued for the input's job id names that job and
// verifies; the input's own credential verifies only if it is exactly the
// one issued for its job id; a credential that names a job names what
// follows the 73-character header.
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

  const std::string issued = Credentials().Issue(job);
  auto named = inc::JobOfCredential(issued);
  FUZZ_CHECK(named.ok() == !job.empty());
  if (named.ok()) {
    FUZZ_CHECK(*named == job);
    FUZZ_CHECK(Credentials().Verify(job, issued).ok());
  }

  inc::Status verdict = Credentials().Verify(job, credential);
  if (verdict.ok()) {
    // Only the issued one, up to the case of its hex digits.
    FUZZ_CHECK(credential.size() == issued.size());
    FUZZ_CHECK(credential.substr(73) == job);
  } else {
    FUZZ_CHECK(verdict.code() == inc::Code::kPermissionDenied);
  }
  auto of = inc::JobOfCredential(credential);
  if (of.ok()) FUZZ_CHECK(*of == credential.substr(73));
  return 0;
}
