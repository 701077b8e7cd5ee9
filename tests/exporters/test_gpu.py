"""GpuCollector turns NVML readings into the schema's GPU metrics, and a failing GPU into fewer
series, never into a failed scrape.

No GPU exists on the test machine, so NVML is faked: the fake answers with readings recorded
from real H100s (nvidia-smi -q prints the same NVML fields, rounded) and raises pynvml's own
error types with their real error codes. One test runs the real pynvml against this machine.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporters import schema
from exporters.gpu import GpuCollector, nvml_index_for_cuda_device

MIB = 2**20


@dataclass(frozen=True, slots=True)
class Reading:
    """One GPU as NVML reports it, in NVML's units."""

    uuid: str
    memory_total_mib: int
    memory_used_mib: int       # as nvidia-smi prints it (NVML v2): the reservation not counted
    memory_reserved_mib: int   # the driver's reservation; NVML v1 counts it as used
    gpu_percent: int
    memory_percent: int
    power_milliwatts: int
    temperature_celsius: int
    sm_clock_mhz: int


# Two idle H100 SXM5 boards, GPU 00000000:18:00.0 and 00000000:2A:00.0 of the `nvidia-smi -q`
# capture in thamada/nvidia-smi nvsim/H100SXMx8_smi.py @ 03fbe6e6 (driver 565.57.01): fields
# "GPU UUID", "FB Memory Usage" Total 81559 MiB / Reserved 454 MiB / Free 81106 MiB, so used
# (NVML v2, as nvidia-smi shows it) is 0 and NVML v1's used = total - free = 453 MiB (the capture
# rounds each field to MiB, hence 453 + 0 + 81106 for the reservation here), "Utilization" Gpu
# 0 % / Memory 0 %, "GPU Current Temp", "Power Draw" (100.89 W and 82.81 W), "Clocks" SM 345 MHz.
IDLE_0 = Reading("GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1", 81559, 0, 81559 - 81106,
                 0, 0, 100_890, 30, 345)
IDLE_1 = Reading("GPU-7c3cadbd-17e5-0913-f69b-c618122ea0cd", 81559, 0, 81559 - 81106,
                 0, 0, 82_810, 30, 345)
# An H100 80GB HBM3 under load: GPU 1 of the nvidia-smi table in ModelCloud/GPTQModel issue
# #2898 (57C, 699W / 700W, 58333MiB / 81559MiB, 100 %). That table shows no UUID, memory-
# controller utilization or SM clock: the UUID is the 3A:00.0 board's of the capture above, the
# SM clock the "Max Clocks" SM 1980 MHz recorded there, the reservation the 454 MiB of the
# same board model there, and 37 % is a hand-picked value.
LOADED = Reading("GPU-2d50cdf6-dd67-9f2e-855e-0d4d6d395a2f", 81559, 58333, 454,
                 100, 37, 699_000, 57, 1980)


class FakeNvml:
    """pynvml's surface over recorded readings. ``fail[(function, gpu)] = NVML_ERROR_*`` makes
    that call raise; ``initialised = False`` acts as if someone called nvmlShutdown."""

    NVMLError = pynvml.NVMLError
    NVML_ERROR_UNINITIALIZED = pynvml.NVML_ERROR_UNINITIALIZED
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_FUNCTION_NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(self, *devices: Reading, init_error: int | None = None,
                 memory_v2: bool = True) -> None:
        self.devices = list(devices)
        self.init_error = init_error
        # False: a driver before R510, without nvmlDeviceGetMemoryInfo_v2
        self.memory_v2 = memory_v2
        self.fail: dict[tuple[str, int], int] = {}
        self.initialised = False
        self.num_init_calls = 0
        self.num_shutdown_calls = 0

    def nvmlInit(self) -> None:
        self.num_init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.num_shutdown_calls += 1
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount", -1)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._check("nvmlDeviceGetHandleByIndex", index)
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._device("nvmlDeviceGetUUID", handle).uuid

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        device = self._device("nvmlDeviceGetMemoryInfo", handle)
        total, used = device.memory_total_mib * MIB, device.memory_used_mib * MIB
        reserved = device.memory_reserved_mib * MIB
        free = total - used - reserved
        if version is None:  # nvmlMemory_t: used = total - free
            return SimpleNamespace(total=total, used=used + reserved, free=free)
        assert version == pynvml.nvmlMemory_v2
        if not self.memory_v2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return SimpleNamespace(version=version, total=total, reserved=reserved, used=used,
                               free=free)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        device = self._device("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=device.gpu_percent, memory=device.memory_percent)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._device("nvmlDeviceGetPowerUsage", handle).power_milliwatts

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._device("nvmlDeviceGetTemperature", handle).temperature_celsius

    def nvmlDeviceGetClockInfo(self, handle: int, clock_type: int) -> int:
        assert clock_type == pynvml.NVML_CLOCK_SM
        return self._device("nvmlDeviceGetClockInfo", handle).sm_clock_mhz

    def _device(self, function: str, index: int) -> Reading:
        self._check(function, index)
        return self.devices[index]

    def _check(self, function: str, index: int) -> None:
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if (function, index) in self.fail:
            raise pynvml.NVMLError(self.fail[function, index])


def scrape(collector: GpuCollector, times: int = 1) -> CollectorRegistry:
    """A fresh registry holding ``collector``, scraped ``times`` times (the last is kept)."""
    registry = CollectorRegistry()
    registry.register(collector)
    for _ in range(times):
        generate_latest(registry)
    return registry


def value(registry: CollectorRegistry, name: str, gpu: int, uuid: str) -> float | None:
    return registry.get_sample_value(name, {"gpu": str(gpu), "uuid": uuid})


def series(registry: CollectorRegistry) -> list[tuple[str, dict[str, str]]]:
    return [(s.name, s.labels) for family in registry.collect() for s in family.samples]


def count_logged(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


@pytest.fixture
def nvml() -> FakeNvml:
    return FakeNvml(IDLE_0, IDLE_1, LOADED)


# --- readings and units -------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "gpu", "reading", "expected"), [
    (schema.GPU_MEMORY_TOTAL_BYTES, 0, IDLE_0, 81559 * MIB),
    (schema.GPU_MEMORY_USED_BYTES, 0, IDLE_0, 0.0),
    (schema.GPU_MEMORY_USED_BYTES, 2, LOADED, 58333 * MIB),
    (schema.GPU_UTILIZATION_RATIO, 0, IDLE_0, 0.0),
    (schema.GPU_UTILIZATION_RATIO, 2, LOADED, 1.0),
    (schema.GPU_MEMORY_BANDWIDTH_UTILIZATION_RATIO, 2, LOADED, 0.37),
    (schema.GPU_POWER_WATTS, 0, IDLE_0, 100.89),
    (schema.GPU_POWER_WATTS, 1, IDLE_1, 82.81),
    (schema.GPU_POWER_WATTS, 2, LOADED, 699.0),
    (schema.GPU_TEMPERATURE_CELSIUS, 2, LOADED, 57.0),
    (schema.GPU_SM_CLOCK_HERTZ, 0, IDLE_0, 345e6),
    (schema.GPU_SM_CLOCK_HERTZ, 2, LOADED, 1.98e9),
], ids=[
    "81559 MiB installed", "idle board uses 0 MiB besides the reservation",
    "loaded board uses 58333 MiB",
    "0 % busy is 0", "100 % busy is 1", "37 % memory-controller busy is 0.37",
    "100890 mW is 100.89 W", "82810 mW is 82.81 W", "699000 mW is 699 W", "57 C",
    "345 MHz is 3.45e8 Hz", "1980 MHz is 1.98e9 Hz",
])
def test_each_reading_is_exported_in_base_units_with_index_and_uuid_labels(
    nvml: FakeNvml, name: str, gpu: int, reading: Reading, expected: float,
) -> None:
    registry = scrape(GpuCollector(nvml=nvml))
    assert value(registry, name, gpu, reading.uuid) == expected


def test_used_memory_leaves_out_the_drivers_reservation_as_nvidia_smi_and_dcgm_do() -> None:
    # On an H200 (driver 580) the v1 figure read 645 MiB above nvidia-smi's, all reservation.
    registry = scrape(GpuCollector(nvml=FakeNvml(LOADED)))
    assert value(registry, schema.GPU_MEMORY_USED_BYTES, 0, LOADED.uuid) == 58333 * MIB


def test_a_driver_without_v2_memory_info_reports_total_minus_free() -> None:
    registry = scrape(GpuCollector(nvml=FakeNvml(LOADED, memory_v2=False)))
    assert value(registry, schema.GPU_MEMORY_USED_BYTES, 0, LOADED.uuid) == (58333 + 454) * MIB
    assert value(registry, schema.GPU_MEMORY_TOTAL_BYTES, 0, LOADED.uuid) == 81559 * MIB


def test_gpu_up_is_1_and_every_device_has_every_metric(nvml: FakeNvml) -> None:
    registry = scrape(GpuCollector(nvml=nvml))
    assert registry.get_sample_value(schema.GPU_UP) == 1.0
    device_metrics = [spec.name for spec in schema.GPU_SPECS
                      if spec.labels and spec.name != schema.GPU_MEMORY_KV_CACHE_BYTES]
    for gpu, reading in enumerate((IDLE_0, IDLE_1, LOADED)):
        for name in device_metrics:
            assert value(registry, name, gpu, reading.uuid) is not None, (name, gpu)


def test_registering_reads_no_gpu(nvml: FakeNvml) -> None:
    CollectorRegistry().register(GpuCollector(nvml=nvml))
    assert nvml.num_init_calls == 0


def test_nvml_is_initialised_once_across_scrapes(nvml: FakeNvml) -> None:
    scrape(GpuCollector(nvml=nvml), times=3)
    assert nvml.num_init_calls == 1


def test_close_releases_nvml_and_a_later_scrape_starts_it_again(nvml: FakeNvml) -> None:
    collector = GpuCollector(nvml=nvml)
    registry = scrape(collector)
    collector.close()
    assert (nvml.num_shutdown_calls, nvml.initialised) == (1, False)
    assert value(registry, schema.GPU_POWER_WATTS, 0, IDLE_0.uuid) == 100.89
    assert nvml.num_init_calls == 2


# --- KV-cache share -----------------------------------------------------------------------------

KV_BYTES = 60 * 2**30


@pytest.mark.parametrize(("visible", "gpu"), [
    (None, 0), ("2", 2), ("1,2", 1), ("GPU-2d50cdf6", 2),
], ids=["all visible: cuda:0 is GPU 0", "CUDA_VISIBLE_DEVICES=2: cuda:0 is GPU 2",
        "CUDA_VISIBLE_DEVICES=1,2: cuda:0 is GPU 1", "a UUID prefix names GPU 2"])
def test_kv_cache_bytes_land_on_the_nvml_device_behind_cuda_0(
    nvml: FakeNvml, visible: str | None, gpu: int,
) -> None:
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    registry = scrape(GpuCollector(nvml=nvml, kv_cache_bytes=lambda: {0: KV_BYTES},
                                   environ=environ))
    kv = [(labels["gpu"], registry.get_sample_value(name, labels))
          for name, labels in series(registry) if name == schema.GPU_MEMORY_KV_CACHE_BYTES]
    assert kv == [(str(gpu), KV_BYTES)]


def test_without_a_kv_cache_source_there_is_no_kv_series(nvml: FakeNvml) -> None:
    registry = scrape(GpuCollector(nvml=nvml))
    assert all(name != schema.GPU_MEMORY_KV_CACHE_BYTES for name, _ in series(registry))


def test_a_failing_kv_cache_source_costs_only_the_kv_series(
    nvml: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> dict[int, int]:
        raise RuntimeError("engine not started")

    registry = scrape(GpuCollector(nvml=nvml, kv_cache_bytes=broken, environ={}), times=3)
    assert value(registry, schema.GPU_POWER_WATTS, 0, IDLE_0.uuid) == 100.89
    assert all(name != schema.GPU_MEMORY_KV_CACHE_BYTES for name, _ in series(registry))
    assert count_logged(caplog, "engine not started") == 1


@pytest.mark.parametrize(("cuda_index", "visible", "expected"), [
    (1, None, 1), (0, "3,1", 3), (1, "3,1", 1), (2, "3,1", None),
    (0, "GPU-7c3cadbd", 1), (0, "GPU-", None), (0, "MIG-4b3f0a2c-1d2e", None),
], ids=["unset: same index", "first visible", "second visible", "beyond the visible list",
        "UUID prefix", "ambiguous UUID prefix", "MIG instance"])
def test_nvml_index_for_cuda_device(cuda_index: int, visible: str | None,
                                    expected: int | None) -> None:
    uuids = {0: IDLE_0.uuid, 1: IDLE_1.uuid, 2: LOADED.uuid}
    assert nvml_index_for_cuda_device(cuda_index, visible, uuids) == expected


# --- failures -----------------------------------------------------------------------------------

def test_a_device_failing_mid_scrape_drops_only_its_series(
    nvml: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    nvml.fail["nvmlDeviceGetHandleByIndex", 1] = pynvml.NVML_ERROR_UNKNOWN
    registry = scrape(GpuCollector(nvml=nvml), times=3)
    assert registry.get_sample_value(schema.GPU_UP) == 1.0
    assert {labels["gpu"] for _, labels in series(registry) if labels} == {"0", "2"}
    assert value(registry, schema.GPU_POWER_WATTS, 2, LOADED.uuid) == 699.0
    assert count_logged(caplog, "GPU 1: handle or UUID lookup failed: Unknown Error") == 1


def test_one_call_failing_drops_only_its_metric(
    nvml: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    nvml.fail["nvmlDeviceGetPowerUsage", 0] = pynvml.NVML_ERROR_NOT_SUPPORTED
    registry = scrape(GpuCollector(nvml=nvml), times=3)
    assert value(registry, schema.GPU_POWER_WATTS, 0, IDLE_0.uuid) is None
    assert value(registry, schema.GPU_TEMPERATURE_CELSIUS, 0, IDLE_0.uuid) == 30.0
    assert value(registry, schema.GPU_POWER_WATTS, 1, IDLE_1.uuid) == 82.81
    assert count_logged(caplog, "power failed: Not Supported") == 1


@pytest.mark.parametrize(("init_error", "reason"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"),
], ids=["no libnvidia-ml", "no driver", "no permission"])
def test_when_nvml_cannot_start_only_gpu_up_0_is_exported_and_why_is_logged_once(
    caplog: pytest.LogCaptureFixture, init_error: int, reason: str,
) -> None:
    caplog.set_level(logging.INFO, logger="exporters.gpu")
    nvml = FakeNvml(IDLE_0, init_error=init_error)
    registry = scrape(GpuCollector(nvml=nvml), times=3)
    assert series(registry) == [(schema.GPU_UP, {})]
    assert registry.get_sample_value(schema.GPU_UP) == 0.0
    assert count_logged(caplog, reason) == 1
    assert nvml.num_init_calls >= 3  # retried each scrape, so a late driver is picked up


def test_no_devices_is_gpu_up_0(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporters.gpu")
    registry = scrape(GpuCollector(nvml=FakeNvml()), times=2)
    assert series(registry) == [(schema.GPU_UP, {})]
    assert registry.get_sample_value(schema.GPU_UP) == 0.0
    assert count_logged(caplog, "NVML reports no GPU") == 1


def test_without_pynvml_gpu_up_is_0(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    registry = scrape(GpuCollector(), times=2)
    assert series(registry) == [(schema.GPU_UP, {})]
    assert count_logged(caplog, "pynvml is not installed") == 1


def test_nvml_shut_down_elsewhere_is_reinitialised_within_the_scrape(nvml: FakeNvml) -> None:
    collector = GpuCollector(nvml=nvml)
    registry = scrape(collector)
    nvml.initialised = False  # another library in-process called nvmlShutdown
    generate_latest(registry)
    assert nvml.num_init_calls == 2
    assert value(registry, schema.GPU_POWER_WATTS, 2, LOADED.uuid) == 699.0


def test_a_lost_gpu_is_dropped_and_nvml_reinitialised_at_the_next_scrape(
    nvml: FakeNvml, caplog: pytest.LogCaptureFixture,
) -> None:
    nvml.fail["nvmlDeviceGetPowerUsage", 2] = pynvml.NVML_ERROR_GPU_IS_LOST
    registry = CollectorRegistry()
    registry.register(GpuCollector(nvml=nvml))
    first = series(registry)  # each collect() is one scrape
    assert {labels["gpu"] for _, labels in first if labels} == {"0", "1"}
    assert nvml.num_shutdown_calls == 0
    del nvml.fail["nvmlDeviceGetPowerUsage", 2]  # e.g. after a GPU reset
    assert value(registry, schema.GPU_POWER_WATTS, 2, LOADED.uuid) == 699.0
    assert (nvml.num_shutdown_calls, nvml.num_init_calls) == (1, 2)
    assert count_logged(caplog, "GPU is lost") == 1


# --- the real library on this machine -----------------------------------------------------------

def _gpus_visible_to_real_nvml() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    try:
        return bool(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def test_real_pynvml_scrapes_without_error_and_reports_whether_a_gpu_is_there() -> None:
    registry = scrape(GpuCollector(), times=2)
    expected = 1.0 if _gpus_visible_to_real_nvml() else 0.0  # 0 on the GPU-less dev machine
    assert registry.get_sample_value(schema.GPU_UP) == expected
