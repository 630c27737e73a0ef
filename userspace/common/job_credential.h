// SPDX-License-Identifier: Apache-2.0
// Job credentials: what a job's launcher gets from the AM (an operator call)
// and hands to the job's ranks, so that only they can join the job's group.
// A credential is
//   incjob2:<64 hex digits>:<issued, unix ms>:<expires, unix ms>:<hosts>:<job id>
// with <hosts> the topology hosts whose member certificates may join with it
// ("h1,h2", or "*" for any host), and the hex digits HMAC-SHA256 under the
// AM's job secret of everything after them. The job id comes last, so that
// a launcher can pass one variable (INCIN_JOB_CREDENTIAL) and a client can
// tell a credential for another job before it dials. The AM refuses it once
// it expired, from another host, or when it was issued before an operator
// revoked the job's credentials. docs/operations.md "Job credentials".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace inc {

inline constexpr const char* kJobCredentialEnv = "INCIN_JOB_CREDENTIAL";

// What a credential says, in the clear (the MAC makes it unforgeable).
struct JobCredentialClaims {
  std::string job;
  uint64_t issued_ms = 0;
  uint64_t expires_ms = 0;
  std::vector<std::string> hosts;  // empty: any host
};

// The claims of a credential; INVALID_ARGUMENT when it is not of the form
// above (the message never repeats the secret part). A credential of the
// first format (incjob1:, without expiry or hosts) is refused by name.
Expected<JobCredentialClaims> ParseJobCredential(const std::string& credential);
// Its job id alone (what libinc compares with its own before dialling).
Expected<std::string> JobOfCredential(const std::string& credential);

// A host name that can stand in a credential's host list (no ',', ':', '*',
// white space or control characters, not empty); INVALID_ARGUMENT otherwise.
Status CheckCredentialHost(const std::string& host);

// The tenant a job belongs to: its id up to the first '/' ("acme/train-7"
// is tenant acme's); "" for an id without '/'. docs/operations.md "Job credentials".
std::string TenantOfJob(const std::string& job);

// Issues and checks credentials under one secret (at least 32 bytes).
class JobCredentials {
 public:
  static Expected<JobCredentials> FromSecret(std::string secret);
  // The secret from its 64-hex-digit spelling (a secret file's content).
  static Expected<JobCredentials> FromHex(const std::string& hex, const std::string& field);
  // 32 random bytes as 64 hex digits, for a new secret.
  static Expected<std::string> NewSecretHex();

  // INVALID_ARGUMENT for a host CheckCredentialHost refuses, an empty job or
  // an expiry not after the issue time.
  Expected<std::string> Issue(const JobCredentialClaims& claims) const;
  // What a member joining `job_id` from host `host` at `now_ms` presents.
  // OK when `credential` was issued under this secret for that job and host,
  // has not expired and was issued after `revoked_at_ms` (the job's last
  // revocation, 0: never revoked); PERMISSION_DENIED saying which part is
  // wrong otherwise.
  Status Verify(const std::string& job_id, const std::string& host, const std::string& credential,
                uint64_t now_ms, uint64_t revoked_at_ms) const;

 private:
  explicit JobCredentials(std::string secret) : secret_(std::move(secret)) {}
  std::string Mac(const std::string& signed_part) const;  // 64 hex digits

  std::string secret_;
};

}  // namespace inc
