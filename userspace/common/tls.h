// SPDX-License-Identifier: Apache-2.0
// Transport security of every incin gRPC channel: mutual TLS from PEM files
// (each side proves who it is with a certificate of the deployment's CA), or
// plaintext only where it was asked for explicitly. docs/operations.md
// "Security model".
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace inc {

// PEM files: this process's certificate, its private key, and the CA bundle
// the peer's certificate must chain to.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
  bool empty() const { return cert.empty() && key.empty() && ca.empty(); }
};

// What a process speaks: mTLS with `files`, or plaintext (insecure).
struct TransportSecurity {
  bool insecure = false;
  TlsFiles files;
};

// Turns the configured settings into a choice, refusing the ambiguous ones:
// nothing at all (plaintext must never be a silent default), insecure
// together with TLS files, or only some of cert/key/ca. `how` tells the
// user where the settings go, e.g. "config \"tls\": {cert, key, ca}, or
// \"insecure\": true".
Expected<TransportSecurity> ChooseTransportSecurity(const TlsFiles& files, bool insecure,
                                                    const std::string& how);

// For client processes: <prefix>_TLS_CERT, <prefix>_TLS_KEY, <prefix>_TLS_CA
// and <prefix>_INSECURE=1 (libinc and incinctl: "INCIN", whose settings are
// also read under their old names INC_TLS_* and INC_INSECURE).
Expected<TransportSecurity> TransportSecurityFromEnv(const std::string& prefix);

// The PEM contents, read and checked: the certificate file holds at least
// one X.509 certificate, the key file a private key that belongs to it, the
// CA file at least one certificate. Errors name the file and what is wrong
// with it (missing, unreadable, not PEM, key of another certificate).
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};
Expected<TlsMaterial> LoadTlsMaterial(const TlsFiles& files);

// How often a daemon's credentials look at the certificate, key and CA
// files again: a certificate replaced on disk is used by the handshakes
// that start after the next look, with no restart (connections already up
// keep what they were made with).
constexpr unsigned kTlsRefreshSeconds = 5;

// Server side: requires and verifies a client certificate of the CA. The
// files are checked now (LoadTlsMaterial's errors) and then read again every
// `refresh_seconds` by gRPC's file watcher, for the handshakes to come.
Expected<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurity& security, unsigned refresh_seconds = kTlsRefreshSeconds);
// Client side: presents our certificate, verifies the server's against the
// CA and the address dialled (IP or DNS subject alternative names). The
// files are read once, now: for processes that live as long as a job or make
// their channels per use (libinc, incinctl).
Expected<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TransportSecurity& security);
// The same checks for a daemon's long-lived channels, with the files read
// again every `refresh_seconds` as for the server: a reconnect after a
// certificate change presents the new certificate and trusts the new CA.
Expected<std::shared_ptr<grpc::ChannelCredentials>> MakeWatchedChannelCredentials(
    const TransportSecurity& security, unsigned refresh_seconds = kTlsRefreshSeconds);

// "mTLS (cert FILE)" or "plaintext (insecure)", for start-up log lines.
std::string Describe(const TransportSecurity& security);

}  // namespace inc
