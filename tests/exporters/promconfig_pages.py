"""Hand-written pages, in the engines' own names and labels (from the catalogs in
tests/fixtures/engines), for what the recorded pages do not show: merged error types,
integer bucket bounds, a scaled histogram with buckets, alternatives on both sides of one
label set, sums of terms, DCGM's sentinels on a mapped field. Values are arbitrary."""

from __future__ import annotations

TGI = """\
# TYPE tgi_request_failure counter
tgi_request_failure{err="validation"} 2
tgi_request_failure{err="template"} 3
tgi_request_failure{err="generation"} 5
tgi_request_failure{err="dropped"} 7
# TYPE tgi_queue_size gauge
tgi_queue_size 4
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="10"} 1
tgi_request_input_length_bucket{le="20"} 3
tgi_request_input_length_bucket{le="+Inf"} 4
tgi_request_input_length_sum 61
tgi_request_input_length_count 4
"""

TRITON = """\
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 2
nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 3
nv_inference_request_failure{model="m",reason="CANCELED",version="1"} 4
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="m",version="1"} 9
nv_inference_pending_request_count{model="other",version="1"} 6
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="m",request_type="waiting",version="1"} 1
nv_trt_llm_request_metrics{model="m",request_type="active",version="1"} 2
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="100"} 8
nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="500"} 30
nv_inference_first_response_histogram_ms_bucket{model="m",version="1",le="+Inf"} 37
nv_inference_first_response_histogram_ms_sum{model="m",version="1"} 10771
nv_inference_first_response_histogram_ms_count{model="m",version="1"} 37
"""

DCGM = """\
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a"} 1024
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b"} 2048
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a"} 3072
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b"} 9223372036854775794
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-a"} 512
DCGM_FI_DEV_FB_RESERVED{gpu="1",UUID="GPU-b"} 512
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 71.5
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b"} 140737488355328
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a"} 37
"""

LLAMACPP = """\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 120
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:kv_cache_tokens gauge
llamacpp:kv_cache_tokens 77
"""

PAGES = {"synthetic-tgi.prom": TGI, "synthetic-triton.prom": TRITON,
         "synthetic-dcgm.prom": DCGM, "synthetic-llamacpp.prom": LLAMACPP}
