# SPDX-License-Identifier: Apache-2.0
"""incin's torch.distributed backend (docs/pytorch.md).

    import incin                     # registers the backend "incin"
    import torch.distributed as dist
    dist.init_process_group("incin", init_method=..., rank=r, world_size=n)

all_reduce (SUM/MIN/MAX; float32, float16, bfloat16, float64, int32, int64),
broadcast, barrier, all_gather and reduce_scatter on CPU tensors run in the
incin switches through libinc; everything else runs on a gloo process group
made from the same store, counted and logged per reason. An offloaded call
waits for the slowest rank as long as the process group's timeout; when one
fails, every rank's calls on that group raise from then on (docs/pytorch.md
"Failures"). libinc's settings come from the environment: INCIN_AM
(required for the switch path), INCIN_IFACE, INCIN_JOB_ID, INCIN_TRANSPORT,
INCIN_JOIN_TIMEOUT_MS, INCIN_JOB_CREDENTIAL, INCIN_TLS_* / INCIN_INSECURE and
INCIN_REQUIRE_OFFLOAD=1 (a collective that would run on gloo raises instead);
the previous release's INC_* names still work, with a deprecation warning.

torch 1.13's dist.monitored_barrier accepts only a group whose backend is
named "gloo": use incin.monitored_barrier for an incin group.
"""
import atexit
import datetime
import os
import socket
import time
import weakref

import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from ._incin_torch import ProcessGroupIncin, _wait_for_workers, credential_job, libinc_version, setting

__all__ = ["ProcessGroupIncin", "libinc_version", "setting", "summary_json", "monitored_barrier", "BACKEND"]

BACKEND = "incin"
# torch's own, for gloo groups (kept: a program may replace
# dist.monitored_barrier with monitored_barrier below).
_torch_monitored_barrier = dist.monitored_barrier


def _job_id(store, rank):
    """The libinc job id every rank of the group uses: INCIN_JOB_ID, else the
    job INCIN_JOB_CREDENTIAL names, else rank 0 makes one and shares it
    through the store (settings read through libinc's table)."""
    job = setting("INCIN_JOB_ID")
    if job:
        return job
    job = credential_job(setting("INCIN_JOB_CREDENTIAL"))
    if job:
        return job
    key = "incin/job_id"
    if rank == 0:
        store.set(key, "torch-%s-%d-%d" % (socket.gethostname()[:40], os.getpid(), int(time.time())))
    return store.get(key).decode()


def _shutdown(ref):
    pg = ref()
    if pg is not None:
        pg._shutdown()


def _create(store, rank, world_size, timeout):
    # The group's timeout (init_process_group/new_group) bounds both paths:
    # gloo's collectives, and how long an offloaded one waits for the
    # slowest rank (libinc's op_timeout_ms).
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("incin-gloo/", store), rank, world_size, timeout)
    pg = ProcessGroupIncin(rank, world_size, gloo, _job_id(store, rank), timeout)
    # The summary and LeaveGroup at exit if the group was never destroyed.
    atexit.register(_shutdown, weakref.ref(pg))
    return pg


def summary_json(group=None):
    """The offloaded/fallback counts of `group` (default: the default group)
    as a JSON string."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg.summary_json()


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """dist.monitored_barrier for incin groups (torch 1.13 gates its own on
    the backend name "gloo"): gloo's monitored barrier on the group's
    internal gloo group, after every earlier call of the group has
    completed. Rank 0 raises naming the ranks that did not arrive within
    `timeout` (a timedelta or seconds; default: torch's default process
    group timeout, as dist.monitored_barrier); the others raise when rank 0 gives up. A gloo
    group is passed on to dist.monitored_barrier."""
    if group is not None and _c10d._rank_not_in_group(group):
        return None
    pg = group if group is not None else _c10d._get_default_group()
    if not isinstance(pg, ProcessGroupIncin):
        return _torch_monitored_barrier(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
    if timeout is None:
        timeout = _c10d.default_pg_timeout
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        # Seconds, as torch's own accepts them (pybind11 converts a number
        # to its duration); PyTorch's suite passes 0.1.
        timeout = datetime.timedelta(seconds=timeout)
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"timeout must be a datetime.timedelta or seconds, not {type(timeout).__name__}")
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


# Registered before any group's _shutdown, so it runs after them (atexit is
# last in, first out): a group that ended on its own worker thread may still
# be leaving libinc's group there; the process must not exit under it.
atexit.register(_wait_for_workers, 60.0)

if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create)
