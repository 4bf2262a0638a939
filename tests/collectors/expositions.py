"""Exposition samples per engine dialect, written from the tables of
``shared/reference/engine-metrics.md`` (§2, §4, §6, §7). Values are arbitrary but distinct so a
test can tell which source series a canonical sample came from."""

from __future__ import annotations

VLLM_033 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-0.6B"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 5.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 42.0
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.7e9
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 100.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.0
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 64.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 16.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-0.6B"} 1.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.28
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen3-0.6B"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="Qwen/Qwen3-0.6B"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.7e9
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="Qwen/Qwen3-0.6B"} 9.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 90.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 90.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 4.5
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="8.0",model_name="Qwen/Qwen3-0.6B"} 1.0
vllm:iteration_tokens_total_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:iteration_tokens_total_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:iteration_tokens_total_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 20.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0"} 1.0
"""

# vLLM 0.8.5 / 0.11: model_name only, the names §4 lists as renamed since.
VLLM_OLD = """\
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} 10.0
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 4.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.01",model_name="m"} 2.0
vllm:time_per_output_token_seconds_bucket{le="2.5",model_name="m"} 7.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 8.0
vllm:time_per_output_token_seconds_count{model_name="m"} 8.0
vllm:time_per_output_token_seconds_sum{model_name="m"} 3.0
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.4
"""

BUNDLED = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 1.0
# TYPE tailwatch:tenant_requests_total counter
tailwatch:tenant_requests_total{engine="0",finished_reason="stop",model_name="tiny",tenant="acme"} 4.0
tailwatch:tenant_requests_total{engine="0",finished_reason="rejected",model_name="tiny",tenant="acme"} 1.0
# TYPE tailwatch:tenant_prompt_tokens_total counter
tailwatch:tenant_prompt_tokens_total{engine="0",model_name="tiny",tenant="acme"} 77.0
# TYPE tailwatch:tenant_time_to_first_token_seconds histogram
tailwatch:tenant_time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny",tenant="acme"} 3.0
tailwatch:tenant_time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny",tenant="acme"} 4.0
tailwatch:tenant_time_to_first_token_seconds_count{engine="0",model_name="tiny",tenant="acme"} 4.0
tailwatch:tenant_time_to_first_token_seconds_sum{engine="0",model_name="tiny",tenant="acme"} 0.9
# TYPE tailwatch:http_responses_total counter
tailwatch:http_responses_total{code="200",model_name="tiny"} 9.0
tailwatch:http_responses_total{code="429",model_name="tiny"} 2.0
# TYPE tailwatch:knob_changes_total counter
tailwatch:knob_changes_total{engine="0",knob="max_num_seqs",model_name="tiny"} 1.0
"""

SGLANG = """\
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="llama",pp_rank="0",tp_rank="0"} 6.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="llama",pp_rank="0",tp_rank="0"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="llama",pp_rank="0",tp_rank="0"} 0.75
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",model_name="llama"} 500.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",model_name="llama"} 300.0
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{engine_type="unified",model_name="llama"} 2.0
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="llama"} 120.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{engine_type="unified",model_name="llama"} 11.0
# TYPE sglang:inter_token_latency_seconds histogram
sglang:inter_token_latency_seconds_bucket{engine_type="unified",le="0.002",model_name="llama"} 0.0
sglang:inter_token_latency_seconds_bucket{engine_type="unified",le="0.02",model_name="llama"} 250.0
sglang:inter_token_latency_seconds_bucket{engine_type="unified",le="+Inf",model_name="llama"} 300.0
sglang:inter_token_latency_seconds_count{engine_type="unified",model_name="llama"} 300.0
sglang:inter_token_latency_seconds_sum{engine_type="unified",model_name="llama"} 4.2
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="true",le="0.1",model_name="llama"} 5.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="true",le="+Inf",model_name="llama"} 8.0
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="true",model_name="llama"} 8.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="true",model_name="llama"} 1.1
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="0.1",model_name="llama"} 1.0
sglang:time_to_first_token_seconds_bucket{engine_type="unified",is_streaming="false",le="+Inf",model_name="llama"} 3.0
sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="llama"} 3.0
sglang:time_to_first_token_seconds_sum{engine_type="unified",is_streaming="false",model_name="llama"} 0.6
# TYPE sglang:http_responses_total counter
sglang:http_responses_total{endpoint="/v1/chat/completions",method="POST",status_code="200"} 10.0
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{engine_type="unified",model_name="llama",pp_rank="0",tp_rank="0"} 55.5
"""

# TGI: counters without _total, no model label, every "*duration" in seconds.
TGI = """\
# TYPE tgi_request_success counter
tgi_request_success 12
# TYPE tgi_request_failure counter
tgi_request_failure{err="overloaded"} 3
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 7
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="0.5"} 2
tgi_request_duration_bucket{le="+Inf"} 12
tgi_request_duration_sum 30.5
tgi_request_duration_count 12
# TYPE tgi_batch_inference_duration histogram
tgi_batch_inference_duration_bucket{method="prefill",le="0.05"} 9
tgi_batch_inference_duration_bucket{method="prefill",le="+Inf"} 10
tgi_batch_inference_duration_sum{method="prefill"} 0.4
tgi_batch_inference_duration_count{method="prefill"} 10
tgi_batch_inference_duration_bucket{method="decode",le="0.05"} 190
tgi_batch_inference_duration_bucket{method="decode",le="+Inf"} 200
tgi_batch_inference_duration_sum{method="decode"} 5.0
tgi_batch_inference_duration_count{method="decode"} 200
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 10
tgi_request_input_length_bucket{le="+Inf"} 12
tgi_request_input_length_sum 900
tgi_request_input_length_count 12
# TYPE tgi_batch_next_size histogram
tgi_batch_next_size_bucket{le="1"} 3
tgi_batch_next_size_bucket{le="+Inf"} 5
tgi_batch_next_size_sum 9
tgi_batch_next_size_count 5
"""

LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1024
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 256
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 4096
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.125
"""

TRTLLM = """\
# TYPE trtllm_time_to_first_token_seconds histogram
trtllm_time_to_first_token_seconds_bucket{engine_type="trtllm",le="0.1",model_name="m"} 1
trtllm_time_to_first_token_seconds_bucket{engine_type="trtllm",le="+Inf",model_name="m"} 2
trtllm_time_to_first_token_seconds_sum{engine_type="trtllm",model_name="m"} 0.3
trtllm_time_to_first_token_seconds_count{engine_type="trtllm",model_name="m"} 2
# TYPE trtllm_time_per_output_token_seconds histogram
trtllm_time_per_output_token_seconds_bucket{engine_type="trtllm",le="0.01",model_name="m"} 1
trtllm_time_per_output_token_seconds_bucket{engine_type="trtllm",le="+Inf",model_name="m"} 2
trtllm_time_per_output_token_seconds_sum{engine_type="trtllm",model_name="m"} 0.05
trtllm_time_per_output_token_seconds_count{engine_type="trtllm",model_name="m"} 2
# TYPE trtllm_request_success_total counter
trtllm_request_success_total{engine_type="trtllm",finished_reason="stop",model_name="m"} 2
# TYPE trtllm_kv_cache_utilization gauge
trtllm_kv_cache_utilization{engine_type="trtllm",model_name="m"} 0.6
"""

TRTLLM_UNPREFIXED = """\
# TYPE time_to_first_token_seconds histogram
time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 4
time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 5
time_to_first_token_seconds_sum{model_name="m"} 0.7
time_to_first_token_seconds_count{model_name="m"} 5
# TYPE e2e_request_latency_seconds histogram
e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 3
e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 5
e2e_request_latency_seconds_sum{model_name="m"} 6.0
e2e_request_latency_seconds_count{model_name="m"} 5
# TYPE request_success_total counter
request_success_total{finished_reason="length",model_name="m"} 5
"""

DYNAMO = """\
# TYPE dynamo_frontend_time_to_first_token_seconds histogram
dynamo_frontend_time_to_first_token_seconds_bucket{le="0",model="qwen"} 0
dynamo_frontend_time_to_first_token_seconds_bucket{le="0.1",model="qwen"} 6
dynamo_frontend_time_to_first_token_seconds_bucket{le="+Inf",model="qwen"} 9
dynamo_frontend_time_to_first_token_seconds_sum{model="qwen"} 1.5
dynamo_frontend_time_to_first_token_seconds_count{model="qwen"} 9
# TYPE dynamo_frontend_input_sequence_tokens histogram
dynamo_frontend_input_sequence_tokens_bucket{le="100",model="qwen"} 8
dynamo_frontend_input_sequence_tokens_bucket{le="+Inf",model="qwen"} 9
dynamo_frontend_input_sequence_tokens_sum{model="qwen"} 700
dynamo_frontend_input_sequence_tokens_count{model="qwen"} 9
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{endpoint="chat_completions",model="qwen",request_type="stream",status="success"} 9
dynamo_frontend_requests_total{endpoint="chat_completions",model="qwen",request_type="stream",status="error"} 1
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{model="qwen"} 3
# TYPE dynamo_frontend_queued_requests gauge
dynamo_frontend_queued_requests{model="qwen"} 2
# TYPE dynamo_frontend_tokenizer_latency_ms histogram
dynamo_frontend_tokenizer_latency_ms_bucket{le="0.5",model="qwen",operation="encode"} 3
dynamo_frontend_tokenizer_latency_ms_bucket{le="+Inf",model="qwen",operation="encode"} 4
dynamo_frontend_tokenizer_latency_ms_sum{model="qwen",operation="encode"} 2.5
dynamo_frontend_tokenizer_latency_ms_count{model="qwen",operation="encode"} 4
# TYPE trtllm:num_requests_running gauge
trtllm:num_requests_running{model_name="qwen"} 3
"""

TRITON = """\
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{model="ensemble",version="1",le="100"} 4
nv_inference_first_response_histogram_ms_bucket{model="ensemble",version="1",le="500"} 9
nv_inference_first_response_histogram_ms_bucket{model="ensemble",version="1",le="+Inf"} 10
nv_inference_first_response_histogram_ms_sum{model="ensemble",version="1"} 2500
nv_inference_first_response_histogram_ms_count{model="ensemble",version="1"} 10
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="ensemble",version="1"} 123456
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 5
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="waiting",version="1"} 1
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="max",version="1"} 64
"""

# prometheus_client 0.26 over OpenMetrics without escaping=allow-utf-8 (§8.9): the # TYPE
# line keeps the colon, the sample lines do not.
VLLM_ESCAPED = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm_time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm_time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm_time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm_time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.4
# TYPE vllm:prompt_tokens_total counter
vllm_prompt_tokens_total{engine="0",model_name="m"} 31.0
"""
