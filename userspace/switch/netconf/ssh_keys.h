// SPDX-License-Identifier: Apache-2.0
// SSH public keys of the control plane's identities, for NETCONF over SSH:
// a certificate's public key in the SSH wire form (RFC 4253 "ssh-rsa", RFC
// 5656 "ecdsa-sha2-nistp256/384/521", RFC 8709 "ssh-ed25519"), and the keys
// of an OpenSSH authorized_keys file. The NETCONF server compares a client's
// key blob against these; the AM's NETCONF client writes its public key in
// OpenSSH form for libssh. docs/netconf.md "Keys".
#pragma once

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
  std::string name;    // certificate CN, or the authorized_keys comment
  std::string source;  // the file it came from
};

// Certificates (role and name from the subject, as for gRPC calls) and an
// authorized_keys file (role operator); errors name the file and line.
Expected<std::vector<AuthorizedKey>> LoadAuthorizedKeys(const std::vector<std::string>& cert_files,
                                                        const std::string& authorized_keys_file);

}  // namespace inc::sw::netconf
