// SPDX-License-Identifier: Apache-2.0
#include "common/daemon.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <iterator>
#include <thread>
#include <vector>

#include "common/grpc_log.h"
#include "common/log.h"

namespace inc {
namespace {

namespace pb = google::protobuf;

// What the daemons act on.
constexpr int kActedOn[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR2};
// Every other signal whose default action (signal(7)) terminates the
// process, bar SIGKILL and SIGPIPE (ignored: a peer that hung up is an EPIPE
// on one socket, not the daemon's end). A stray `kill -USR1` would otherwise
// take incswitchd down with its XDP programs left attached and no agent.
// Taken by sigwait and logged, never delivered. The real-time signals
// SIGRTMIN..SIGRTMAX (default: terminate) are added at run time.
constexpr int kIgnored[] = {SIGUSR1, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSTKFLT};
// Set to SIG_IGN: SIGPIPE (above), the job-control stops SIGTSTP, SIGTTIN
// and SIGTTOU (a stopped daemon sends no heartbeats: its switch or its trees
// would be declared lost), and SIGXFSZ (a write past RLIMIT_FSIZE then fails
// with EFBIG, which the writer reports, instead of ending the process).
constexpr int kSetIgnored[] = {SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGXFSZ};

bool IsActedOn(int sig) {
  return std::find(std::begin(kActedOn), std::end(kActedOn), sig) != std::end(kActedOn);
}

sigset_t DaemonSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kActedOn) sigaddset(&set, sig);
  for (int sig : kIgnored) sigaddset(&set, sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaddset(&set, sig);
  return set;
}

// A scalar field's value as a config file would spell it.
std::string ScalarText(const pb::Message& m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING: return "\"" + r->GetString(m, f) + "\"";
    case pb::FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(m, f) ? "true" : "false";
    case pb::FieldDescriptor::CPPTYPE_INT32: return std::to_string(r->GetInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_INT64: return std::to_string(r->GetInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(m, f));
    case pb::FieldDescriptor::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(m, f));
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: return std::to_string(r->GetDouble(m, f));
    case pb::FieldDescriptor::CPPTYPE_FLOAT: return std::to_string(r->GetFloat(m, f));
    case pb::FieldDescriptor::CPPTYPE_ENUM: return r->GetEnum(m, f)->name();
    case pb::FieldDescriptor::CPPTYPE_MESSAGE: break;
  }
  return "(...)";
}

// Lives as long as one call: made when the call starts, destroyed with it.
class CountingInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit CountingInterceptor(std::shared_ptr<std::atomic<int>> count) : count_(std::move(count)) {
    ++*count_;
  }
  ~CountingInterceptor() override { --*count_; }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }

 private:
  std::shared_ptr<std::atomic<int>> count_;
};

class CountingFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CountingFactory(std::shared_ptr<std::atomic<int>> count) : count_(std::move(count)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo*) override {
    return new CountingInterceptor(count_);
  }

 private:
  std::shared_ptr<std::atomic<int>> count_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> CallCounter::Factory() {
  return std::make_unique<CountingFactory>(in_flight_);
}

bool CallCounter::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  while (*in_flight_ > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void BlockDaemonSignals() {
  sigset_t set = DaemonSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int sig : kSetIgnored) sigaction(sig, &ignore, nullptr);
}

std::vector<int> IgnoredDaemonSignals() {
  std::vector<int> out(std::begin(kIgnored), std::end(kIgnored));
  out.insert(out.end(), std::begin(kSetIgnored), std::end(kSetIgnored));
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) out.push_back(sig);
  return out;
}

int WaitForDaemonSignal() {
  sigset_t set = DaemonSignals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (IsActedOn(sig)) return sig;
    LOG_INFO << "ignored " << SignalName(sig) << " (the daemon takes no action on it)";
  }
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR2: return "SIGUSR2";
    case SIGUSR1: return "SIGUSR1";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGVTALRM: return "SIGVTALRM";
    case SIGPROF: return "SIGPROF";
    case SIGIO: return "SIGIO";
    case SIGPWR: return "SIGPWR";
    case SIGSTKFLT: return "SIGSTKFLT";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGXFSZ: return "SIGXFSZ";
  }
  // As kill -l and bash's kill -s spell them.
  if (sig == SIGRTMIN) return "SIGRTMIN";
  if (sig == SIGRTMAX) return "SIGRTMAX";
  if (sig > SIGRTMIN && sig < SIGRTMAX) return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  return "signal " + std::to_string(sig);
}

Status ValidateLogSettings(const std::string& log_level, const std::string& log_format) {
  LogLevel level;
  if (!ParseLogLevel(log_level, &level))
    return InvalidArgument("log_level \"" + log_level + "\" is not debug, info, warn or error");
  LogFormat format;
  if (!ParseLogFormat(log_format, &format))
    return InvalidArgument("log_format \"" + log_format + "\" is not text or json");
  return Status::Ok();
}

void ApplyLogFormatFlag(const std::string& log_format) {
  LogFormat format;
  if (ParseLogFormat(log_format, &format)) SetLogFormat(format);
}

Status ApplyLogSettings(const std::string& log_level, const std::string& log_format) {
  INC_RETURN_IF_ERROR(ValidateLogSettings(log_level, log_format));
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  ParseLogLevel(log_level, &level);
  ParseLogFormat(log_format, &format);
  SetLogFormat(format);
  SetLogLevel(level);
  SyncGrpcLogVerbosity();
  return Status::Ok();
}

std::string FieldChange::ToString() const {
  if (before == "(...)" || after == "(...)") return field + " changed";
  return field + " " + before + " -> " + after;
}

std::vector<FieldChange> ChangedFields(const pb::Message& before, const pb::Message& after) {
  std::vector<FieldChange> out;
  const pb::Descriptor* d = before.GetDescriptor();
  if (after.GetDescriptor() != d)
    return {{"(message type)", d->full_name(), after.GetDescriptor()->full_name()}};
  std::vector<const pb::FieldDescriptor*> fields;
  for (int i = 0; i < d->field_count(); i++) fields.push_back(d->field(i));
  std::sort(fields.begin(), fields.end(), [](const pb::FieldDescriptor* a, const pb::FieldDescriptor* b) {
    return a->number() < b->number();
  });
  if (pb::util::MessageDifferencer::Equals(before, after)) return out;
  for (const pb::FieldDescriptor* f : fields) {
    pb::util::MessageDifferencer diff;
    if (diff.CompareWithFields(before, after, {f}, {f})) continue;
    // A key's value is never logged ("key_hex changed"); a key id may be.
    const bool secret =
        f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING && f->name().find("key") != std::string::npos;
    const bool scalar = !secret && !f->is_repeated() && f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE;
    out.push_back(
        {f->name(), scalar ? ScalarText(before, f) : "(...)", scalar ? ScalarText(after, f) : "(...)"});
  }
  return out;
}

ReloadPlan PlanReload(const pb::Message& running, const pb::Message& reread,
                      const std::set<std::string>& live, const std::set<std::string>& nested) {
  ReloadPlan plan;
  auto place = [&](FieldChange c) {
    if (live.count(c.field))
      plan.applied.push_back(std::move(c));
    else
      plan.refused.push_back(std::move(c));
  };
  for (FieldChange& c : ChangedFields(running, reread)) {
    const pb::FieldDescriptor* f = running.GetDescriptor()->FindFieldByName(c.field);
    if (!nested.count(c.field) || !f || f->is_repeated() ||
        f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      place(std::move(c));
      continue;
    }
    const pb::Message& before = running.GetReflection()->GetMessage(running, f);
    const pb::Message& after = reread.GetReflection()->GetMessage(reread, f);
    for (FieldChange& inner : ChangedFields(before, after)) {
      inner.field = c.field + "." + inner.field;
      place(std::move(inner));
    }
  }
  return plan;
}

bool CopyFieldPath(const pb::Message& from, const std::string& path, pb::Message* to) {
  if (from.GetDescriptor() != to->GetDescriptor()) return false;
  const pb::Message* src = &from;
  pb::Message* dst = to;
  size_t begin = 0;
  for (;;) {
    const size_t dot = path.find('.', begin);
    const std::string name = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    const pb::FieldDescriptor* f = dst->GetDescriptor()->FindFieldByName(name);
    if (!f) return false;
    if (dot == std::string::npos) {
      // SwapFields moves every kind of field (scalar, repeated, message) as
      // a whole; swapping with a throwaway copy of the source copies it.
      std::unique_ptr<pb::Message> copy(src->New());
      copy->CopyFrom(*src);
      dst->GetReflection()->SwapFields(dst, copy.get(), {f});
      return true;
    }
    if (f->is_repeated() || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) return false;
    src = &src->GetReflection()->GetMessage(*src, f);
    dst = dst->GetReflection()->MutableMessage(dst, f);
    begin = dot + 1;
  }
}

namespace {

std::string StringField(const pb::Message& m, const char* name, const char* when_empty) {
  const pb::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(name);
  if (!f || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING || f->is_repeated()) return when_empty;
  std::string v = m.GetReflection()->GetString(m, f);
  return v.empty() ? when_empty : v;
}

bool IsLogField(const std::string& field) {
  return field == "log_level" || field == "log_format";
}

}  // namespace

size_t ApplyReload(const pb::Message& reread, const std::string& daemon, pb::Message* running,
                   const LiveFields& live) {
  std::set<std::string> fields = live.fields;
  fields.insert({"log_level", "log_format"});
  ReloadPlan plan = PlanReload(*running, reread, fields, live.nested);
  const size_t changes = plan.applied.size() + plan.refused.size();
  auto refuse_rest = [&] {
    for (const FieldChange& c : plan.refused)
      LOG_WARN << "SIGHUP: " << c.ToString() << ": not applied, needs a restart of " << daemon;
  };
  if (plan.applied.empty()) {
    refuse_rest();
    return changes;
  }
  std::unique_ptr<pb::Message> next(running->New());
  next->CopyFrom(*running);
  bool settings_change = false;
  for (const FieldChange& c : plan.applied) {
    CopyFieldPath(reread, c.field, next.get());
    settings_change |= !IsLogField(c.field);
  }
  if (settings_change && live.check) {
    if (Status st = live.check(*next); !st.ok()) {
      LOG_ERROR << "SIGHUP: nothing applied, the running settings stay: " << st.message();
      refuse_rest();
      return changes;
    }
  }
  if (settings_change && live.apply) {
    if (Status st = live.apply(*next); !st.ok()) {
      LOG_ERROR << "SIGHUP: nothing applied, the running settings stay: " << st.message();
      refuse_rest();
      return changes;
    }
  }
  // Said before the log settings change, so that a level raised past info
  // still shows it.
  for (const FieldChange& c : plan.applied) LOG_INFO << "SIGHUP: " << c.ToString() << ": applied";
  Status st =
      ApplyLogSettings(StringField(*next, "log_level", "info"), StringField(*next, "log_format", "text"));
  if (!st.ok()) {
    LOG_ERROR << "SIGHUP: " << st.message() << "; the log settings stay";
    for (const char* f : {"log_level", "log_format"}) CopyFieldPath(*running, f, next.get());
  }
  running->CopyFrom(*next);
  refuse_rest();
  return changes;
}

void LogFlagOverrides(const pb::Message& file_only, const std::vector<FlagOverride>& overrides,
                      const std::string& path) {
  for (const FlagOverride& o : overrides) {
    const pb::FieldDescriptor* f = file_only.GetDescriptor()->FindFieldByName(o.field);
    if (!f || f->is_repeated() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    std::string in_file = ScalarText(file_only, f);
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) in_file = in_file.substr(1, in_file.size() - 2);
    if (in_file == o.value) continue;
    LOG_INFO << "SIGHUP: " << o.flag << " " << o.value << " on the command line overrides " << o.field << " "
             << ScalarText(file_only, f) << " in " << path;
  }
}

}  // namespace inc
