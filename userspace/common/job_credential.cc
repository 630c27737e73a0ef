// SPDX-License-Identifier: Apache-2.0
#include "common/job_credential.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>

namespace inc {
namespace {

constexpr const char* kPrefix = "incjob1:";
constexpr size_t kPrefixLen = 8;
constexpr size_t kMacHexLen = 64;
constexpr size_t kSecretBytes = 32;

std::string Hex(const unsigned char* data, size_t len) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (size_t i = 0; i < len; i++) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 15]);
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Expected<std::string> JobOfCredential(const std::string& credential) {
  const std::string bad = "a job credential is incjob1:<64 hex digits>:<job id>";
  if (credential.compare(0, kPrefixLen, kPrefix) != 0)
    return InvalidArgument(bad + " (it does not start with incjob1:)");
  if (credential.size() < kPrefixLen + kMacHexLen + 2 || credential[kPrefixLen + kMacHexLen] != ':')
    return InvalidArgument(bad + " (wrong length or layout)");
  for (size_t i = kPrefixLen; i < kPrefixLen + kMacHexLen; i++)
    if (HexDigit(credential[i]) < 0) return InvalidArgument(bad + " (not hex digits)");
  return credential.substr(kPrefixLen + kMacHexLen + 1);
}

Expected<JobCredentials> JobCredentials::FromSecret(std::string secret) {
  if (secret.size() < kSecretBytes)
    return InvalidArgument("a job secret needs at least " + std::to_string(kSecretBytes) + " bytes");
  return JobCredentials(std::move(secret));
}

Expected<JobCredentials> JobCredentials::FromHex(const std::string& hex, const std::string& field) {
  if (hex.size() != 2 * kSecretBytes)
    return InvalidArgument(field + ": a job secret is " + std::to_string(2 * kSecretBytes) +
                           " hex digits, got " + std::to_string(hex.size()) + " characters");
  std::string secret;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument(field + ": a job secret is hex digits only");
    secret.push_back(static_cast<char>(hi << 4 | lo));
  }
  return JobCredentials(std::move(secret));
}

Expected<std::string> JobCredentials::NewSecretHex() {
  unsigned char bytes[kSecretBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Internal("no random bytes for a job secret (RAND_bytes)");
  return Hex(bytes, sizeof(bytes));
}

std::string JobCredentials::Mac(const std::string& job_id) const {
  // Domain-separated, so the secret's MACs are good for nothing else.
  const std::string message = std::string("incin job credential v1") + '\0' + job_id;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return Hex(mac, len);
}

std::string JobCredentials::Issue(const std::string& job_id) const {
  return kPrefix + Mac(job_id) + ":" + job_id;
}

Status JobCredentials::Verify(const std::string& job_id, const std::string& credential) const {
  if (credential.empty())
    return PermissionDenied("JoinGroup for job '" + job_id +
                            "' needs the job's credential (INCIN_JOB_CREDENTIAL; a launcher gets it with "
                            "`incinctl job credential " +
                            job_id + "`)");
  auto job = JobOfCredential(credential);
  if (!job) return PermissionDenied(job.status().message());
  if (*job != job_id)
    return PermissionDenied("the job credential is for job '" + *job + "', not '" + job_id + "'");
  const std::string want = Mac(job_id);
  std::string got = credential.substr(kPrefixLen, kMacHexLen);
  for (char& c : got) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (CRYPTO_memcmp(want.data(), got.data(), kMacHexLen) != 0)
    return PermissionDenied("the job credential for job '" + job_id +
                            "' was not issued by this AM (or its job secret changed since)");
  return Status::Ok();
}

}  // namespace inc
