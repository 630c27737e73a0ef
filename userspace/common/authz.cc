// SPDX-License-Identifier: Apache-2.0
#include "common/authz.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <memory>

#include "common/log.h"

namespace inc {
namespace {

// All values of one attribute of an X.509 name, as UTF-8.
std::vector<std::string> NameEntries(X509_NAME* name, int nid) {
  std::vector<std::string> out;
  for (int i = X509_NAME_get_index_by_NID(name, nid, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(name, nid, i)) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    int len = ASN1_STRING_to_UTF8(&utf8, data);
    if (len >= 0) out.emplace_back(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
    OPENSSL_free(utf8);
  }
  return out;
}

std::vector<std::string> IpSans(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type != GEN_IPADD) continue;
    const ASN1_OCTET_STRING* ip = gn->d.iPAddress;
    char text[INET6_ADDRSTRLEN] = {};
    if (ip->length == 4 && inet_ntop(AF_INET, ip->data, text, sizeof text)) out.emplace_back(text);
    if (ip->length == 16 && inet_ntop(AF_INET6, ip->data, text, sizeof text)) out.emplace_back(text);
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::string RoleList(std::initializer_list<Role> roles) {
  std::string out;
  for (Role r : roles) out += (out.empty() ? "" : "|") + std::string(RoleName(r));
  return out;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kOperator: return "operator";
    case Role::kSwitch: return "switch";
    case Role::kAm: return "am";
    case Role::kMember: return "member";
  }
  return "?";
}

std::optional<Role> RoleByName(const std::string& name) {
  for (Role r : {Role::kOperator, Role::kSwitch, Role::kAm, Role::kMember}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

std::string PeerIdentity::ToString() const {
  return std::string(RoleName(role)) + " " + name + (peer_ip.empty() ? "" : " from " + peer_ip);
}

std::string PeerIp(const std::string& peer_uri) {
  std::string rest;
  if (peer_uri.rfind("ipv4:", 0) == 0) {
    rest = peer_uri.substr(5);
  } else if (peer_uri.rfind("ipv6:", 0) == 0) {
    rest = peer_uri.substr(5);
    // gRPC may percent-encode the brackets.
    for (auto [from, to] : {std::pair{"%5B", "["}, std::pair{"%5D", "]"}}) {
      for (size_t at; (at = rest.find(from)) != std::string::npos;) rest.replace(at, 3, to);
    }
  } else {
    return "";
  }
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    return close == std::string::npos ? "" : rest.substr(1, close - 1);
  }
  return rest.substr(0, rest.rfind(':'));
}

Expected<PeerIdentity> IdentityFromCertificate(const std::string& pem, const std::string& peer_uri) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  ERR_clear_error();
  if (!cert) return Unauthenticated("the peer's certificate cannot be parsed");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  auto cns = NameEntries(subject, NID_commonName);
  auto ous = NameEntries(subject, NID_organizationalUnitName);
  if (cns.size() != 1 || cns[0].empty()) {
    return Unauthenticated("the peer's certificate has " + std::to_string(cns.size()) +
                           " subject CNs; one naming the peer is needed");
  }
  // One OU is the role; others may name the tenants an operator acts for
  // ("tenant:acme"); anything else is a mistake worth refusing.
  std::vector<std::string> roles, tenants;
  for (const auto& ou : ous) {
    if (ou.rfind(kTenantOuPrefix, 0) == 0) {
      std::string t = ou.substr(std::string(kTenantOuPrefix).size());
      if (t.empty() || t.find('/') != std::string::npos)
        return Unauthenticated("certificate CN=" + cns[0] + " has OU=" + ou +
                               ": a tenant name is not empty and holds no '/'");
      tenants.push_back(std::move(t));
    } else {
      roles.push_back(ou);
    }
  }
  if (roles.size() != 1) {
    return Unauthenticated(
        "certificate CN=" + cns[0] + " has " + std::to_string(roles.size()) +
        " subject OUs naming a role; exactly one role (OU=operator|switch|am|member) is needed");
  }
  auto role = RoleByName(roles[0]);
  if (!role) {
    return Unauthenticated("certificate CN=" + cns[0] + " has OU=" + roles[0] +
                           ", not a role (operator, switch, am, member) nor a tenant (OU=tenant:NAME)");
  }
  if (!tenants.empty() && *role != Role::kOperator)
    return Unauthenticated("certificate CN=" + cns[0] + " names tenants, which only operators have");
  PeerIdentity id;
  id.role = *role;
  id.name = cns[0];
  id.ip_sans = IpSans(cert.get());
  id.tenants = std::move(tenants);
  id.peer_ip = PeerIp(peer_uri);
  return id;
}

std::string PeerCertificatePem(const grpc::ServerContext& ctx) {
  auto auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  auto pems = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pems.empty()) return "";
  return std::string(pems.front().data(), pems.front().size());
}

Expected<PeerIdentity> Authorizer::Identify(const grpc::ServerContext& ctx) const {
  std::string pem = PeerCertificatePem(ctx);
  if (pem.empty()) return Unauthenticated("no verified client certificate");
  return IdentityFromCertificate(pem, ctx.peer());
}

Status Authorizer::Deny(const char* method, const std::string& who, Status why) {
  denials_.fetch_add(1, std::memory_order_relaxed);
  LOG_WARN << "denied " << method << " to " << who << ": " << CodeName(why.code()) << ": " << why.message();
  return why;
}

Status Authorizer::CheckRoles(const Expected<PeerIdentity>& peer, const char* method,
                              std::initializer_list<Role> allowed) {
  if (!enforce_) return Status::Ok();
  if (!peer) return Deny(method, "an unidentified caller", peer.status());
  // A certificate naming addresses is good only from those addresses, so a
  // copied key is no use elsewhere on the management network.
  if (!peer->ip_sans.empty() && !peer->peer_ip.empty() &&
      std::find(peer->ip_sans.begin(), peer->ip_sans.end(), peer->peer_ip) == peer->ip_sans.end()) {
    return Deny(method, peer->ToString(),
                PermissionDenied("certificate of " + peer->name + " is not valid from " + peer->peer_ip +
                                 " (not among its IP SANs)"));
  }
  if (std::find(allowed.begin(), allowed.end(), peer->role) == allowed.end()) {
    return Deny(method, peer->ToString(),
                PermissionDenied(std::string(method) + " needs role " + RoleList(allowed) + "; caller " +
                                 peer->name + " has role " + RoleName(peer->role)));
  }
  return Status::Ok();
}

Status Authorizer::CheckSwitch(const Expected<PeerIdentity>& peer, const char* method,
                               const std::string& claimed_name) {
  if (!enforce_) return Status::Ok();
  INC_RETURN_IF_ERROR(CheckRoles(peer, method, {Role::kSwitch}));
  if (peer->name != claimed_name) {
    return Deny(method, peer->ToString(),
                PermissionDenied(std::string(method) + " for switch '" + claimed_name +
                                 "' with the certificate of switch '" + peer->name + "'"));
  }
  return Status::Ok();
}

Status Authorizer::CheckMemberJoin(
    const Expected<PeerIdentity>& peer, const char* method, const MemberClaim& claim,
    const std::function<std::optional<std::string>(const std::string&)>& host_ip) {
  if (!enforce_) return Status::Ok();
  INC_RETURN_IF_ERROR(CheckRoles(peer, method, {Role::kMember}));
  if (!claim.host.empty() && claim.host != peer->name) {
    return Deny(method, peer->ToString(),
                PermissionDenied("member claims host '" + claim.host + "' with the certificate of host '" +
                                 peer->name + "'"));
  }
  auto ip = host_ip(peer->name);
  if (!ip) {
    return Deny(
        method, peer->ToString(),
        PermissionDenied("certificate names host '" + peer->name + "', which is not in the topology"));
  }
  if (!claim.ip.empty() && claim.ip != *ip) {
    return Deny(method, peer->ToString(),
                PermissionDenied("member claims IP " + claim.ip + " but host '" + peer->name + "' has IP " +
                                 *ip + " in the topology"));
  }
  return Status::Ok();
}

Status Authorizer::CheckMemberAs(const Expected<PeerIdentity>& peer, const char* method,
                                 const std::string& joined_host) {
  if (!enforce_) return Status::Ok();
  INC_RETURN_IF_ERROR(CheckRoles(peer, method, {Role::kMember}));
  if (!joined_host.empty() && peer->name != joined_host) {
    return Deny(method, peer->ToString(),
                PermissionDenied(std::string(method) + " for a rank host '" + joined_host +
                                 "' joined as, with the certificate of host '" + peer->name + "'"));
  }
  return Status::Ok();
}

Status Authorizer::AllowMemberAs(const grpc::ServerContext& ctx, const char* method,
                                 const std::string& joined_host) {
  if (!enforce_) return Status::Ok();
  return CheckMemberAs(Identify(ctx), method, joined_host);
}

Status Authorizer::AllowRoles(const grpc::ServerContext& ctx, const char* method,
                              std::initializer_list<Role> allowed) {
  if (!enforce_) return Status::Ok();
  return CheckRoles(Identify(ctx), method, allowed);
}

Status Authorizer::AllowSwitch(const grpc::ServerContext& ctx, const char* method,
                               const std::string& claimed_name) {
  if (!enforce_) return Status::Ok();
  return CheckSwitch(Identify(ctx), method, claimed_name);
}

Status Authorizer::CheckJobCredential(const Expected<PeerIdentity>& peer, const char* method,
                                      const std::string& job_id, const std::string& credential,
                                      const JobCredentials& credentials, uint64_t now_ms,
                                      uint64_t revoked_at_ms) {
  if (!enforce_) return Status::Ok();
  if (!peer) return Deny(method, "an unidentified caller", peer.status());
  Status st = credentials.Verify(job_id, peer->name, credential, now_ms, revoked_at_ms);
  if (st.ok()) return st;
  return Deny(method, peer->ToString(), std::move(st));
}

Status Authorizer::AllowJobCredential(const grpc::ServerContext& ctx, const char* method,
                                      const std::string& job_id, const std::string& credential,
                                      const JobCredentials& credentials, uint64_t now_ms,
                                      uint64_t revoked_at_ms) {
  if (!enforce_) return Status::Ok();
  return CheckJobCredential(Identify(ctx), method, job_id, credential, credentials, now_ms, revoked_at_ms);
}

Status Authorizer::CheckOperatorForJob(const Expected<PeerIdentity>& peer, const char* method,
                                       const std::string& job_id) {
  if (!enforce_) return Status::Ok();
  INC_RETURN_IF_ERROR(CheckRoles(peer, method, {Role::kOperator}));
  if (peer->tenants.empty()) return Status::Ok();  // a cluster operator
  const std::string tenant = TenantOfJob(job_id);
  if (std::find(peer->tenants.begin(), peer->tenants.end(), tenant) != peer->tenants.end() && !tenant.empty())
    return Status::Ok();
  std::string mine;
  for (const auto& t : peer->tenants) mine += (mine.empty() ? "'" : ", '") + t + "/...'";
  return Deny(method, peer->ToString(),
              PermissionDenied(std::string(method) + " for job '" + job_id + "': operator " + peer->name +
                               " acts for jobs " + mine + " only; this job is " +
                               (tenant.empty() ? std::string("of no tenant (a cluster operator's)")
                                               : "tenant '" + tenant + "''s")));
}

Status Authorizer::AllowOperatorForJob(const grpc::ServerContext& ctx, const char* method,
                                       const std::string& job_id) {
  if (!enforce_) return Status::Ok();
  return CheckOperatorForJob(Identify(ctx), method, job_id);
}

Status Authorizer::Refuse(const grpc::ServerContext& ctx, const char* method, Status why) {
  auto peer = Identify(ctx);
  return Deny(method, peer ? peer->ToString() : "an unidentified caller", std::move(why));
}

Status Authorizer::AllowMemberJoin(
    const grpc::ServerContext& ctx, const char* method, const MemberClaim& claim,
    const std::function<std::optional<std::string>(const std::string&)>& host_ip) {
  if (!enforce_) return Status::Ok();
  return CheckMemberJoin(Identify(ctx), method, claim, host_ip);
}

}  // namespace inc
