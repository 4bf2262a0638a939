"""GPU telemetry through NVML (``nvidia-ml-py``, imported as ``pynvml``).

One :class:`GpuTelemetry` reads every GPU once per collection cycle into one
:class:`~collectors.store.ScrapeRecord` of a pseudo-target ``nvml:<hostname>``, which the
collector writes like any other scrape. Families (``collectors.canonical.GPU_FAMILIES``),
each labelled ``target``, ``gpu`` (index), ``uuid`` and ``gpu_name``:

| family | NVML call | unit |
|---|---|---|
| ``gpu_memory_used_bytes``, ``gpu_memory_total_bytes`` | ``nvmlDeviceGetMemoryInfo`` | bytes |
| ``gpu_utilization`` | ``nvmlDeviceGetUtilizationRates().gpu`` | 0..1 (NVML: percent) |
| ``gpu_temperature_celsius`` | ``nvmlDeviceGetTemperature(…, GPU)`` | °C |
| ``gpu_power_watts`` | ``nvmlDeviceGetPowerUsage`` | W (NVML: mW) |
| ``gpu_ecc_errors_total{error_type,counter}`` | ``nvmlDeviceGetTotalEccErrors`` | errors |
| ``gpu_throttle_active{reason}`` | ``nvmlDeviceGetCurrentClocksEventReasons`` | 1/0 per reason |

A reading a GPU does not support (``NVML_ERROR_NOT_SUPPORTED``, e.g. ECC on a card without
it, power on some boards) or may not read (``NVML_ERROR_NO_PERMISSION``) is skipped for that
GPU, and logged once. Any other NVML error makes the cycle's record a down record whose
``error`` names the GPU and the reading, as a failed scrape would.

Without NVML (``nvidia-ml-py`` not installed, no driver library, driver not loaded, no
devices) the telemetry is *unavailable*: no records, one log line with the reason, and
:attr:`GpuTelemetry.reason` says why. Mode ``on`` makes that an error at start instead.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from collectors import canonical as c
from collectors.store.records import ScrapeRecord

logger = logging.getLogger("tailwatch.gpu")

MODES = ("auto", "on", "off")
DIALECT = "nvml"
TARGET_PREFIX = "nvml:"

#: NVML's clock event (throttle) reason bits → ``reason`` label values.
THROTTLE_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: ``(error_type label, NVML constant name)`` and ``(counter label, NVML constant name)``.
ECC_ERROR_TYPES = (
    ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
    ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
)
ECC_COUNTERS = (("volatile", "NVML_VOLATILE_ECC"), ("aggregate", "NVML_AGGREGATE_ECC"))
# The integer values nvml.h assigns, for a module that lacks a constant.
_NVML_DEFAULTS = {
    "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0,
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0,
    "NVML_AGGREGATE_ECC": 1,
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
}


#: NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIBRARY_NOT_FOUND → what it means here.
_START_HINTS = {
    9: " (the NVIDIA kernel driver is not loaded)",
    12: " (libnvidia-ml.so.1 not found: no NVIDIA driver on this host)",
}


class GpuTelemetryUnavailableError(RuntimeError):
    """``collector.gpu: on`` and NVML cannot be used; the message says why."""


def decode_throttle_reasons(mask: int) -> dict[str, bool]:
    """Every known reason → whether its bit is set in ``mask``; a set bit NVML added after
    this table appears as ``unknown_0x…`` (so it is never silently dropped)."""
    active = {name: bool(mask & bit) for bit, name in THROTTLE_REASONS.items()}
    unknown = mask & ~sum(THROTTLE_REASONS)
    bit = 1
    while unknown:
        if unknown & bit:
            active[f"unknown_{bit:#x}"] = True
            unknown &= ~bit
        bit <<= 1
    return active


@dataclass(frozen=True)
class GpuDevice:
    index: int
    uuid: str
    name: str
    handle: Any


class GpuTelemetry:
    """NVML readings of every GPU on this host. Call :meth:`start` once (it never raises in
    mode ``auto``), then :meth:`read` each cycle, and :meth:`close` at the end.

    ``nvml`` replaces the ``pynvml`` module (tests pass a fake); ``clock`` gives the
    record's timestamp (Unix seconds)."""

    def __init__(
        self,
        mode: str = "auto",
        *,
        nvml: ModuleType | Any | None = None,
        hostname: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: expected one of {', '.join(MODES)}")
        self.mode = mode
        self.target = TARGET_PREFIX + (hostname or socket.gethostname())
        self._nvml = nvml
        self._clock = clock
        self._initialised = False
        self._started = False
        self.devices: tuple[GpuDevice, ...] = ()
        self.driver_version = ""
        #: Whether readings come from NVML; :attr:`reason` says why not.
        self.available = False
        self.reason = "not started"
        self._skipped: set[tuple[int, str]] = set()  # (gpu, reading) logged as unsupported
        self._last_error = ""

    def start(self) -> bool:
        """Initialise NVML and list the GPUs. Returns :attr:`available`. In mode ``on`` an
        unusable NVML raises :class:`GpuTelemetryUnavailableError`; in ``auto`` it is
        logged once and the telemetry stays unavailable."""
        if self._started:
            return self.available
        self._started = True
        if self.mode == "off":
            self.reason = "GPU telemetry is off (collector.gpu: off)"
            logger.info("no GPU telemetry: %s", self.reason)
            return False
        reason = self._open()
        if reason:
            self.reason = reason
            self.close()
            if self.mode == "on":
                raise GpuTelemetryUnavailableError(f"collector.gpu is on, but {reason}")
            logger.info("no GPU telemetry: %s", reason)
            return False
        self.available, self.reason = True, ""
        names = ", ".join(sorted({device.name for device in self.devices}))
        driver = f", driver {self.driver_version}" if self.driver_version else ""
        logger.info(
            "GPU telemetry: %d GPU(s) through NVML (%s%s) as target %s",
            len(self.devices), names, driver, self.target,
        )  # fmt: skip
        return True

    def _open(self) -> str:
        """Initialise NVML; returns why it cannot be used ("" when it can)."""
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            hint = _START_HINTS.get(getattr(error, "value", None), "")
            return f"NVML cannot start: {_nvml_message(error)}{hint}"
        except OSError as error:  # NOTE: a broken driver library can fail to load this way
            return f"NVML cannot start: {error}"
        self._initialised = True
        try:
            count = nvml.nvmlDeviceGetCount()
            devices = []
            for index in range(count):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                devices.append(
                    GpuDevice(index, uuid, _text(nvml.nvmlDeviceGetName(handle)), handle)
                )
            try:
                self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
            except (nvml.NVMLError, AttributeError):
                self.driver_version = ""
        except nvml.NVMLError as error:
            return f"NVML cannot list the GPUs: {_nvml_message(error)}"
        if not devices:
            return "NVML found no NVIDIA GPU"
        self.devices = tuple(devices)
        return ""

    def close(self) -> None:
        if self._initialised and self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as error:
                logger.warning("NVML shutdown failed: %s", _nvml_message(error))
        self._initialised = False
        self.available = False
        if not self.reason:
            self.reason = "closed"

    def read(self) -> ScrapeRecord | None:
        """One reading of every GPU as one record (``None`` while unavailable). Never raises
        on an NVML error: it becomes a down record naming the GPU and the reading."""
        if not self.available:
            return None
        timestamp = self._clock()
        started = time.perf_counter()
        samples: list[c.CanonicalSample] = []
        try:
            for device in self.devices:
                samples.extend(self._read_device(device))
        except _ReadingError as failure:
            error = str(failure)
            if error != self._last_error:
                logger.warning("GPU telemetry failed: %s", error)
            self._last_error = error
            return ScrapeRecord(
                target=self.target,
                timestamp_seconds=timestamp,
                dialect=DIALECT,
                duration_seconds=time.perf_counter() - started,
                is_up=False,
                error=error,
            )
        if self._last_error:
            logger.info("GPU telemetry recovered")
            self._last_error = ""
        return ScrapeRecord(
            target=self.target,
            timestamp_seconds=timestamp,
            samples=tuple(samples),
            dialect=DIALECT,
            duration_seconds=time.perf_counter() - started,
        )

    def _read_device(self, device: GpuDevice) -> list[c.CanonicalSample]:
        nvml = self._nvml
        base = {
            c.LABEL_TARGET: self.target,
            c.LABEL_GPU: str(device.index),
            c.LABEL_UUID: device.uuid,
            c.LABEL_GPU_NAME: device.name,
        }
        out: list[c.CanonicalSample] = []

        def add(family: str, value: float, source: str, **extra: str) -> None:
            out.append(
                c.CanonicalSample(
                    family, c.labels_key({**base, **extra}), float(value),
                    c.GPU_FAMILIES[family], source=source,
                )
            )  # fmt: skip

        memory = self._call(device, "memory", "nvmlDeviceGetMemoryInfo", device.handle)
        if memory is not None:
            add(c.GPU_MEMORY_USED_BYTES, memory.used, "nvmlDeviceGetMemoryInfo")
            add(c.GPU_MEMORY_TOTAL_BYTES, memory.total, "nvmlDeviceGetMemoryInfo")
        rates = self._call(device, "utilization", "nvmlDeviceGetUtilizationRates", device.handle)
        if rates is not None:
            add(c.GPU_UTILIZATION, rates.gpu / 100.0, "nvmlDeviceGetUtilizationRates")
        sensor = _constant(nvml, "NVML_TEMPERATURE_GPU")
        celsius = self._call(
            device, "temperature", "nvmlDeviceGetTemperature", device.handle, sensor
        )
        if celsius is not None:
            add(c.GPU_TEMPERATURE_CELSIUS, celsius, "nvmlDeviceGetTemperature")
        milliwatts = self._call(device, "power", "nvmlDeviceGetPowerUsage", device.handle)
        if milliwatts is not None:
            add(c.GPU_POWER_WATTS, milliwatts / 1000.0, "nvmlDeviceGetPowerUsage")
        for error_type, type_name in ECC_ERROR_TYPES:
            for counter, counter_name in ECC_COUNTERS:
                count = self._call(
                    device, f"ecc {error_type} {counter}", "nvmlDeviceGetTotalEccErrors",
                    device.handle, _constant(nvml, type_name), _constant(nvml, counter_name),
                )  # fmt: skip
                if count is not None:
                    add(
                        c.GPU_ECC_ERRORS_TOTAL, count, "nvmlDeviceGetTotalEccErrors",
                        error_type=error_type, counter=counter,
                    )  # fmt: skip
        # NOTE: "throttle reasons" were renamed "clock event reasons" in NVML 12.2; same bits.
        function = (
            "nvmlDeviceGetCurrentClocksEventReasons"
            if hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
            else "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        mask = self._call(device, "throttle reasons", function, device.handle)
        if mask is not None:
            for reason, active in decode_throttle_reasons(int(mask)).items():
                add(c.GPU_THROTTLE_ACTIVE, 1.0 if active else 0.0, function, reason=reason)
        return out

    def _call(self, device: GpuDevice, reading: str, function: str, *args: Any) -> Any:
        """``nvml.<function>(*args)``; ``None`` when the GPU does not support the reading or
        may not read it (logged once per GPU and reading)."""
        nvml = self._nvml
        try:
            return getattr(nvml, function)(*args)
        except nvml.NVMLError as error:
            code = getattr(error, "value", None)
            skippable = (
                _constant(nvml, "NVML_ERROR_NOT_SUPPORTED"),
                _constant(nvml, "NVML_ERROR_NO_PERMISSION"),
            )
            if code not in skippable:
                raise _ReadingError(
                    f"NVML {function} on gpu {device.index} ({reading}): {_nvml_message(error)}"
                ) from None
            if (device.index, reading) not in self._skipped:
                self._skipped.add((device.index, reading))
                logger.info(
                    "gpu %d (%s) has no %s reading: %s",
                    device.index, device.name, reading, _nvml_message(error),
                )  # fmt: skip
            return None


class _ReadingError(Exception):
    """An NVML error other than "not supported": the cycle's GPU record is down."""


def _constant(nvml: Any, name: str) -> int:
    return getattr(nvml, name, _NVML_DEFAULTS[name])


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _nvml_message(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:  # NOTE: pynvml's __str__ calls into the library, which may be gone
        text = ""
    return text or type(error).__name__
