"""GPU metrics of the schema, read from NVML (package nvidia-ml-py, module ``pynvml``) at scrape
time by a prometheus_client ``Collector``.

Per device, labelled ``gpu`` (NVML index, as nvidia-smi and dcgm-exporter number GPUs) and
``uuid``: memory used and installed, kernel and memory-controller busy fractions, board power,
die temperature, SM clock, and the engine's KV-cache reservation when one is reported.

Failures never fail a scrape. Without NVML (pynvml missing, no driver, no device) the only
series is ``gpu_up 0``, and why is logged once; a device or a call that fails mid-scrape drops
its series only, and each distinct error is logged once. NVML is initialised lazily on the
first scrape; after ``Uninitialized`` (someone shut NVML down) it is re-initialised at once and
the scrape retried, after ``GPU is lost`` at the next scrape.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from exporters import schema
from exporters.schema import GPU_SPECS, get_spec

__all__ = ["GpuCollector", "Nvml", "nvml_index_for_cuda_device"]

logger = logging.getLogger(__name__)

KvCacheBytes = Callable[[], Mapping[int, int]]


class Nvml(Protocol):
    """The part of the ``pynvml`` module this collector uses (a fake can stand in for it).
    Errors are ``NVMLError`` instances whose ``value`` is an ``NVML_ERROR_*`` code."""

    NVMLError: type[Exception]
    NVML_ERROR_UNINITIALIZED: int
    NVML_ERROR_GPU_IS_LOST: int
    NVML_ERROR_LIBRARY_NOT_FOUND: int
    NVML_ERROR_DRIVER_NOT_LOADED: int
    NVML_ERROR_FUNCTION_NOT_FOUND: int
    NVML_ERROR_NOT_SUPPORTED: int
    NVML_TEMPERATURE_GPU: int
    NVML_CLOCK_SM: int
    nvmlMemory_v2: int

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int: ...


class _NvmlUninitialized(Exception):
    """NVML answered Uninitialized mid-scrape: every handle is void, start over."""


# --- readings: one NVML call each, converted to the schema's base units ---------------------

def _memory(nvml: Nvml, handle: Any) -> dict[str, float]:
    # Used as nvidia-smi and DCGM's FB_USED report it: without the driver's reservation (NVML's
    # v2 memory info, R510+; 645 MiB on an H200). The v1 ``used`` is total - free, reservation
    # included, and is the fallback for older drivers, which lack v2.
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) not in (nvml.NVML_ERROR_FUNCTION_NOT_FOUND,
                                               nvml.NVML_ERROR_NOT_SUPPORTED):
            raise
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
    return {schema.GPU_MEMORY_USED_BYTES: info.used, schema.GPU_MEMORY_TOTAL_BYTES: info.total}


def _utilization(nvml: Nvml, handle: Any) -> dict[str, float]:
    # Percent of NVML's last sample period (1/6 s to 1 s by product) in which a kernel ran
    # (.gpu), and in which the memory controller was busy reading or writing (.memory). The
    # latter is a busy-time fraction, not a fraction of peak bandwidth.
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    return {
        schema.GPU_UTILIZATION_RATIO: rates.gpu / 100,
        schema.GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO: rates.memory / 100,
    }


def _power(nvml: Nvml, handle: Any) -> dict[str, float]:
    return {schema.GPU_POWER_WATTS: nvml.nvmlDeviceGetPowerUsage(handle) / 1000}  # mW -> W


def _temperature(nvml: Nvml, handle: Any) -> dict[str, float]:
    celsius = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
    return {schema.GPU_TEMPERATURE_CELSIUS: celsius}


def _sm_clock(nvml: Nvml, handle: Any) -> dict[str, float]:
    mhz = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
    return {schema.GPU_SM_CLOCK_HERTZ: mhz * 1e6}


_READERS: tuple[Callable[[Nvml, Any], dict[str, float]], ...] = (
    _memory, _utilization, _power, _temperature, _sm_clock,
)
_DEVICE_METRICS: tuple[str, ...] = tuple(
    spec.name for spec in GPU_SPECS if spec.labels == (schema.GPU, schema.UUID)
)


@dataclass(slots=True)
class _Device:
    index: int
    uuid: str
    values: dict[str, float] = field(default_factory=dict)


def nvml_index_for_cuda_device(
    cuda_index: int, cuda_visible_devices: str | None, uuids: Mapping[int, str]
) -> int | None:
    """The NVML index of this process's ``cuda:<cuda_index>``, or None if it cannot be told.

    CUDA numbers only the devices in CUDA_VISIBLE_DEVICES (indices or UUID prefixes), NVML
    numbers every device. Assumes CUDA enumerates in PCI order (CUDA_DEVICE_ORDER=PCI_BUS_ID,
    or identical GPUs); MIG instances are not mapped.
    """
    if cuda_visible_devices is None:
        return cuda_index
    entries = [entry.strip() for entry in cuda_visible_devices.split(",")]
    if not 0 <= cuda_index < len(entries):
        return None
    entry = entries[cuda_index]
    if entry.isdigit():
        return int(entry)
    if entry.startswith("GPU-"):
        matches = [index for index, uuid in uuids.items() if uuid.startswith(entry)]
        return matches[0] if len(matches) == 1 else None
    return None


class GpuCollector(Collector):
    """The schema's GPU metrics, read from NVML at each scrape.

    ``nvml``: the pynvml module, or a fake; None imports pynvml at the first scrape.
    ``kv_cache_bytes``: the engine's KV-cache reservation per CUDA device index of this process
    (``cuda:N`` -> bytes), mapped to NVML devices through CUDA_VISIBLE_DEVICES as read from
    ``environ`` (default ``os.environ``).
    """

    def __init__(
        self,
        nvml: Nvml | None = None,
        kv_cache_bytes: KvCacheBytes | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._nvml = nvml
        self._kv_cache_bytes = kv_cache_bytes
        self._cuda_visible_devices = (os.environ if environ is None else environ).get(
            "CUDA_VISIBLE_DEVICES"
        )
        self._initialised = False
        self._reset_before_next_scrape = False
        self._handles: dict[int, tuple[Any, str]] = {}  # NVML index -> (handle, uuid)
        self._logged: set[str] = set()
        self._lock = threading.Lock()  # scrapes may run concurrently (one thread each)

    def describe(self) -> Iterator[Metric]:
        # Names only, so registering touches no hardware.
        yield from _families([], up=False, samples=False)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            devices = self._scrape()
        yield from _families(devices, up=bool(devices), samples=True)

    def close(self) -> None:
        """Release NVML (a later scrape initialises it again)."""
        with self._lock:
            self._shutdown()

    # --- NVML lifecycle ------------------------------------------------------------------------

    def _scrape(self) -> list[_Device]:
        if self._reset_before_next_scrape:
            self._shutdown()
        for _attempt in range(2):
            nvml = self._initialise()
            if nvml is None:
                return []
            try:
                devices = self._read_devices(nvml)
            except _NvmlUninitialized:
                self._forget_nvml()  # NVML is down already: no shutdown to balance
                continue
            self._add_kv_cache_bytes(devices)
            return devices
        return []

    def _initialise(self) -> Nvml | None:
        nvml = self._nvml
        if nvml is None:
            try:
                import pynvml
            except ImportError:
                self._log_once("gpu_up 0: pynvml is not installed (pip install nvidia-ml-py)")
                return None
            nvml = self._nvml = pynvml
        if self._initialised:
            return nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            absent = _code(error) in (
                nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED,
            )
            self._log_once(f"gpu_up 0: NVML initialisation failed: {error}",
                           logging.INFO if absent else logging.WARNING)
            return None
        self._initialised = True
        return nvml

    def _shutdown(self) -> None:
        """Undo our nvmlInit (NVML counts them, so other users in-process are unaffected)."""
        self._reset_before_next_scrape = False
        if self._nvml is not None and self._initialised:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as error:
                self._log_once(f"nvmlShutdown failed: {error}")
        self._forget_nvml()

    def _forget_nvml(self) -> None:
        self._initialised = False
        self._handles.clear()

    # --- reading -------------------------------------------------------------------------------

    def _read_devices(self, nvml: Nvml) -> list[_Device]:
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as error:
            self._handle_error(nvml, error, "nvmlDeviceGetCount")
            return []
        if count == 0:
            self._log_once("gpu_up 0: NVML reports no GPU", logging.INFO)
        devices = (self._read_device(nvml, index) for index in range(count))
        return [device for device in devices if device is not None]

    def _read_device(self, nvml: Nvml, index: int) -> _Device | None:
        try:
            handle, uuid = self._handle(nvml, index)
        except nvml.NVMLError as error:
            self._handle_error(nvml, error, f"GPU {index}: handle or UUID lookup")
            return None
        device = _Device(index, uuid)
        for read in _READERS:
            try:
                device.values.update(read(nvml, handle))
            except nvml.NVMLError as error:
                self._handle_error(nvml, error, f"GPU {index} ({uuid}): {read.__name__[1:]}")
                if _code(error) == nvml.NVML_ERROR_GPU_IS_LOST:
                    return None
        return device

    def _handle(self, nvml: Nvml, index: int) -> tuple[Any, str]:
        if index not in self._handles:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            self._handles[index] = (handle, nvml.nvmlDeviceGetUUID(handle))
        return self._handles[index]

    def _handle_error(self, nvml: Nvml, error: Exception, what: str) -> None:
        code = _code(error)
        if code == nvml.NVML_ERROR_UNINITIALIZED:
            self._log_once(f"NVML uninitialised during {what}; re-initialising")
            raise _NvmlUninitialized from error
        if code == nvml.NVML_ERROR_GPU_IS_LOST:
            self._reset_before_next_scrape = True
        self._log_once(f"{what} failed: {error}")

    def _add_kv_cache_bytes(self, devices: list[_Device]) -> None:
        if self._kv_cache_bytes is None or not devices:
            return
        try:
            by_cuda_index = dict(self._kv_cache_bytes())
        except Exception as error:  # the engine's callback: never fail the scrape for it
            self._log_once(f"kv_cache_bytes callback failed: {error!r}")
            return
        by_index = {device.index: device for device in devices}
        uuids = {device.index: device.uuid for device in devices}
        for cuda_index, num_bytes in by_cuda_index.items():
            index = nvml_index_for_cuda_device(cuda_index, self._cuda_visible_devices, uuids)
            if index in by_index:
                by_index[index].values[schema.GPU_MEMORY_KV_CACHE_BYTES] = num_bytes
            else:
                self._log_once(f"KV cache of cuda:{cuda_index} matches no NVML device "
                               f"(CUDA_VISIBLE_DEVICES={self._cuda_visible_devices!r})")

    def _log_once(self, message: str, level: int = logging.WARNING) -> None:
        if message not in self._logged:
            self._logged.add(message)
            logger.log(level, message)


def _code(error: Exception) -> int | None:
    value = getattr(error, "value", None)
    return value if isinstance(value, int) else None


def _families(devices: list[_Device], up: bool, samples: bool) -> Iterator[Metric]:
    """gpu_up, then one gauge family per device metric of the schema."""
    up_family = GaugeMetricFamily(schema.GPU_UP, get_spec(schema.GPU_UP).help)
    if samples:
        up_family.add_metric([], 1.0 if up else 0.0)
    yield up_family
    if samples and not devices:
        return
    for name in _DEVICE_METRICS:
        family = GaugeMetricFamily(name, get_spec(name).help, labels=[schema.GPU, schema.UUID])
        for device in devices:
            if name in device.values:
                family.add_metric([str(device.index), device.uuid], device.values[name])
        yield family
