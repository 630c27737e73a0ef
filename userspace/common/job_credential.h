// SPDX-License-Identifier: Apache-2.0
// Job credentials: what a job's launcher gets from the AM (an operator call)
// and hands to the job's ranks, so that only they can join the job's group.
// A credential is "incjob1:<64 hex digits>:<job id>": HMAC-SHA256 under the
// AM's job secret of the job id, followed by the job id it is good for, so
// that a launcher can pass one variable (INCIN_JOB_CREDENTIAL) and a client
// can tell a credential for another job before it dials. docs/operations.md
// "Job credentials".
#pragma once

#include <string>

#include "common/status.h"

namespace inc {

inline constexpr const char* kJobCredentialEnv = "INCIN_JOB_CREDENTIAL";

// The job id a credential names; INVALID_ARGUMENT when it is not of the
// form above (the message never repeats the secret part).
Expected<std::string> JobOfCredential(const std::string& credential);

// Issues and checks credentials under one secret (at least 32 bytes).
class JobCredentials {
 public:
  static Expected<JobCredentials> FromSecret(std::string secret);
  // The secret from its 64-hex-digit spelling (a secret file's content).
  static Expected<JobCredentials> FromHex(const std::string& hex, const std::string& field);
  // 32 random bytes as 64 hex digits, for a new secret.
  static Expected<std::string> NewSecretHex();

  std::string Issue(const std::string& job_id) const;
  // OK when `credential` was issued for `job_id` under this secret;
  // PERMISSION_DENIED saying which part is wrong otherwise.
  Status Verify(const std::string& job_id, const std::string& credential) const;

 private:
  explicit JobCredentials(std::string secret) : secret_(std::move(secret)) {}
  std::string Mac(const std::string& job_id) const;  // 64 hex digits

  std::string secret_;
};

}  // namespace inc
