// SPDX-License-Identifier: Apache-2.0
// Authorization of gRPC calls by the caller's certificate. Roles come from the
// certificate subject's OU (operator, switch, am, member) and the caller's
// name from its CN; a certificate with IP subject alternative names may only
// be used from one of those addresses. docs/operations.md "Security model".
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/job_credential.h"
#include "common/status.h"

namespace inc {

enum class Role { kOperator, kSwitch, kAm, kMember };
// An operator certificate's extra subject OU "tenant:NAME" binds it to
// tenant NAME (several: several tenants).
inline constexpr const char* kTenantOuPrefix = "tenant:";
const char* RoleName(Role role);
std::optional<Role> RoleByName(const std::string& name);

// Who called, as its verified certificate says.
struct PeerIdentity {
  Role role = Role::kMember;
  std::string name;                  // subject CN
  std::vector<std::string> ip_sans;  // IP subject alternative names
  std::string peer_ip;               // the address the call came from ("" for unix sockets)
  // Subject OUs "tenant:NAME": the tenants an operator acts for (none:
  // every tenant, a cluster operator). docs/operations.md "Job credentials".
  std::vector<std::string> tenants;
  std::string ToString() const;  // "switch leaf0 from 172.31.0.11"
};

// From a PEM certificate (gRPC hands the verified peer certificate over as
// PEM) and the peer URI of the call ("ipv4:172.31.0.11:40212"). The subject
// must carry exactly one known OU and a CN, else UNAUTHENTICATED.
Expected<PeerIdentity> IdentityFromCertificate(const std::string& pem, const std::string& peer_uri);

// The caller's verified certificate (PEM) as gRPC hands it over; empty
// without one (plaintext, or no client certificate).
std::string PeerCertificatePem(const grpc::ServerContext& ctx);

// The address part of a gRPC peer URI: "ipv4:1.2.3.4:5" -> "1.2.3.4",
// "ipv6:[::1]:5" -> "::1", anything else -> "".
std::string PeerIp(const std::string& peer_uri);

// A member's JoinGroup claim: the host name and data-path IP it says it is.
struct MemberClaim {
  std::string host;
  std::string ip;
};

// Authorizes calls for one daemon's service, logs every denial (warn) and
// counts it. With enforce == false (plaintext, "insecure") everything is
// allowed: without certificates there is no identity to check.
class Authorizer {
 public:
  explicit Authorizer(bool enforce) : enforce_(enforce) {}

  bool enforcing() const { return enforce_; }
  uint64_t denials() const { return denials_.load(std::memory_order_relaxed); }

  // The call's caller has one of the roles.
  Status AllowRoles(const grpc::ServerContext& ctx, const char* method, std::initializer_list<Role> allowed);
  // A switch calling as itself: its CN is the switch name in the request.
  Status AllowSwitch(const grpc::ServerContext& ctx, const char* method, const std::string& claimed_name);
  // A member joining as the host its certificate names. host_ip looks a
  // topology host up by name (nullopt: no such host).
  Status AllowMemberJoin(const grpc::ServerContext& ctx, const char* method, const MemberClaim& claim,
                         const std::function<std::optional<std::string>(const std::string&)>& host_ip);

  // A member speaking for a rank that host `joined_host` joined as (empty:
  // nobody joined as it here, so only the role is checked).
  Status AllowMemberAs(const grpc::ServerContext& ctx, const char* method, const std::string& joined_host);
  // A member joining job `job_id` with the credential the job's launcher
  // got from the AM: it must be one `credentials` issued for that job and
  // the caller's host, unexpired at `now_ms` and issued after the job's last
  // revocation (`revoked_at_ms`, 0: none).
  Status AllowJobCredential(const grpc::ServerContext& ctx, const char* method, const std::string& job_id,
                            const std::string& credential, const JobCredentials& credentials, uint64_t now_ms,
                            uint64_t revoked_at_ms);
  // An operator acting on job `job_id` (its credentials): the job's tenant
  // (TenantOfJob) must be one of the caller's, unless the caller is bound
  // to no tenant.
  Status AllowOperatorForJob(const grpc::ServerContext& ctx, const char* method, const std::string& job_id);
  // The caller's verified identity; UNAUTHENTICATED without a certificate.
  Expected<PeerIdentity> Identify(const grpc::ServerContext& ctx) const;

  // The checks themselves, on an identity already extracted (unit tests).
  Status CheckRoles(const Expected<PeerIdentity>& peer, const char* method,
                    std::initializer_list<Role> allowed);
  Status CheckSwitch(const Expected<PeerIdentity>& peer, const char* method, const std::string& claimed_name);
  Status CheckMemberJoin(const Expected<PeerIdentity>& peer, const char* method, const MemberClaim& claim,
                         const std::function<std::optional<std::string>(const std::string&)>& host_ip);
  Status CheckMemberAs(const Expected<PeerIdentity>& peer, const char* method,
                       const std::string& joined_host);
  Status CheckJobCredential(const Expected<PeerIdentity>& peer, const char* method, const std::string& job_id,
                            const std::string& credential, const JobCredentials& credentials, uint64_t now_ms,
                            uint64_t revoked_at_ms);
  Status CheckOperatorForJob(const Expected<PeerIdentity>& peer, const char* method,
                             const std::string& job_id);
  // Logs and counts a denial the caller's data decided (a rank another host
  // owns, found where the data is); returns it.
  Status Refuse(const grpc::ServerContext& ctx, const char* method, Status why);

 private:
  // Logs and counts a denial; returns it.
  Status Deny(const char* method, const std::string& who, Status why);

  bool enforce_;
  std::atomic<uint64_t> denials_{0};
};

}  // namespace inc
