// SPDX-License-Identifier: Apache-2.0
#include "common/tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/settings.h"

namespace inc {
namespace {

Expected<std::string> ReadWholeFile(const std::string& path, const char* what) {
  if (path.empty()) return InvalidArgument(std::string(what) + ": no file given");
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(std::string(what) + " file " + path, errno);
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return ErrnoStatus(std::string(what) + " file " + path, errno);
  return buf.str();
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemoryBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// The certificates in a PEM text, in order; none if it holds none.
std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  std::vector<X509Ptr> out;
  BioPtr bio = MemoryBio(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  return out;
}

// Through the settings table: INCIN_TLS_* are also read under their old
// names INC_TLS_* (with a deprecation warning); other prefixes as they are.
std::string Env(const std::string& name) {
  auto v = settings::Env().Raw(name.c_str());
  return v ? v->text : "";
}

}  // namespace

Expected<TransportSecurity> ChooseTransportSecurity(const TlsFiles& files, bool insecure,
                                                    const std::string& how) {
  TransportSecurity s;
  s.insecure = insecure;
  s.files = files;
  if (insecure) {
    if (!files.empty()) {
      return InvalidArgument("both TLS files and insecure are set: choose one (" + how + ")");
    }
    return s;
  }
  if (files.empty()) {
    return InvalidArgument("no transport security configured: give a certificate, its key and the CA (" +
                           how + "); plaintext needs an explicit insecure setting");
  }
  const char* missing = files.cert.empty()  ? "cert"
                        : files.key.empty() ? "key"
                        : files.ca.empty()  ? "ca"
                                            : nullptr;
  if (missing) {
    return InvalidArgument(std::string("TLS settings incomplete: ") + missing +
                           " is missing (cert, key and ca are all needed: " + how + ")");
  }
  return s;
}

Expected<TransportSecurity> TransportSecurityFromEnv(const std::string& prefix) {
  TlsFiles files{Env(prefix + "_TLS_CERT"), Env(prefix + "_TLS_KEY"), Env(prefix + "_TLS_CA")};
  const std::string insecure = Env(prefix + "_INSECURE");
  if (!insecure.empty() && insecure != "0" && insecure != "1") {
    return InvalidArgument(prefix + "_INSECURE=\"" + insecure + "\" is not 0 or 1");
  }
  return ChooseTransportSecurity(
      files, insecure == "1",
      prefix + "_TLS_CERT, " + prefix + "_TLS_KEY and " + prefix + "_TLS_CA, or " + prefix + "_INSECURE=1");
}

Expected<TlsMaterial> LoadTlsMaterial(const TlsFiles& files) {
  TlsMaterial m;
  auto cert = ReadWholeFile(files.cert, "certificate");
  if (!cert) return cert.status();
  auto key = ReadWholeFile(files.key, "private key");
  if (!key) return key.status();
  auto ca = ReadWholeFile(files.ca, "CA");
  if (!ca) return ca.status();

  auto certs = ParseCertificates(*cert);
  if (certs.empty()) {
    return InvalidArgument("certificate file " + files.cert +
                           ": no PEM certificate in it (want \"-----BEGIN CERTIFICATE-----\")");
  }
  BioPtr key_bio = MemoryBio(*key);
  KeyPtr pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!pkey) {
    return InvalidArgument("private key file " + files.key +
                           ": no unencrypted PEM private key in it (want \"-----BEGIN PRIVATE KEY-----\")");
  }
  if (X509_check_private_key(certs.front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("private key file " + files.key + " does not belong to the certificate in " +
                           files.cert);
  }
  if (ParseCertificates(*ca).empty()) {
    return InvalidArgument("CA file " + files.ca +
                           ": no PEM certificate in it (want \"-----BEGIN CERTIFICATE-----\")");
  }
  m.cert_pem = std::move(*cert);
  m.key_pem = std::move(*key);
  m.ca_pem = std::move(*ca);
  return m;
}

namespace {

// gRPC's provider that re-reads the three files. The files are checked
// first so that a daemon refuses to start on a bad one, with an
// error naming it, instead of failing every handshake later.
Expected<std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider>> WatchFiles(
    const TlsFiles& files, unsigned refresh_seconds) {
  auto m = LoadTlsMaterial(files);
  if (!m) return m.status();
  if (refresh_seconds == 0) return InvalidArgument("TLS refresh interval: must be at least 1 second");
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(files.key, files.cert, files.ca,
                                                                              refresh_seconds);
}

}  // namespace

Expected<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TransportSecurity& security,
                                                                         unsigned refresh_seconds) {
  if (security.insecure) return grpc::InsecureServerCredentials();
  auto provider = WatchFiles(security.files, refresh_seconds);
  if (!provider) return provider.status();
  grpc::experimental::TlsServerCredentialsOptions options(*provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  auto creds = grpc::experimental::TlsServerCredentials(options);
  if (!creds) return Internal("gRPC refused the TLS server options for cert " + security.files.cert);
  return creds;
}

Expected<std::shared_ptr<grpc::ChannelCredentials>> MakeWatchedChannelCredentials(
    const TransportSecurity& security, unsigned refresh_seconds) {
  if (security.insecure) return grpc::InsecureChannelCredentials();
  auto provider = WatchFiles(security.files, refresh_seconds);
  if (!provider) return provider.status();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(*provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  // The defaults, said out loud because they are the security: the
  // server's chain is verified against the CA, and without a verifier of
  // our own gRPC checks the dialled host against the certificate's SANs.
  options.set_verify_server_certs(true);
  options.set_check_call_host(true);
  auto creds = grpc::experimental::TlsCredentials(options);
  if (!creds) return Internal("gRPC refused the TLS channel options for cert " + security.files.cert);
  return creds;
}

Expected<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TransportSecurity& security) {
  if (security.insecure) return grpc::InsecureChannelCredentials();
  auto m = LoadTlsMaterial(security.files);
  if (!m) return m.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = m->ca_pem;
  options.pem_private_key = m->key_pem;
  options.pem_cert_chain = m->cert_pem;
  return grpc::SslCredentials(options);
}

std::string Describe(const TransportSecurity& security) {
  if (security.insecure) return "plaintext (insecure: no TLS, no authorization)";
  return "mTLS (cert " + security.files.cert + ", CA " + security.files.ca + ")";
}

}  // namespace inc
