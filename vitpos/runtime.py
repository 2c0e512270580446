"""Run-time settings resolved in code: ``trainer.precision: auto`` and ``threads: auto``.

precision ``auto``: ``bf16-mixed`` on a CUDA device that supports bfloat16,
and on a CPU with native bfloat16 matmuls (AVX512-BF16 or AMX); ``32-true``
elsewhere. On a CPU without native bf16 the emulated kernels are slower than
float32, so autocast would cost time, not save it. Measured on an AVX512-BF16
EPYC, a ViT step under CPU autocast runs at ~1.4x float32, and a
short CIFAR-10 training reaches the float32 accuracy (docs/performance.md).

threads ``auto``: ``torch`` threads = usable cores / concurrent jobs, where
the job count comes from the Hydra joblib launcher (``hydra.launcher.n_jobs``)
or from ``vitpos_local`` (every job at once) when a sweep runs jobs side by side. Two jobs that each use every core
oversubscribe OpenMP and collapse to a few images/s.
"""

from __future__ import annotations

import logging
import os

# torch is imported inside the functions that use it: the config check reads the thread and
# memory limits from here before torch loads (a bad option is refused in under a second)

PRECISIONS_32 = "32-true"
PRECISION_BF16 = "bf16-mixed"


def cpu_supports_bf16() -> bool:
    """True when the CPU has native bfloat16 dot products (AVX512-BF16 or AMX) and torch may use
    them: ``ATEN_CPU_CAPABILITY=avx2`` or ``ONEDNN_MAX_CPU_ISA=AVX2`` hold torch to AVX2 kernels,
    where bf16 is emulated, so such a CPU then trains as an AVX2-only one (float32)."""
    import torch

    if (
        not torch.backends.cpu.get_cpu_capability().startswith("AVX512")
        or not torch.ops.mkldnn._is_mkldnn_bf16_supported()
    ):
        return False
    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(cpu, probe, None)
        if fn is not None and fn():
            return True
    return False


def resolve_precision(precision, accelerator: str | None = "auto") -> str | int:
    """``trainer.precision`` as Lightning takes it; ``auto`` is decided here
    (see the module docstring). Any other value passes through unchanged."""
    if precision != "auto":
        return precision
    import torch

    if uses_cuda(accelerator):
        return PRECISION_BF16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "16-mixed"
    return PRECISION_BF16 if cpu_supports_bf16() else PRECISIONS_32


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def resolve_threads(threads, n_jobs: int = 1) -> int | None:
    """Threads per job: an int as given, ``auto`` = cores // jobs (at least 1),
    ``null`` = leave torch's choice alone (returns None)."""
    if threads in (None, "none", "null"):
        return None
    if threads == "auto":
        return max(usable_cores() // max(int(n_jobs), 1), 1)
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0:  # True is an int in Python
        return threads
    raise ValueError(f"threads={threads!r}; valid: auto, a positive integer, or null (threads=...)")


def apply_threads(threads, n_jobs: int = 1) -> int | None:
    """Set ``torch.set_num_threads`` (and OMP_NUM_THREADS for child processes)
    per :func:`resolve_threads`; returns the count set, or None."""
    n = resolve_threads(threads, n_jobs)
    if n is not None:
        import torch

        torch.set_num_threads(n)
        os.environ["OMP_NUM_THREADS"] = str(n)
    return n


def launcher_workers() -> int:
    """Jobs the Hydra joblib launcher runs side by side in worker processes of this one
    (``hydra.launcher.n_jobs``; -1 = every core, as joblib counts), or 1 outside such a sweep."""
    try:
        from hydra.core.hydra_config import HydraConfig

        n = int(HydraConfig.get().launcher.get("n_jobs", 1) or 1)
    except (ImportError, ValueError, AttributeError, TypeError):
        return 1
    return n if n > 0 else max(usable_cores() + 1 + n, 1)


def sweep_jobs() -> int:
    """Jobs a sweep runs side by side on this machine: ``hydra/launcher=vitpos_local``'s jobs, all
    at once (its launcher sets ``VITPOS_JOBS_AT_ONCE``: hydra_plugins/vitpos_submitit/tolerant.py), or
    the joblib launcher's workers; 1 outside such a sweep."""
    at_once = os.environ.get("VITPOS_JOBS_AT_ONCE", "")
    return int(at_once) if at_once.isdigit() and int(at_once) > 0 else launcher_workers()


def trainer_precision(trainer: dict) -> str | int:
    """``trainer.precision`` of a plain trainer config, ``auto`` resolved. The
    config keeps ``auto``; the run folder's hash (vitpos/run/identity.py) and the
    Trainer both see the resolved value, so ``auto`` on a machine without bf16
    names the same run as ``32-true``."""
    return resolve_precision(trainer.get("precision", "auto"), trainer.get("accelerator", "auto"))


def uses_cuda(accelerator: str | None = "auto") -> bool:
    """Whether ``trainer.accelerator`` puts the run on a CUDA GPU (``auto``: when one is there)."""
    import torch

    return accelerator in ("gpu", "cuda") or (accelerator in (None, "auto") and torch.cuda.is_available())


def machine_kind(accelerator: str | None = "auto") -> str:
    """The kind of machine a run trains on, as its record names it: ``cuda-<GPU name>``, else the
    CPU's kind: ``cpu-avx512bf16`` where ``auto`` trains in bf16, else torch's CPU capability
    (``cpu-avx2``, ``cpu-avx512``, ...). Kinds differ in precision and speed: a comparison reads
    this before it sets two runs side by side."""
    import torch

    if uses_cuda(accelerator) and torch.cuda.is_available():
        return f"cuda-{torch.cuda.get_device_name()}"
    if cpu_supports_bf16():
        return "cpu-avx512bf16"
    return f"cpu-{torch.backends.cpu.get_cpu_capability().lower()}"


def resolve_runtime(cfg) -> None:
    """Apply ``threads``: ``auto`` acts only when a sweep runs jobs side by side
    (cores // jobs each); a single run keeps torch's choice, which honours
    OMP_NUM_THREADS."""
    threads = cfg.get("threads", "auto")
    jobs = sweep_jobs()
    if threads == "auto" and jobs == 1:
        return
    n = apply_threads(threads, jobs)
    if n is not None:
        logging.getLogger("vitpos").info("torch threads: %d (threads=%s, %d job(s) side by side)", n, threads, jobs)


# ------------------------------------------------------------------ memory
def _read_int(path: str) -> int | None:
    try:
        text = open(path).read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" for no limit


def cgroup_limit() -> tuple[int | None, int | None]:
    """(limit, usage) in bytes of this process's memory cgroup (v2, else v1), None where unknown."""
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        value = _read_int(limit)
        if value is not None and value < 1 << 60:  # v1 writes a huge number for no limit
            return value, _read_int(usage)
    return None, None


def address_space_limit() -> int | None:
    """The soft ``RLIMIT_AS`` (``ulimit -v``) in bytes, or None when unlimited or unknown."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, ValueError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _own_virtual_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_limit() -> int:
    """Bytes this process may use at most: the machine's RAM, lowered by ``ulimit -v``
    (RLIMIT_AS) and by the cgroup's memory limit (a container's)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 16 GiB
        total = 16 << 30
    limits = [total, address_space_limit(), cgroup_limit()[0]]
    return min(x for x in limits if x is not None)


def available_memory(device: str = "cpu") -> int:
    """Bytes free now on ``device``: CUDA, the allocator's view; CPU, the least of the
    machine's MemAvailable, what ``ulimit -v`` leaves this process and what its cgroup leaves."""
    if str(device).startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info(torch.device(device))[0])
    free = [_meminfo("MemAvailable") or memory_limit()]
    rlimit = address_space_limit()
    if rlimit is not None:
        free.append(max(rlimit - _own_virtual_size(), 0))
    limit, usage = cgroup_limit()
    if limit is not None:
        free.append(max(limit - (usage or 0), 0))
    return min(free)
