"""GPU telemetry through NVML, against a fake ``pynvml`` (this machine has no GPU), and the
real "no GPU telemetry" state of this machine."""

from __future__ import annotations

import logging
import sys
import types
from collections import namedtuple

import pytest

from collectors import canonical as c
from collectors import collector_metrics as cm
from collectors.collector import Collector
from collectors.gpu import GpuTelemetry, GpuTelemetryUnavailableError, decode_throttle_reasons
from collectors.scrape import Scraper
from collectors.store import Store
from tests.collectors.test_collector import cycles

Memory = namedtuple("Memory", "total free used")
Utilization = namedtuple("Utilization", "gpu memory")

NOT_SUPPORTED, NO_PERMISSION, GPU_IS_LOST = 3, 4, 15
ALL_ECC = {(t, k): 0 for t in (0, 1) for k in (0, 1)}


def fake_nvml(gpus: list[dict], *, init_error: int | None = None, event_reasons: bool = True):
    """A module shaped like ``pynvml``: constants, ``NVMLError`` with ``value``, and the
    device calls reading from ``gpus`` (a dict per GPU; a reading set to an int is raised as
    an NVMLError of that code)."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int):
            super().__init__(value)
            self.value = value

        def __str__(self) -> str:
            return {3: "Not Supported", 4: "Insufficient Permissions", 15: "GPU is lost"}.get(
                self.value, f"error {self.value}"
            )

    nvml.NVMLError = NVMLError
    nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_NO_PERMISSION = NOT_SUPPORTED, NO_PERMISSION
    nvml.NVML_TEMPERATURE_GPU = 0
    nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    nvml.NVML_VOLATILE_ECC, nvml.NVML_AGGREGATE_ECC = 0, 1
    nvml.calls = []
    nvml.shutdowns = 0

    def reading(handle: int, key: str):
        value = gpus[handle][key]
        if isinstance(value, Exception):
            raise value
        return value

    def fail(code: int) -> Exception:
        return NVMLError(code)

    nvml.fail = fail

    def init():
        if init_error is not None:
            raise NVMLError(init_error)

    def shutdown():
        nvml.shutdowns += 1

    nvml.nvmlInit = init
    nvml.nvmlShutdown = shutdown
    nvml.nvmlDeviceGetCount = lambda: len(gpus)
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlSystemGetDriverVersion = lambda: "570.86.15"
    nvml.nvmlDeviceGetUUID = lambda h: gpus[h]["uuid"]
    nvml.nvmlDeviceGetName = lambda h: gpus[h]["name"]
    nvml.nvmlDeviceGetMemoryInfo = lambda h: reading(h, "memory")
    nvml.nvmlDeviceGetUtilizationRates = lambda h: reading(h, "utilization")
    nvml.nvmlDeviceGetPowerUsage = lambda h: reading(h, "power_mw")

    def temperature(h, sensor):
        assert sensor == 0
        return reading(h, "temperature")

    def ecc(h, error_type, counter):
        value = reading(h, "ecc")
        if isinstance(value, dict):
            value = value[(error_type, counter)]
        if isinstance(value, Exception):
            raise value
        return value

    nvml.nvmlDeviceGetTemperature = temperature
    nvml.nvmlDeviceGetTotalEccErrors = ecc
    if event_reasons:
        nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reading(h, "throttle")
    else:
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: reading(h, "throttle")
    return nvml


def h200(index: int, **overrides) -> dict:
    gpu = {
        "uuid": f"GPU-{index:08x}-aaaa",
        "name": "NVIDIA H200",
        "memory": Memory(total=150_754_820_096, free=0, used=80 * 2**30),
        "utilization": Utilization(gpu=87, memory=40),
        "temperature": 61,
        "power_mw": 512_345,
        "ecc": {(0, 0): 2, (0, 1): 14, (1, 0): 0, (1, 1): 1},
        "throttle": 0x0,
    }
    gpu.update(overrides)
    return gpu


def readings(record) -> dict[tuple[str, tuple], float]:
    return {(s.family, s.labels): s.value for s in record.samples}


def labels(gpu: int, **extra: str) -> tuple:
    base = {
        "target": "nvml:node-1",
        "gpu": str(gpu),
        "uuid": f"GPU-{gpu:08x}-aaaa",
        "gpu_name": "NVIDIA H200",
    }
    return c.labels_key({**base, **extra})


def started(nvml, mode: str = "auto", clock=lambda: 1000.0) -> GpuTelemetry:
    telemetry = GpuTelemetry(mode, nvml=nvml, hostname="node-1", clock=clock)
    telemetry.start()
    return telemetry


def test_every_reading_of_every_gpu_maps_onto_the_gpu_families():
    nvml = fake_nvml([h200(0), h200(1, utilization=Utilization(0, 0), throttle=0x41)])
    telemetry = started(nvml)
    assert telemetry.available and telemetry.reason == ""
    assert telemetry.driver_version == "570.86.15"
    record = telemetry.read()
    assert (record.target, record.timestamp_seconds, record.is_up) == ("nvml:node-1", 1000, True)
    assert record.dialect == "nvml"
    got = readings(record)
    assert got[(c.GPU_MEMORY_USED_BYTES, labels(0))] == 80 * 2**30
    assert got[(c.GPU_MEMORY_TOTAL_BYTES, labels(0))] == 150_754_820_096
    assert got[(c.GPU_UTILIZATION, labels(0))] == pytest.approx(0.87)
    assert got[(c.GPU_UTILIZATION, labels(1))] == 0
    assert got[(c.GPU_TEMPERATURE_CELSIUS, labels(0))] == 61
    assert got[(c.GPU_POWER_WATTS, labels(0))] == pytest.approx(512.345)
    ecc = {
        (error_type, counter): got[
            (c.GPU_ECC_ERRORS_TOTAL, labels(0, error_type=error_type, counter=counter))
        ]
        for error_type in ("corrected", "uncorrected")
        for counter in ("volatile", "aggregate")
    }
    assert ecc == {
        ("corrected", "volatile"): 2,
        ("corrected", "aggregate"): 14,
        ("uncorrected", "volatile"): 0,
        ("uncorrected", "aggregate"): 1,
    }
    throttle = {
        dict(key)["reason"]: value
        for (family, key), value in got.items()
        if family == c.GPU_THROTTLE_ACTIVE and dict(key)["gpu"] == "1"
    }
    assert {reason for reason, active in throttle.items() if active} == {
        "gpu_idle",
        "hw_thermal_slowdown",
    }
    assert throttle["sw_power_cap"] == 0  # every known reason is a series, 0 when inactive
    kinds = {s.family: s.kind for s in record.samples}
    assert kinds == c.GPU_FAMILIES
    assert len(record.samples) == 2 * (5 + 4 + 9)


def test_throttle_reasons_decode_every_bit_and_name_unknown_ones():
    decoded = decode_throttle_reasons(0x4 | 0x80 | 0x1000)
    assert {name for name, active in decoded.items() if active} == {
        "sw_power_cap",
        "hw_power_brake_slowdown",
        "unknown_0x1000",
    }
    assert not any(decode_throttle_reasons(0).values())
    assert len(decode_throttle_reasons(0)) == 9


def test_an_older_nvml_without_clock_event_reasons_uses_the_throttle_call():
    nvml = fake_nvml([h200(0, throttle=0x8)], event_reasons=False)
    got = readings(started(nvml).read())
    assert got[(c.GPU_THROTTLE_ACTIVE, labels(0, reason="hw_slowdown"))] == 1


def test_unsupported_readings_are_skipped_per_gpu_and_logged_once(caplog):
    gpu1 = h200(1)
    nvml = fake_nvml([h200(0), gpu1])
    gpu1["power_mw"] = nvml.fail(NOT_SUPPORTED)
    gpu1["ecc"] = {**ALL_ECC, (0, 0): 5, (0, 1): nvml.fail(NO_PERMISSION)}
    gpu1["ecc"][(1, 0)] = gpu1["ecc"][(1, 1)] = nvml.fail(NOT_SUPPORTED)
    telemetry = started(nvml)
    with caplog.at_level(logging.INFO, logger="tailwatch.gpu"):
        first = telemetry.read()
        second = telemetry.read()
    for record in (first, second):
        assert record.is_up
        got = readings(record)
        assert (c.GPU_POWER_WATTS, labels(1)) not in got
        assert (c.GPU_POWER_WATTS, labels(0)) in got  # the other GPU still has it
        ecc1 = {dict(k)["error_type"] + "/" + dict(k)["counter"]: v for (f, k), v in got.items()
                if f == c.GPU_ECC_ERRORS_TOTAL and dict(k)["gpu"] == "1"}  # fmt: skip
        assert ecc1 == {"corrected/volatile": 5}
        assert got[(c.GPU_MEMORY_USED_BYTES, labels(1))] == 80 * 2**30
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "gpu 1 (NVIDIA H200) has no power reading: Not Supported",
        "gpu 1 (NVIDIA H200) has no ecc corrected aggregate reading: Insufficient Permissions",
        "gpu 1 (NVIDIA H200) has no ecc uncorrected volatile reading: Not Supported",
        "gpu 1 (NVIDIA H200) has no ecc uncorrected aggregate reading: Not Supported",
    ]


def test_any_other_nvml_error_makes_a_down_record_naming_the_gpu_and_reading():
    gpus = [h200(0), h200(1)]
    nvml = fake_nvml(gpus)
    telemetry = started(nvml)
    gpus[1]["temperature"] = nvml.fail(GPU_IS_LOST)
    record = telemetry.read()
    assert (record.is_up, record.samples) == (False, ())
    assert record.error == "NVML nvmlDeviceGetTemperature on gpu 1 (temperature): GPU is lost"
    gpus[1]["temperature"] = 40
    assert telemetry.read().is_up


# -- no GPU telemetry ------------------------------------------------------------------------


def test_this_machine_without_nvml_gives_no_records_and_a_reason(caplog):
    with caplog.at_level(logging.INFO, logger="tailwatch.gpu"):
        telemetry = GpuTelemetry("auto", hostname="node-1")
        assert telemetry.start() is False
        assert telemetry.start() is False  # idempotent: one line, not two
    if telemetry.available:  # NOTE: on a GPU host the state under test cannot happen
        telemetry.close()
        pytest.skip(f"NVML works on this machine ({len(telemetry.devices)} GPU(s))")
    assert telemetry.reason.startswith("NVML cannot start: NVML Shared Library Not Found")
    assert "no NVIDIA driver on this host" in telemetry.reason
    assert telemetry.read() is None
    assert [r.getMessage() for r in caplog.records] == [f"no GPU telemetry: {telemetry.reason}"]
    with pytest.raises(GpuTelemetryUnavailableError, match=r"^collector\.gpu is on, but NVML"):
        GpuTelemetry("on").start()


@pytest.mark.parametrize(
    ("nvml", "reason"),
    [
        (None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"),
        (
            fake_nvml([], init_error=9),
            "NVML cannot start: error 9 (the NVIDIA kernel driver is not loaded)",
        ),
        (fake_nvml([]), "NVML found no NVIDIA GPU"),
    ],
)
def test_each_no_gpu_state_has_its_reason(monkeypatch, nvml, reason):
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # None: "import pynvml" fails
    telemetry = GpuTelemetry("auto")
    assert telemetry.start() is False
    assert (telemetry.available, telemetry.reason) == (False, reason)
    off = GpuTelemetry("off")
    assert off.start() is False and off.reason == "GPU telemetry is off (collector.gpu: off)"


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode='always': expected one of auto, on, off"):
        GpuTelemetry("always")


# -- the collector ----------------------------------------------------------------------------


def test_the_collector_writes_one_gpu_record_per_cycle(tmp_path, monkeypatch):
    gpus = [h200(0), h200(1)]
    nvml = fake_nvml(gpus)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # the default import path
    now = [2000.0]
    telemetry = GpuTelemetry("on", hostname="node-1", clock=lambda: now[0])
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    collector = Collector([], store, Scraper(), gpu=telemetry)
    value = collector.registry.get_sample_value
    assert value(cm.GPU_TELEMETRY_AVAILABLE) == 1 and value(cm.TARGETS) == 1
    cycles(collector, 1)
    now[0] = 2005.0
    gpus[0]["memory"] = Memory(total=150_754_820_096, free=0, used=90 * 2**30)
    cycles(collector, 1)
    assert [(t, up) for t, up, _ in store.scrapes("nvml:node-1")] == [(2000, True), (2005, True)]
    series = store.samples(c.GPU_MEMORY_USED_BYTES, {"gpu": "0"}, 0, 3000)
    assert [[s.value for s in values] for values in series.values()] == [[80 * 2**30, 90 * 2**30]]
    assert value(cm.TARGET_UP, {"target": "nvml:node-1"}) == 1
    assert value(cm.SAMPLES_INGESTED + "_total", {"target": "nvml:node-1"}) == 2 * 36
    telemetry.close()
    assert nvml.shutdowns == 1


def test_a_collector_without_nvml_reports_0_and_stores_nothing_for_gpus(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], init_error=12))
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    collector = Collector([], store, Scraper(), gpu=GpuTelemetry("auto", hostname="node-1"))
    cycles(collector, 2)
    assert collector.registry.get_sample_value(cm.GPU_TELEMETRY_AVAILABLE) == 0
    assert collector.gpu.reason.endswith(
        "(libnvidia-ml.so.1 not found: no NVIDIA driver on this host)"
    )
    assert store.scrapes("nvml:node-1") == []
    assert store.series(c.GPU_MEMORY_USED_BYTES) == []
    with pytest.raises(GpuTelemetryUnavailableError):
        Collector([], store, Scraper(), gpu=GpuTelemetry("on"))
