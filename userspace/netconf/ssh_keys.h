// SPDX-License-Identifier: Apache-2.0
// SSH public keys of the control plane's identities, for NETCONF over SSH:
// a certificate's public key in the SSH wire form (RFC 4253 "ssh-rsa", RFC
// 5656 "ecdsa-sha2-nistp256/384/521", RFC 8709 "ssh-ed25519"), and the keys
// of an OpenSSH authorized_keys file. The NETCONF server compares a client's
// key blob against these; the AM's NETCONF client writes its public key in
// OpenSSH form for libssh. docs/netconf.md "Keys".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/authz.h"
#include "common/status.h"

namespace inc::sw::netconf {

// The SSH public key blob of a PEM certificate's (or PEM public or private
// key's) key. INVALID_ARGUMENT for a key type SSH has no name for.
Expected<std::string> SshBlobFromPem(const std::string& pem);

// The blob in base64 (the second field of an authorized_keys line).
std::string BlobBase64(const std::string& blob);

// "<type> <base64 blob> <comment>" (one authorized_keys / .pub line).
Expected<std::string> OpenSshLine(const std::string& blob, const std::string& comment);

// One key a client may log in with, and who it is.
struct AuthorizedKey {
  std::string blob;  // SSH wire form
  Role role = Role::kOperator;
  // The SSH user name the key logs in as: the certificate's CN, or the
  // authorized_keys comment up to its '@' ("ops@example" logs in as "ops").
  std::string name;
  std::string source;  // the file it came from
  // Certificates only: the addresses it may log in from (its IP subject
  // alternative names; none: any address, as for gRPC) and its validity in
  // Unix seconds (0, 0 for authorized_keys: no expiry).
  std::vector<std::string> ip_sans;
  int64_t not_before = 0;
  int64_t not_after = 0;
};

// Certificates, each verified against the CA bundle `ca_file` (the switch's
// tls.ca) and valid now, with role and name from the subject as for gRPC
// calls; and an authorized_keys file (role operator; every line needs a
// comment naming its user). Errors name the file and line, and why.
Expected<std::vector<AuthorizedKey>> LoadAuthorizedKeys(const std::vector<std::string>& cert_files,
                                                        const std::string& authorized_keys_file,
                                                        const std::string& ca_file);

// Whether `key` may log in now (`now`: Unix seconds) as SSH user `user` from
// `host`: the user is the key's name, a certificate is within its validity
// and, when it has IP SANs, used from one of them. PERMISSION_DENIED saying
// which check failed.
Status CheckLogin(const AuthorizedKey& key, const std::string& user, const std::string& host, int64_t now);

}  // namespace inc::sw::netconf
