// SPDX-License-Identifier: Apache-2.0
#include "common/job_credential.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>
#include <charconv>

namespace inc {
namespace {

constexpr const char* kPrefix = "incjob2:";
constexpr size_t kPrefixLen = 8;
constexpr size_t kMacHexLen = 64;
constexpr size_t kSecretBytes = 32;
constexpr const char* kLayout = "incjob2:<64 hex digits>:<issued ms>:<expires ms>:<hosts or *>:<job id>";

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

bool ParseMs(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string HostList(const std::vector<std::string>& hosts) {
  if (hosts.empty()) return "*";
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : ",") + h;
  return out;
}

// "<issued>:<expires>:<hosts>:<job>": what the MAC covers.
std::string SignedPart(const JobCredentialClaims& c) {
  return std::to_string(c.issued_ms) + ":" + std::to_string(c.expires_ms) + ":" + HostList(c.hosts) + ":" +
         c.job;
}

}  // namespace

Status CheckCredentialHost(const std::string& host) {
  if (host.empty()) return InvalidArgument("a host name in a job credential is empty");
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ',' || c == ':' || c == '*' || std::isspace(u) || std::iscntrl(u))
      return InvalidArgument("host '" + host +
                             "' cannot stand in a job credential (no ',', ':', '*', spaces or controls)");
  }
  return Status::Ok();
}

std::string TenantOfJob(const std::string& job) {
  const auto slash = job.find('/');
  return slash == std::string::npos ? "" : job.substr(0, slash);
}

Expected<JobCredentialClaims> ParseJobCredential(const std::string& credential) {
  const std::string bad = std::string("a job credential is ") + kLayout;
  if (credential.rfind("incjob1:", 0) == 0)
    return InvalidArgument(
        "this is a credential of the old format incjob1 (no expiry, no hosts), which is no longer accepted: "
        "get a new one (" +
        std::string(kLayout) + ") with `incinctl job credential JOB`");
  if (credential.compare(0, kPrefixLen, kPrefix) != 0)
    return InvalidArgument(bad + " (it does not start with incjob2:)");
  if (credential.size() < kPrefixLen + kMacHexLen + 1 || credential[kPrefixLen + kMacHexLen] != ':')
    return InvalidArgument(bad + " (wrong length or layout)");
  for (size_t i = kPrefixLen; i < kPrefixLen + kMacHexLen; i++)
    if (HexDigit(credential[i]) < 0) return InvalidArgument(bad + " (not hex digits)");
  // issued, expires, hosts, then the job id, which may itself hold ':'.
  std::string fields[3];
  size_t at = kPrefixLen + kMacHexLen + 1;
  for (std::string& f : fields) {
    const size_t colon = credential.find(':', at);
    if (colon == std::string::npos) return InvalidArgument(bad + " (wrong length or layout)");
    f = credential.substr(at, colon - at);
    at = colon + 1;
  }
  JobCredentialClaims c;
  c.job = credential.substr(at);
  if (c.job.empty()) return InvalidArgument(bad + " (no job id)");
  if (!ParseMs(fields[0], &c.issued_ms) || !ParseMs(fields[1], &c.expires_ms))
    return InvalidArgument(bad + " (the times are not numbers)");
  if (fields[2] != "*") {
    size_t from = 0;
    for (;;) {
      const size_t comma = fields[2].find(',', from);
      c.hosts.push_back(
          fields[2].substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (Status st = CheckCredentialHost(c.hosts.back()); !st.ok())
        return InvalidArgument(bad + " (" + st.message() + ")");
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  return c;
}

Expected<std::string> JobOfCredential(const std::string& credential) {
  auto c = ParseJobCredential(credential);
  if (!c) return c.status();
  return c->job;
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

std::string JobCredentials::Mac(const std::string& signed_part) const {
  // Domain-separated, so the secret's MACs are good for nothing else (nor
  // for the first format's messages).
  const std::string message = std::string("incin job credential v2") + '\0' + signed_part;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return Hex(mac, len);
}

Expected<std::string> JobCredentials::Issue(const JobCredentialClaims& claims) const {
  if (claims.job.empty()) return InvalidArgument("a job credential needs a job id");
  if (claims.expires_ms <= claims.issued_ms)
    return InvalidArgument("a job credential must expire after it is issued");
  for (const auto& h : claims.hosts) INC_RETURN_IF_ERROR(CheckCredentialHost(h));
  const std::string part = SignedPart(claims);
  return kPrefix + Mac(part) + ":" + part;
}

Status JobCredentials::Verify(const std::string& job_id, const std::string& host,
                              const std::string& credential, uint64_t now_ms, uint64_t revoked_at_ms) const {
  if (credential.empty())
    return PermissionDenied("JoinGroup for job '" + job_id +
                            "' needs the job's credential (INCIN_JOB_CREDENTIAL; a launcher gets it with "
                            "`incinctl job credential " +
                            job_id + "`)");
  auto claims = ParseJobCredential(credential);
  if (!claims) return PermissionDenied(claims.status().message());
  if (claims->job != job_id)
    return PermissionDenied("the job credential is for job '" + claims->job + "', not '" + job_id + "'");
  // The MAC first: nothing the credential says counts before it is known to
  // be the AM's. It covers the text as presented (Issue writes the one
  // spelling of its claims), so no other spelling of them verifies.
  const std::string want = Mac(credential.substr(kPrefixLen + kMacHexLen + 1));
  std::string got = credential.substr(kPrefixLen, kMacHexLen);
  for (char& c : got) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (CRYPTO_memcmp(want.data(), got.data(), kMacHexLen) != 0)
    return PermissionDenied("the job credential for job '" + job_id +
                            "' was not issued by this AM (or its job secret changed since)");
  if (now_ms >= claims->expires_ms)
    return PermissionDenied("the job credential for job '" + job_id + "' expired " +
                            std::to_string((now_ms - claims->expires_ms) / 1000) +
                            " s ago; get a new one with `incinctl job credential " + job_id + "`");
  if (revoked_at_ms != 0 && claims->issued_ms <= revoked_at_ms)
    return PermissionDenied("the job credential for job '" + job_id +
                            "' was revoked (`incinctl job revoke`) after it was issued");
  if (!claims->hosts.empty()) {
    bool listed = false;
    for (const auto& h : claims->hosts) listed = listed || h == host;
    if (!listed)
      return PermissionDenied("the job credential for job '" + job_id + "' is for hosts " +
                              HostList(claims->hosts) + ", not for host '" + host + "'");
  }
  return Status::Ok();
}

}  // namespace inc
