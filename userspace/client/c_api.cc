// SPDX-License-Identifier: Apache-2.0
// libinc's C API (include/inc/inc.h) over inc::client::Communicator. The
// only file of libinc.so.0 that exports symbols (libinc.map): everything
// else, C++ included, stays inside the library.
#include <cstddef>
#include <exception>
#include <memory>
#include <string>

#include "client/communicator.h"
#include "common/job_credential.h"
#include "common/settings.h"
#include "common/status.h"
#include "common/version.h"
#include "inc/inc.h"

struct inc_comm {
  std::unique_ptr<inc::client::Communicator> impl;
};

namespace {

thread_local std::string g_last_error;

inc_status Fail(const inc::Status& st) {
  g_last_error = st.ToString();
  return static_cast<inc_status>(st.code());
}

inc_status Report(const inc::Status& st) {
  return st.ok() ? INC_OK : Fail(st);
}

bool ValidType(inc_datatype t) {
  const int v = static_cast<int>(t);
  return v >= INC_INT32 && v <= INC_FLOAT64;
}
bool ValidOp(inc_op op) {
  const int v = static_cast<int>(op);
  return v > 0 && v < 32 && (INC_OPS_ALL & (1u << v));  // a row of the wire's op table
}

// A collective's common checks, then the call; C++ exceptions (bad_alloc)
// become INTERNAL instead of crossing into C.
template <typename Fn>
inc_status Collective(inc_comm* comm, const char* what, Fn&& fn) {
  if (!comm || !comm->impl) return Fail(inc::InvalidArgument(std::string(what) + ": no communicator"));
  try {
    return Report(fn(*comm->impl));
  } catch (const std::exception& e) {
    return Fail(inc::Status(inc::Code::kInternal, std::string(what) + ": " + e.what()));
  }
}

inc::Status CheckTypes(const char* what, inc_datatype dtype, inc_op op) {
  if (!ValidType(dtype))
    return inc::InvalidArgument(std::string(what) + ": unknown inc_datatype " +
                                std::to_string(static_cast<int>(dtype)));
  if (!ValidOp(op))
    return inc::InvalidArgument(std::string(what) + ": unknown inc_op " +
                                std::to_string(static_cast<int>(op)));
  return inc::Status::Ok();
}

inc::client::DataType Type(inc_datatype t) {
  return static_cast<inc::client::DataType>(t);
}
inc::client::ReduceOp Op(inc_op op) {
  return static_cast<inc::client::ReduceOp>(op);
}

// The fields a caller's struct has, by its struct_size (older headers have
// fewer): the ones beyond it keep their defaults.
#define INC_HAS_FIELD(c, field) ((c)->struct_size >= offsetof(inc_comm_config, field) + sizeof((c)->field))

}  // namespace

// The enum values are the C++ ones, so the conversions above are casts.
static_assert(static_cast<int>(inc::client::DataType::kBFloat16) == INC_BFLOAT16);
static_assert(static_cast<int>(inc::client::DataType::kFloat64) == INC_FLOAT64);
static_assert(static_cast<int>(inc::client::ReduceOp::kMax) == INC_MAX);
static_assert(static_cast<int>(inc::client::ReduceOp::kBand) == INC_BAND);
static_assert(static_cast<int>(inc::client::ReduceOp::kBor) == INC_BOR);
static_assert(static_cast<int>(inc::client::ReduceOp::kBxor) == INC_BXOR);
static_assert(static_cast<int>(inc::Code::kUnauthenticated) == INC_UNAUTHENTICATED);

extern "C" {

void inc_comm_config_init(inc_comm_config* config) {
  if (!config) return;
  *config = inc_comm_config{};
  config->struct_size = sizeof(inc_comm_config);
}

inc_status inc_comm_create(const inc_comm_config* config, inc_comm** comm) {
  if (!comm) return Fail(inc::InvalidArgument("inc_comm_create: comm is NULL"));
  *comm = nullptr;
  if (!config) return Fail(inc::InvalidArgument("inc_comm_create: config is NULL"));
  if (config->struct_size < offsetof(inc_comm_config, transport))
    return Fail(inc::InvalidArgument("inc_comm_create: config->struct_size " +
                                     std::to_string(config->struct_size) +
                                     " is too small (call inc_comm_config_init first)"));
  inc::client::CommunicatorOptions o;
  if (config->am_address) o.am_address = config->am_address;
  if (config->job_id) o.job_id = config->job_id;
  if (config->job_credential) o.job_credential = std::string(config->job_credential);
  o.rank = config->rank;
  o.world_size = config->world_size;
  if (config->iface) o.iface = config->iface;
  if (INC_HAS_FIELD(config, transport) && config->transport) o.transport = config->transport;
  if (INC_HAS_FIELD(config, join_timeout_ms) && config->join_timeout_ms)
    o.join_timeout_ms = config->join_timeout_ms;
  if (INC_HAS_FIELD(config, max_retries) && config->max_retries) o.max_retries = config->max_retries;
  if (INC_HAS_FIELD(config, op_timeout_ms) && config->op_timeout_ms) o.op_timeout_ms = config->op_timeout_ms;
  try {
    auto made = inc::client::Communicator::Create(o);
    if (!made.ok()) return Fail(made.status());
    *comm = new inc_comm{std::move(*made)};
    return INC_OK;
  } catch (const std::exception& e) {
    return Fail(inc::Status(inc::Code::kInternal, std::string("inc_comm_create: ") + e.what()));
  }
}

void inc_comm_destroy(inc_comm* comm) {
  delete comm;
}

uint32_t inc_comm_rank(const inc_comm* comm) {
  return comm && comm->impl ? comm->impl->rank() : 0;
}

uint32_t inc_comm_size(const inc_comm* comm) {
  return comm && comm->impl ? comm->impl->world_size() : 0;
}

const char* inc_comm_status_json(const inc_comm* comm) {
  thread_local std::string text;
  try {
    text = comm && comm->impl ? comm->impl->GetStatus().ToJson() : "{}";
  } catch (const std::exception&) {
    text = "{}";
  }
  return text.c_str();
}

inc_status inc_allreduce(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                         inc_op op) {
  return Collective(comm, "inc_allreduce", [&](inc::client::Communicator& c) {
    INC_RETURN_IF_ERROR(CheckTypes("inc_allreduce", dtype, op));
    return c.AllReduce(send, recv, count, Type(dtype), Op(op));
  });
}

inc_status inc_reduce(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                      inc_op op, uint32_t root) {
  return Collective(comm, "inc_reduce", [&](inc::client::Communicator& c) {
    INC_RETURN_IF_ERROR(CheckTypes("inc_reduce", dtype, op));
    return c.Reduce(send, recv, count, Type(dtype), Op(op), root);
  });
}

inc_status inc_broadcast(inc_comm* comm, void* buf, size_t count, inc_datatype dtype, uint32_t root) {
  return Collective(comm, "inc_broadcast", [&](inc::client::Communicator& c) {
    INC_RETURN_IF_ERROR(CheckTypes("inc_broadcast", dtype, INC_SUM));
    return c.Broadcast(buf, count, Type(dtype), root);
  });
}

inc_status inc_barrier(inc_comm* comm) {
  return Collective(comm, "inc_barrier", [&](inc::client::Communicator& c) { return c.Barrier(); });
}

inc_status inc_allgather(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype) {
  return Collective(comm, "inc_allgather", [&](inc::client::Communicator& c) {
    INC_RETURN_IF_ERROR(CheckTypes("inc_allgather", dtype, INC_SUM));
    return c.AllGather(send, recv, count, Type(dtype));
  });
}

inc_status inc_reduce_scatter(inc_comm* comm, const void* send, void* recv, size_t count, inc_datatype dtype,
                              inc_op op) {
  return Collective(comm, "inc_reduce_scatter", [&](inc::client::Communicator& c) {
    INC_RETURN_IF_ERROR(CheckTypes("inc_reduce_scatter", dtype, op));
    return c.ReduceScatter(send, recv, count, Type(dtype), Op(op));
  });
}

const char* inc_status_name(inc_status status) {
  const int code = static_cast<int>(status);
  if (code < INC_OK || code > INC_UNAUTHENTICATED) return "UNKNOWN";
  return inc::CodeName(static_cast<inc::Code>(code));
}

inc_status inc_setting_string(const char* name, const char** value) {
  if (!name || !value) return Fail(inc::InvalidArgument("inc_setting_string: name or value is NULL"));
  const inc::settings::Setting* s = inc::settings::Find(name);
  if (!s) return Fail(inc::InvalidArgument(std::string("inc_setting_string: no setting ") + name));
  auto v = s->type == inc::settings::Type::kChoice ? inc::settings::Env().Choice(name)
                                                   : inc::settings::Env().String(name);
  if (!v.ok()) return Fail(v.status());
  thread_local std::string text;
  text = *v;
  *value = text.c_str();
  return INC_OK;
}

inc_status inc_setting_uint(const char* name, uint64_t* value) {
  if (!name || !value) return Fail(inc::InvalidArgument("inc_setting_uint: name or value is NULL"));
  const inc::settings::Setting* s = inc::settings::Find(name);
  if (!s) return Fail(inc::InvalidArgument(std::string("inc_setting_uint: no setting ") + name));
  auto v = s->type == inc::settings::Type::kBytes ? inc::settings::Env().Bytes(name)
                                                  : inc::settings::Env().UInt(name);
  if (!v.ok()) return Fail(v.status());
  *value = *v;
  return INC_OK;
}

inc_status inc_setting_bool(const char* name, int* value) {
  if (!name || !value) return Fail(inc::InvalidArgument("inc_setting_bool: name or value is NULL"));
  if (!inc::settings::Find(name))
    return Fail(inc::InvalidArgument(std::string("inc_setting_bool: no setting ") + name));
  auto v = inc::settings::Env().Bool(name);
  if (!v.ok()) return Fail(v.status());
  *value = *v ? 1 : 0;
  return INC_OK;
}

int inc_require_offload(void) {
  return inc::settings::RequireOffload() ? 1 : 0;
}

inc_status inc_credential_job(const char* credential, const char** job) {
  if (!credential || !job) return Fail(inc::InvalidArgument("inc_credential_job: credential or job is NULL"));
  auto j = inc::JobOfCredential(credential);
  if (!j.ok()) return Fail(j.status());
  thread_local std::string text;
  text = *j;
  *job = text.c_str();
  return INC_OK;
}

const char* inc_last_error(void) {
  return g_last_error.c_str();
}

const char* inc_version(void) {
  return inc::kVersion;
}

}  // extern "C"
