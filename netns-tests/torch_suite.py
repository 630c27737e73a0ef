#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch 1.13's own process-group suite (torch/testing/_internal/
distributed/distributed_test.py, DistributedTest._DistTestBase) with
backend "incin" (or "gloo" for comparison), 4 ranks in the lab's 4 worker
namespaces. Run by lab.torch_suite_single (netns-tests/lab_torch_suite.sh).

  torch_suite.py --backend incin|gloo --lab PREFIX --am HOST:PORT --out FILE.json
                 [--tests REGEX] [--logs DIR]

How it runs, and why:
- Debian ships the suite (torch.testing._internal) but not PyTorch's test/
  folder: this file plays test/distributed/test_distributed_spawn.py. Its
  class subclasses TestDistBackend and _DistTestBase exactly as that file
  does for gloo, nccl and ucc; the tests are *selected as for gloo*:
  distributed_test.py reads BACKEND when it is imported and its skip
  decorators (sandcastle_skip_if(BACKEND != "gloo"), require_backend(...))
  are evaluated then, so it is imported with BACKEND=gloo and its module
  BACKEND (what init_process_group and the tests' branches use) is set to
  the backend under test afterwards. Both backends therefore run the same
  selection; every test gloo runs on CPU runs for incin too.
- Like run_test.py's file-init variant: INIT_METHOD=file://, WORLD_SIZE=4,
  TEMP_DIR per test (TestDistBackend.setUp).
- MultiProcessTestCase spawns one process per rank with multiprocessing's
  "spawn" and talks to it over inherited pipes. Its executable is set to a
  wrapper that runs rank N's process through `inclab exec LAB wN` (setns
  into the worker's network namespace, its own sysfs, the member's
  certificate in INC_TLS_*), which execs all the way: the pid, the pipe
  file descriptors and exit codes are the harness's as on one host. The
  ranks reach each other over the lab's data network (gloo on eth0), and
  libinc joins from each worker's eth0 as on real hosts.
- Each test is its own job at the AM (INC_JOB_ID = LAB-s<N>, its
  credential fetched by the parent with `inclab ctl LAB job credential`):
  a test that fails or is killed cannot hold the next test's group.
- For incin, SKIPS lists every test of the selection that is not run, each
  with its reason; the result JSON has every test's status, and per test
  and rank the backend's summary (INCIN_TORCH_SUMMARY_JSON).

Exit 0 when no test failed, 1 otherwise (the JSON says which), 77 when torch
or its test suite is missing.
"""
import argparse
import json
import multiprocessing
import multiprocessing.resource_tracker
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BACKEND = os.environ.get("INCIN_SUITE_BACKEND", "incin")

# Tests of the gloo selection that incin does not run, each with why. Every
# other test of the selection must pass.
SKIPS = {
}


def _import_suite():
    """distributed_test with gloo's selection and BACKEND under test."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        # PyPI's expecttest (not packaged by Debian) is the base of
        # common_utils.TestCase for its assertExpectedInline, which the
        # process-group suite does not use: a stand-in with plain unittest.
        import types
        m = types.ModuleType("expecttest")
        m.TestCase = unittest.TestCase
        m.ACCEPT = False
        sys.modules["expecttest"] = m
    os.environ["BACKEND"] = "gloo"
    os.environ.setdefault("WORLD_SIZE", "4")
    # The file-init variant (run_test.py's with_init_file): the decorators of
    # tests that need file:// read INIT_METHOD at import.
    os.environ.setdefault("INIT_METHOD", "file:///tmp/incin-suite-init-unused")
    os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
    from torch.testing._internal.distributed import distributed_test as dt
    dt.BACKEND = _IncinAsGloo(BACKEND) if BACKEND == "incin" else BACKEND
    os.environ["BACKEND"] = BACKEND
    return dt


class _IncinAsGloo(str):
    """The suite's BACKEND under incin: the string "incin" (what
    init_process_group, new_group and the tests' expectations of
    dist.get_backend() get), which the tests' own branches treat as gloo:
    `BACKEND == "gloo"`, `BACKEND in {"gloo", ...}`. Several tests only set
    up their model for `BACKEND in ("mpi", "gloo")` or `== "nccl"`; with
    this every check the suite makes of gloo on CPU it makes of incin."""

    def __eq__(self, other):
        return str.__eq__(self, other) or (isinstance(other, str) and str.__eq__("gloo", other))

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):  # set membership as gloo ("gloo" in a set of names)
        return hash("gloo")


try:
    import torch  # noqa: F401
    import torch.distributed as dist
    dt = _import_suite()
    from torch.testing._internal import common_distributed
except ImportError as e:  # the SKIP is main()'s
    dt = None
    _IMPORT_ERROR = e
if dt is not None and BACKEND == "incin":
    import incin  # registers the backend
    # torch 1.13's dist.monitored_barrier refuses every backend not named
    # "gloo"; incin.monitored_barrier is the backend's equivalent
    # (docs/pytorch.md), so the suite's monitored_barrier tests check it.
    dist.monitored_barrier = incin.monitored_barrier


if dt is not None:

    class TestDistBackendWithSpawn(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        """test_distributed_spawn.py's class, one rank per lab worker."""

        def setUp(self):
            why = _probe_skip(type(self), self._current_test_name())
            if why:
                raise unittest.SkipTest(why)
            super().setUp()
            _job_env(self._current_test_name())
            self._spawn_processes()
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe):
            # TestDistBackend._run without _set_ddp_with_replicated_tensor(True):
            # that experimental DDP mode imports torch.distributed._shard, which
            # Debian's torch 1.13 cannot import under Python 3.11 (its dataclass
            # "mutable default ... TensorProperties" ValueError), so every DDP
            # test would fail before any collective, with every backend. Plain
            # DDP (what users run) is tested instead.
            self = cls(test_name)
            self.rank = rank
            self.file_name = file_name
            pg_timeout_seconds = dt.CUSTOM_PG_TIMEOUT.get(test_name, dt.default_pg_timeout)
            timeout = dt.timedelta(seconds=pg_timeout_seconds)
            dist.init_process_group(init_method=self.init_method, backend=dt.BACKEND,
                                    world_size=int(self.world_size), rank=self.rank, timeout=timeout)
            # As TestDistBackend._run: every rank initialised before the test.
            self._barrier()
            self.run_test(test_name, pipe)
            self._barrier()
            dist.destroy_process_group()
            sys.exit(0)

        def _start_processes(self, proc):
            # MultiProcessTestCase._start_processes, with the rank in the
            # environment for the spawn wrapper (rank N -> worker wN).
            self.processes = []
            for rank in range(int(self.world_size)):
                parent_conn, child_conn = torch.multiprocessing.Pipe()
                os.environ["INCIN_SUITE_RANK"] = str(rank)
                try:
                    process = proc(target=self.__class__._run, name="process " + str(rank),
                                   args=(rank, self._current_test_name(), self.file_name, child_conn))
                    process.start()
                finally:
                    del os.environ["INCIN_SUITE_RANK"]
                self.pid_to_pipe[process.pid] = parent_conn
                self.processes.append(process)


_ARGS = None
_TEST_INDEX = [0]


def _probe_skip(cls, name):
    """The skip a test's ranks would report, found without them: about half
    of the selection skips in its ranks' first lines (no CUDA: the
    decorators call sys.exit with a TEST_SKIPS code before any collective),
    and 4 spawned ranks cost ~13 s each time. The test function runs in a
    forked child of this process with no process group, for at most 3 s:
    a TEST_SKIPS exit code is that skip (the same message the harness
    gives); anything else (an exception for the missing group, a timeout,
    success) means the test really runs, with its ranks."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            signal.alarm(3)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            self = cls(name)
            self.rank = 0
            getattr(cls, name)(self)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except unittest.SkipTest:  # run_test turns it into this exit code
            code = common_distributed.TEST_SKIPS["generic"].exit_code
        except BaseException:  # noqa: BLE001 (any other outcome: run it)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    for skip in common_distributed.TEST_SKIPS.values():
        if code == skip.exit_code and code != 0:
            return skip.message
    return None


def _job_env(test):
    """The parent's part of each test: a job of its own at the AM."""
    if BACKEND != "incin" or _ARGS is None or not _ARGS.lab:
        return
    _TEST_INDEX[0] += 1
    job = f"{_ARGS.lab}-s{_TEST_INDEX[0]}"
    os.environ["INC_JOB_ID"] = job
    os.environ["INCIN_TORCH_SUMMARY_JSON"] = os.path.join(_ARGS.logs, f"{test}-%r.json")
    cred = subprocess.run([_ARGS.inclab, "ctl", _ARGS.lab, "job", "credential", job], capture_output=True,
                          text=True)
    if cred.returncode == 0 and cred.stdout.strip():
        os.environ["INC_JOB_CREDENTIAL"] = cred.stdout.strip()
    else:  # an insecure lab has none
        os.environ.pop("INC_JOB_CREDENTIAL", None)


class Result(unittest.TextTestResult):
    """Every test's status and message, for the JSON."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.status = {}
        self.t0 = {}

    def _name(self, test):
        return test.id().split(".")[-1]

    def startTest(self, test):
        self.t0[self._name(test)] = time.time()
        super().startTest(test)

    def _set(self, test, status, msg=""):
        n = self._name(test)
        self.status[n] = {"status": status, "message": msg[-3000:],
                          "seconds": round(time.time() - self.t0.get(n, time.time()), 1)}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "fail", "unexpected success")


def _wrapper(path, inclab, lab, python):
    """multiprocessing's spawn executable: rank N's process in worker wN."""
    with open(path, "w") as f:
        f.write("#!/bin/bash\n"
                "# torch_suite.py's spawn executable: INCIN_SUITE_RANK=N runs in worker wN\n"
                "# (inclab exec execs: same pid, same inherited pipes).\n"
                f'[ -n "${{INCIN_SUITE_RANK:-}}" ] || exec {python} "$@"\n'
                f'exec {inclab} exec {lab} "w$INCIN_SUITE_RANK" {python} "$@"\n')
    os.chmod(path, 0o755)


def main():
    global _ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["incin", "gloo"], required=True)
    p.add_argument("--lab", default="", help="inclab prefix (none: every rank on this host, over lo)")
    p.add_argument("--am", default="")
    p.add_argument("--inclab", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "inclab"))
    p.add_argument("--out", required=True)
    p.add_argument("--logs", default="")
    p.add_argument("--tests", default="", help="regular expression on test names")
    a = p.parse_args()
    if dt is None:
        print(f"SKIP: torch or its distributed test suite is not importable: {_IMPORT_ERROR}", file=sys.stderr)
        return 77
    if a.backend != BACKEND:
        sys.exit("set INCIN_SUITE_BACKEND to --backend (the spawned ranks import this file and read it)")
    a.logs = a.logs or tempfile.mkdtemp(prefix="incin-suite-")
    os.makedirs(a.logs, exist_ok=True)
    _ARGS = a
    os.environ["INCIN_TORCH_SUMMARY"] = "0"
    if a.lab:
        os.environ["INC_AM_ADDRESS"] = a.am
        os.environ["INC_IFACE"] = "eth0"
        os.environ["GLOO_SOCKET_IFNAME"] = "eth0"
        # The tracker outside the lab, before the wrapper is the executable.
        multiprocessing.resource_tracker.ensure_running()
        wrapper = os.path.join(a.logs, "spawn-python")
        _wrapper(wrapper, a.inclab, a.lab, sys.executable)
        multiprocessing.set_executable(wrapper)
    else:  # a quick look without the lab: no switches (incin falls back)
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"

    skips = SKIPS if a.backend == "incin" else {}
    cls = TestDistBackendWithSpawn
    names = sorted(n for n in dir(cls) if n.startswith("test_"))
    if a.tests:
        names = [n for n in names if re.search(a.tests, n)]
    for n in names:
        if n in skips:
            setattr(cls, n, unittest.skip("incin: " + skips[n])(getattr(cls, n)))
    suite = unittest.TestSuite(cls(n) for n in names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result)
    t0 = time.time()
    res = runner.run(suite)
    counts = {s: sum(1 for v in res.status.values() if v["status"] == s) for s in ("pass", "fail", "skip")}
    # The backend's own counts over the suite (rank 0's summaries).
    offloaded, fallback, failed = {}, {}, 0
    for n in names:
        f = os.path.join(a.logs, f"{n}-0.json")
        if not os.path.exists(f):
            continue
        for line in open(f):
            s = json.loads(line)
            failed += s["failed_offloads"]
            for coll, c in s["collectives"].items():
                offloaded[coll] = offloaded.get(coll, 0) + c["offloaded"]["calls"]
            for r, k in s["fallback_reasons"].items():
                fallback[r] = fallback.get(r, 0) + k
    doc = {"backend": a.backend, "tests": res.status, "counts": counts, "seconds": round(time.time() - t0),
           "skip_list": skips, "offloaded_calls": offloaded, "fallback_calls": fallback,
           "failed_offloads": failed}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"torch suite, backend {a.backend}: {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped of {len(names)} in {doc['seconds']} s")
    return 0 if counts["fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
