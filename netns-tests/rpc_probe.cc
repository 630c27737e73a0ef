// SPDX-License-Identifier: Apache-2.0
// inc-rpc-probe: makes one control-plane call with chosen credentials and
// checks the status code, for lab.security's rogue clients: calls that a
// well-behaved incinctl, libinc or incswitchd would never make (a switch's
// registration under another name, ConfigureTree straight to an agent, a
// JoinGroup claiming another host, a heartbeat, error report or leave for
// another host's rank).
//
//   inc-rpc-probe --target ADDR (--cert F --key F --ca F | --insecure) --expect CODE CALL [options]
//
// Prints "CODE: message" and exits 0 when the code is the expected one, 1
// when not, 2 for a bad command line.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "common/tls.h"
#include "inc/v1/inc.grpc.pb.h"

namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inc-rpc-probe: one incin control-plane call with chosen credentials", "inc-rpc-probe"};
  app.require_subcommand(1);
  inc::TlsFiles files;
  bool insecure = false;
  std::string target, expect;
  double timeout_s = 5;
  app.add_option("--target", target, "host:port of incamd or incswitchd")->required();
  app.add_option("--cert", files.cert, "PEM certificate to present");
  app.add_option("--key", files.key, "its private key");
  app.add_option("--ca", files.ca, "CA bundle for the server's certificate");
  app.add_flag("--insecure", insecure, "plaintext");
  app.add_option("--expect", expect, "the status code the call must end with (OK, PERMISSION_DENIED, ...)")
      ->required();
  app.add_option("--timeout", timeout_s, "seconds");

  std::string name, agent, job, host, ip;
  uint32_t tree = 0, rank = 0, world = 1;
  auto* destroy = app.add_subcommand("destroy-tree", "AggregationManager.DestroyTree");
  destroy->add_option("--tree", tree)->required();
  auto* configure = app.add_subcommand("configure-tree", "SwitchAgent.ConfigureTree of a one-child tree");
  configure->add_option("--tree", tree)->required();
  auto* remove = app.add_subcommand("remove-tree", "SwitchAgent.RemoveTree");
  remove->add_option("--tree", tree)->required();
  auto* reg = app.add_subcommand("register-switch", "AggregationManager.RegisterSwitch");
  reg->add_option("--name", name)->required();
  reg->add_option("--agent", agent, "agent address the AM should dial")->required();
  auto* join = app.add_subcommand("join-group", "AggregationManager.JoinGroup");
  join->add_option("--job", job)->required();
  join->add_option("--rank", rank);
  join->add_option("--world", world);
  join->add_option("--host", host, "claimed host name");
  join->add_option("--ip", ip, "claimed data-path IP");
  std::string credential;
  join->add_option("--credential", credential, "the job credential to present");
  uint32_t wait_ms = 1000;
  join->add_option("--wait-ms", wait_ms, "how long the AM waits for the whole group (timeout_ms)");
  auto* issue = app.add_subcommand("issue-job-credential", "AggregationManager.IssueJobCredential");
  issue->add_option("--job", job)->required();
  auto* leave = app.add_subcommand("leave-group", "AggregationManager.LeaveGroup");
  leave->add_option("--job", job)->required();
  leave->add_option("--rank", rank)->required();
  auto* beat = app.add_subcommand("member-heartbeat", "AggregationManager.MemberHeartbeat");
  beat->add_option("--tree", tree, "tree id (0: by --job)");
  beat->add_option("--job", job);
  beat->add_option("--rank", rank)->required();
  std::string message;
  bool gave_up = false;
  auto* report = app.add_subcommand("report-error", "AggregationManager.ReportError");
  report->add_option("--tree", tree, "tree id (0: by --job)");
  report->add_option("--job", job);
  report->add_option("--rank", rank)->required();
  report->add_option("--message", message, "the error text (\\n in it becomes a newline)");
  report->add_flag("--gave-up", gave_up, "the member gave up: the AM fails the tree");
  app.add_subcommand("list-switches", "AggregationManager.ListSwitches");
  CLI11_PARSE(app, argc, argv);

  auto security = inc::ChooseTransportSecurity(files, insecure, "--cert/--key/--ca or --insecure");
  auto credentials = security ? inc::MakeChannelCredentials(*security) : security.status();
  if (!credentials) {
    std::cerr << "inc-rpc-probe: " << credentials.status().message() << '\n';
    return 2;
  }
  auto channel = grpc::CreateChannel(target, *credentials);
  auto am = inc::v1::AggregationManager::NewStub(channel);
  auto sw = inc::v1::SwitchAgent::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  grpc::Status status;
  if (destroy->parsed()) {
    inc::v1::DestroyTreeRequest req;
    req.set_tree_id(tree);
    req.set_reason("rogue");
    inc::v1::DestroyTreeResponse resp;
    status = am->DestroyTree(&ctx, req, &resp);
  } else if (configure->parsed()) {
    inc::v1::ConfigureTreeRequest req;
    auto* t = req.mutable_tree();
    t->set_tree_id(tree);
    t->set_pool_size(1);
    inc::v1::ConfigureTreeResponse resp;
    status = sw->ConfigureTree(&ctx, req, &resp);
  } else if (remove->parsed()) {
    inc::v1::RemoveTreeRequest req;
    req.set_tree_id(tree);
    inc::v1::RemoveTreeResponse resp;
    status = sw->RemoveTree(&ctx, req, &resp);
  } else if (reg->parsed()) {
    inc::v1::RegisterSwitchRequest req;
    req.set_switch_name(name);
    req.set_agent_address(agent);
    inc::v1::RegisterSwitchResponse resp;
    status = am->RegisterSwitch(&ctx, req, &resp);
  } else if (join->parsed()) {
    inc::v1::JoinGroupRequest req;
    req.set_job_id(job);
    req.set_rank(rank);
    req.set_world_size(world);
    req.set_timeout_ms(wait_ms);
    req.mutable_member()->set_host(host);
    req.mutable_member()->set_ip(ip);
    req.mutable_member()->set_qpn(4242);
    req.set_job_credential(credential);
    inc::v1::JoinGroupResponse resp;
    status = am->JoinGroup(&ctx, req, &resp);
  } else if (issue->parsed()) {
    inc::v1::IssueJobCredentialRequest req;
    req.set_job_id(job);
    inc::v1::IssueJobCredentialResponse resp;
    status = am->IssueJobCredential(&ctx, req, &resp);
  } else if (leave->parsed()) {
    inc::v1::LeaveGroupRequest req;
    req.set_job_id(job);
    req.set_rank(rank);
    inc::v1::LeaveGroupResponse resp;
    status = am->LeaveGroup(&ctx, req, &resp);
  } else if (beat->parsed()) {
    inc::v1::MemberHeartbeatRequest req;
    req.set_tree_id(tree);
    req.set_job_id(job);
    req.set_rank(rank);
    inc::v1::MemberHeartbeatResponse resp;
    status = am->MemberHeartbeat(&ctx, req, &resp);
  } else if (report->parsed()) {
    inc::v1::ReportErrorRequest req;
    req.set_tree_id(tree);
    req.set_job_id(job);
    req.set_rank(rank);
    // A shell cannot easily pass a newline in an argument: "\n" stands for one.
    for (size_t at; (at = message.find("\\n")) != std::string::npos;) message.replace(at, 2, "\n");
    req.set_error(message);
    req.set_gave_up(gave_up);
    inc::v1::ReportErrorResponse resp;
    status = am->ReportError(&ctx, req, &resp);
  } else {
    inc::v1::ListSwitchesResponse resp;
    status = am->ListSwitches(&ctx, inc::v1::ListSwitchesRequest(), &resp);
  }
  const char* code = CodeName(status.error_code());
  std::cout << code << ": " << status.error_message() << '\n';
  return expect == code ? 0 : 1;
}
