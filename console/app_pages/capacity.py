"""Capacity: the planner of seed Q39, from a model's shape (or a preset) and the GPU's memory
to the KV tokens and sequences that fit, the demand by Little's law and the replicas needed
against a measured ceiling, with the arithmetic shown line by line (``slo.plan_capacity``).
The workload starts from the fleet's traffic over the selected range and the ceiling from the
newest sweep's knee, else from the worked example (``console.capacity_start``)."""

from __future__ import annotations

import streamlit as st

from collectors import canonical as c
from console import capacity_start as cs
from console import data
from console.page_kit import escape, page_context, section, span_text
from slo import SLOError, plan_capacity
from slo.capacity import GIB

ctx = page_context(needs_store=False)
f = ctx.filters
st.title("Capacity")
st.caption(
    "How many replicas a workload needs: KV cache per token from the model's shape, what fits "
    "in GPU memory, Little's law for the demand, and the concurrency one replica holds within "
    "its SLO (the knee of a load sweep, `tailwatch load sweep`)."
)
FLEET, WORKED = "This fleet (selected range)", "Q39 worked example"


def _fleet() -> cs.Fleet | None:
    """The selected range's traffic (the sidebar's range, model, target and tenant)."""
    requests = data.counter_total(ctx.url, c.REQUESTS_TOTAL, f)
    if not requests:
        return cs.Fleet(requests, None, None, None, None, None, "")
    e2e = data.window_sum_count(ctx.url, c.E2E_SECONDS, f)
    over = span_text(data.data_span(ctx.url, c.REQUESTS_TOTAL, f), f)
    if not over.startswith(f"over the last {f.range_key}"):
        over += f" ({f.range_key} selected)"
    return cs.Fleet(
        requests=requests,
        prompt_tokens=data.counter_total(ctx.url, c.PROMPT_TOKENS_TOTAL, f),
        generation_tokens=data.counter_total(ctx.url, c.GENERATION_TOKENS_TOTAL, f),
        e2e_count=None if e2e is None else e2e[1],
        e2e_sum=None if e2e is None else e2e[0],
        arrival_rate=data.request_rate(ctx.url, f),
        over=over,
    )


def _ceiling() -> cs.Start:
    return cs.ceiling_start(data.lab_runs(ctx.url, "sweep"), lambda i: data.lab_points(ctx.url, i))


if ctx.problem:
    fleet, why_not = None, "no store is configured or readable"
    st.info(
        "**No store to read:** the inputs start from Q39's worked example. " + escape(ctx.problem)
    )
    ceiling = cs.q39(cs.Q39_CEILING, why_not)
else:
    fleet, why_not = _fleet(), f"no traffic in the selected range ({f.range_key})"
    ceiling = _ceiling()
has_traffic = cs.has_traffic(fleet)
# NOTE: keyed on whether there is traffic, so the default follows it when the range changes
start_from = st.radio(
    "Start from", [FLEET, WORKED], index=0 if has_traffic else 1, horizontal=True,
    key=f"cap_start_{has_traffic}",
)  # fmt: skip
if start_from == FLEET:
    view = f"fleet_{f.range_key}_{f.model}_{f.target}_{f.tenant}"
    starts = {**cs.fleet_starts(fleet, view, why_not), "ceiling": ceiling}
else:
    chosen = why_not if not has_traffic else "chosen in Start from"
    starts = {
        "arrival": cs.q39(cs.Q39_ARRIVAL, chosen),
        "latency": cs.q39(cs.Q39_LATENCY, chosen),
        "tokens": cs.q39(cs.Q39_TOKENS, chosen),
        "ceiling": cs.q39(cs.Q39_CEILING, chosen),
    }


def _key(name: str) -> str:
    """A widget key per source: the user's edit sticks; a new source (another range, a new
    sweep) is a fresh widget that starts from it."""
    return f"cap_{name}_{starts[name].source}"


#: (layers, KV heads, head dim, weights GiB) per preset; Q39's worked example first.
PRESETS = {
    "Q39 worked example (40 layers, 8 KV heads, head 128, 28 GiB weights)": (40, 8, 128, 28.0),
    "Llama-3-8B, bf16 (32, 8, 128; 15 GiB)": (32, 8, 128, 15.0),
    "Qwen2.5-7B, bf16 (28, 4, 128; 14.2 GiB)": (28, 4, 128, 14.2),
}
preset = st.selectbox("Model preset", list(PRESETS), key="cap_preset")
layers0, heads0, dim0, weights0 = PRESETS[preset]
with st.container(border=True):
    st.markdown("**Model**")
    cols = st.columns(4)
    layers = cols[0].number_input("Layers", 1, 1024, layers0, key=f"cap_layers_{preset}")
    kv_heads = cols[1].number_input("KV heads", 1, 1024, heads0, key=f"cap_heads_{preset}")
    head_dim = cols[2].number_input("Head dim", 1, 4096, dim0, key=f"cap_dim_{preset}")
    dtype = cols[3].selectbox("KV dtype", ["bf16/fp16 (2 bytes)", "fp8 (1 byte)"], key="cap_dtype")
    st.markdown("**GPU memory**")
    cols = st.columns(4)
    memory = cols[0].number_input("GPU memory (GiB)", 1.0, 4096.0, 80.0, key="cap_mem")
    util = cols[1].number_input("gpu_memory_utilization", 0.05, 1.0, 0.9, step=0.05, key="cap_util")
    weights = cols[2].number_input("Weights (GiB)", 0.0, 4096.0, weights0, key=f"cap_w_{preset}")
    activations = cols[3].number_input("Activations (GiB)", 0.0, 4096.0, 4.0, key="cap_act")
    st.markdown("**Workload and measured ceiling**")
    cols = st.columns(4)
    length = cols[0].number_input(
        "Tokens per sequence", 1, 10_000_000, int(starts["tokens"].value), key=_key("tokens")
    )
    arrival = cols[1].number_input(
        "Arrival rate (req/s)",
        0.0,
        1e6,
        float(starts["arrival"].value),
        key=_key("arrival"),
        format="%.3f",
    )
    latency = cols[2].number_input(
        "Mean latency (s)",
        0.0,
        1e5,
        float(starts["latency"].value),
        key=_key("latency"),
        format="%.3f",
    )
    ceiling = cols[3].number_input(
        "Measured ceiling (concurrent)", 0.001, 1e6, max(0.001, float(starts["ceiling"].value)),
        key=_key("ceiling"), format="%.3f",
    )  # fmt: skip
    for col, name in zip(cols, ("tokens", "arrival", "latency", "ceiling"), strict=True):
        col.caption(escape(starts[name].caption))
    cols = st.columns(4)
    spares = cols[0].number_input("Spare replicas", 0, 1000, 1, key="cap_spares")
    block = cols[1].number_input("Block size (tokens)", 1, 1024, 1, key="cap_block")

bytes_per_value = 2.0 if dtype.startswith("bf16") else 1.0
try:
    plan = plan_capacity(
        num_layers=int(layers), num_kv_heads=int(kv_heads), head_dim=int(head_dim),
        bytes_per_value=bytes_per_value, gpu_memory_bytes=memory * GIB,
        gpu_memory_utilization=float(util), weights_bytes=weights * GIB,
        activation_bytes=activations * GIB, tokens_per_sequence=int(length),
        arrival_rate_per_second=float(arrival), mean_latency_seconds=float(latency),
        measured_ceiling_concurrency=float(ceiling), num_spares=int(spares),
        block_size=int(block),
    )  # fmt: skip
except SLOError as error:
    st.error(escape(str(error)))
    st.stop()

section("Plan")
cols = st.columns(4)
cols[0].metric("KV cache per token", f"{plan.kv_bytes_per_token / 1024:,.0f} KiB", border=True)
cols[1].metric("KV tokens that fit", f"{plan.kv_tokens:,}", border=True)
cols[2].metric(f"Sequences of {int(length):,} tokens", f"{plan.sequences_at_length:,}", border=True)
cols[3].metric("Replicas needed", f"{plan.num_replicas}", border=True)
section("Arithmetic, line by line")
st.code(
    "\n".join(
        [
            f"KV bytes/token = 2 × layers × kv_heads × head_dim × bytes = 2 × {int(layers)} × "
            f"{int(kv_heads)} × {int(head_dim)} × {bytes_per_value:g} = "
            f"{plan.kv_bytes_per_token:,.0f} B ({plan.kv_bytes_per_token / 1024:,.0f} KiB)",
            f"KV budget = memory × utilization − weights − activations = {memory:g} GiB × "
            f"{util:g} − {weights:g} GiB − {activations:g} GiB = "
            f"{plan.kv_budget_bytes / GIB:,.2f} GiB",
            f"KV tokens = floor(budget / (bytes/token × block)) × block = {plan.kv_tokens:,}",
            f"sequences = KV tokens // (ceil({int(length)} / {int(block)}) × {int(block)}) = "
            f"{plan.sequences_at_length:,}",
            f"demand (Little's law) = arrival × latency = {arrival:g} req/s × {latency:g} s = "
            f"{plan.demand_concurrency:,.2f} concurrent",
            f"replicas = ceil(demand / ceiling) + spares = ceil({plan.demand_concurrency:,.2f} / "
            f"{ceiling:g}) + {int(spares)} = {plan.num_replicas}",
        ]
    ),
    language="text",
)
if plan.sequences_at_length < plan.demand_concurrency / max(plan.num_replicas - int(spares), 1):
    st.warning(
        "Each replica must hold more sequences than its KV cache fits: the measured ceiling is "
        "above what memory allows; re-measure it or add memory."
    )
