// SPDX-License-Identifier: Apache-2.0
#include "netconf/ssh_keys.h"

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

namespace inc::sw::netconf {
namespace {

void PutU32(std::string* out, uint32_t v) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// RFC 4251 mpint of a non-negative number in big-endian bytes.
void PutMpint(std::string* out, std::string be) {
  size_t i = 0;
  while (i < be.size() && be[i] == 0) i++;
  be = be.substr(i);
  if (!be.empty() && (static_cast<unsigned char>(be[0]) & 0x80)) be.insert(be.begin(), '\0');
  PutString(out, be);
}

std::string BnBytes(EVP_PKEY* key, const char* param) {
  BIGNUM* bn = nullptr;
  if (!EVP_PKEY_get_bn_param(key, param, &bn)) return "";
  std::string out(static_cast<size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

Expected<std::string> BlobOfKey(EVP_PKEY* key) {
  std::string blob;
  const int id = EVP_PKEY_get_base_id(key);
  if (id == EVP_PKEY_EC) {
    char group[64] = {};
    size_t len = 0;
    if (!EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), &len)) {
      return InvalidArgument("EC key without a named curve");
    }
    std::string curve;
    const std::string g = group;
    if (g == "prime256v1" || g == "P-256") curve = "nistp256";
    if (g == "secp384r1" || g == "P-384") curve = "nistp384";
    if (g == "secp521r1" || g == "P-521") curve = "nistp521";
    if (curve.empty())
      return InvalidArgument("EC curve " + g + " has no SSH key type (P-256, P-384, P-521 do)");
    unsigned char point[256];
    size_t plen = 0;
    if (!EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point, sizeof(point),
                                         &plen)) {
      return InvalidArgument("cannot read the EC public point");
    }
    PutString(&blob, "ecdsa-sha2-" + curve);
    PutString(&blob, curve);
    PutString(&blob, std::string(reinterpret_cast<char*>(point), plen));
    return blob;
  }
  if (id == EVP_PKEY_ED25519) {
    unsigned char raw[32];
    size_t len = sizeof(raw);
    if (!EVP_PKEY_get_raw_public_key(key, raw, &len)) return InvalidArgument("cannot read the Ed25519 key");
    PutString(&blob, "ssh-ed25519");
    PutString(&blob, std::string(reinterpret_cast<char*>(raw), len));
    return blob;
  }
  if (id == EVP_PKEY_RSA) {
    PutString(&blob, "ssh-rsa");
    PutMpint(&blob, BnBytes(key, OSSL_PKEY_PARAM_RSA_E));
    PutMpint(&blob, BnBytes(key, OSSL_PKEY_PARAM_RSA_N));
    return blob;
  }
  return InvalidArgument("key type " + std::to_string(id) +
                         " has no SSH form (EC P-256/384/521, Ed25519, RSA do)");
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Expected<std::string> Unbase64(const std::string& in) {
  if (in.empty() || in.size() % 4 != 0) return InvalidArgument("not base64");
  std::string out(3 * in.size() / 4, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return InvalidArgument("not base64");
  size_t pad = 0;
  if (in.back() == '=') pad++;
  if (in.size() > 1 && in[in.size() - 2] == '=') pad++;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Expected<std::string> ReadAll(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Expected<std::string> SshBlobFromPem(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  EVP_PKEY* key = nullptr;
  if (pem.find("CERTIFICATE-----") != std::string::npos) {
    std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                     &X509_free);
    if (cert) key = X509_get_pubkey(cert.get());
  } else if (pem.find("PRIVATE KEY-----") != std::string::npos) {
    key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  } else {
    key = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  }
  ERR_clear_error();
  if (!key) return InvalidArgument("no PEM certificate or key could be parsed");
  auto blob = BlobOfKey(key);
  EVP_PKEY_free(key);
  return blob;
}

std::string BlobBase64(const std::string& blob) {
  return Base64(blob);
}

Expected<std::string> OpenSshLine(const std::string& blob, const std::string& comment) {
  if (blob.size() < 4) return InvalidArgument("SSH key blob too short");
  uint32_t n = (static_cast<uint32_t>(static_cast<unsigned char>(blob[0])) << 24) |
               (static_cast<uint32_t>(static_cast<unsigned char>(blob[1])) << 16) |
               (static_cast<uint32_t>(static_cast<unsigned char>(blob[2])) << 8) |
               static_cast<uint32_t>(static_cast<unsigned char>(blob[3]));
  if (blob.size() < 4 + n) return InvalidArgument("SSH key blob truncated");
  return blob.substr(4, n) + " " + Base64(blob) + (comment.empty() ? "" : " " + comment);
}

namespace {

int64_t UnixTime(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

// Verifies `pem` against the CA bundle at ca_file (chain and dates, now) and
// fills the certificate's validity into *key.
Status VerifyCertificate(const std::string& pem, const std::string& ca_file, AuthorizedKey* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (!cert) return InvalidArgument("not a PEM certificate");
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  if (X509_STORE_load_file(store.get(), ca_file.c_str()) != 1) {
    ERR_clear_error();
    return InvalidArgument("cannot read the CA bundle " + ca_file);
  }
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      &X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr);
  int ok = X509_verify_cert(ctx.get());
  int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  if (ok != 1) {
    return InvalidArgument(std::string("not a valid certificate of the CA ") + ca_file + " (" +
                           X509_verify_cert_error_string(err) + ")");
  }
  key->not_before = UnixTime(X509_get0_notBefore(cert.get()));
  key->not_after = UnixTime(X509_get0_notAfter(cert.get()));
  return Status::Ok();
}

}  // namespace

Expected<std::vector<AuthorizedKey>> LoadAuthorizedKeys(const std::vector<std::string>& cert_files,
                                                        const std::string& authorized_keys_file,
                                                        const std::string& ca_file) {
  std::vector<AuthorizedKey> out;
  if (!cert_files.empty() && ca_file.empty()) {
    return InvalidArgument(
        "authorized_certs need the CA to verify them against (tls.ca); without TLS use authorized_keys");
  }
  for (const auto& path : cert_files) {
    auto pem = ReadAll(path);
    if (!pem.ok()) return pem.status();
    auto id = IdentityFromCertificate(*pem, "");
    if (!id.ok()) return InvalidArgument(path + ": " + id.status().message());
    auto blob = SshBlobFromPem(*pem);
    if (!blob.ok()) return InvalidArgument(path + ": " + blob.status().message());
    AuthorizedKey key{*blob, id->role, id->name, path, id->ip_sans, 0, 0};
    Status verified = VerifyCertificate(*pem, ca_file, &key);
    if (!verified.ok()) return InvalidArgument(path + ": " + verified.message());
    out.push_back(std::move(key));
  }
  if (!authorized_keys_file.empty()) {
    auto text = ReadAll(authorized_keys_file);
    if (!text.ok()) return text.status();
    std::istringstream in(*text);
    std::string line;
    int no = 0;
    while (std::getline(in, line)) {
      no++;
      std::istringstream ls(line);
      std::string type, b64, comment;
      ls >> type;
      if (type.empty() || type[0] == '#') continue;
      ls >> b64;
      std::getline(ls, comment);
      while (!comment.empty() && comment.front() == ' ') comment.erase(comment.begin());
      const std::string where = authorized_keys_file + ":" + std::to_string(no);
      if (type.rfind("ssh-", 0) != 0 && type.rfind("ecdsa-", 0) != 0) {
        return InvalidArgument(where + ": '" + type +
                               "' is not a key type (options before the key are not supported)");
      }
      auto blob = Unbase64(b64);
      if (!blob.ok()) return InvalidArgument(where + ": the key is not base64");
      auto line_again = OpenSshLine(*blob, "");
      if (!line_again.ok() || line_again->substr(0, type.size()) != type) {
        return InvalidArgument(where + ": the key does not match its type " + type);
      }
      const std::string user = comment.substr(0, comment.find('@'));
      if (user.empty()) {
        return InvalidArgument(where +
                               ": no comment naming the SSH user the key logs in as (e.g. \"ops@host\")");
      }
      out.push_back({*blob, Role::kOperator, user, where, {}, 0, 0});
    }
  }
  return out;
}

Status CheckLogin(const AuthorizedKey& key, const std::string& user, const std::string& address,
                  int64_t now) {
  // A dual-stack listener reports IPv4 clients as IPv4-mapped IPv6.
  const std::string host = address.rfind("::ffff:", 0) == 0 && address.find('.') != std::string::npos
                               ? address.substr(7)
                               : address;
  if (user != key.name) {
    return PermissionDenied("the key of " + key.name + " (" + key.source + ") logs in as SSH user '" +
                            key.name + "', not '" + user + "'");
  }
  if (key.not_after != 0 && (now < key.not_before || now > key.not_after)) {
    return PermissionDenied("the certificate " + key.source + " is not valid now (expired or not yet valid)");
  }
  if (!key.ip_sans.empty() && std::find(key.ip_sans.begin(), key.ip_sans.end(), host) == key.ip_sans.end()) {
    return PermissionDenied("the certificate " + key.source +
                            " may be used only from its IP SANs, not from " +
                            (host.empty() ? std::string("an unknown address") : host));
  }
  return Status::Ok();
}

}  // namespace inc::sw::netconf
