# mk/bench.mk — HTTP benchmarks (part of `make bench`).
#
#   make bench-http   wrk against opdispatchd, a fixed-body libmicrohttpd
#                     server, a FastAPI + numpy peer and MLServer (numpy
#                     runtime, in .venv-mlserver), all in one run on
#                     127.0.0.1 (bench/http/run.py); BENCH_DURATION=S per point
#   make bench-load   opdispatch load against wrk on the same server, operator
#                     and request bytes (bench/http/load.py)
#   make bench-ops-torch  sort, topk, cumsum, gather, scatter_add at 1e6 in the
#                     server (/v1/bench) against torch 1.13 on the same machine
#                     (bench/ops_torch.py)
#   make bench-curves time per call and GB/s (GFLOP/s) against size, 1 to 1e8
#                     elements (mm to 4096), for add, relu, softmax, sum, mm over
#                     the C API, HTTP binary and HTTP JSON, with memcpy, sgemm and
#                     the fixed-reply server as ceilings (bench/curves.py ->
#                     bench/curves/*.png)
#   make bench-store  stored tensors against shipping them: a 10-call chain on
#                     1024x1024 and the cost of naming a 64 MiB stored tensor
#                     (bench/http/store.py)

BENCH_DURATION ?= 5
FIXED_SERVER := $(B)/bench/fixed_server
BENCH_VENV_STAMP := .venv/.bench-$(shell md5sum tools/bench-requirements.txt 2>/dev/null | cut -c1-8)
# MLServer gets its own venv: its pins clash with the FastAPI peer's
MLSERVER_VENV_STAMP := .venv-mlserver/.stamp-$(shell md5sum tools/mlserver-requirements.txt 2>/dev/null | cut -c1-8)

.PHONY: bench-http bench-store bench-load bench-clients bench-ops-torch bench-curves
$(FIXED_SERVER): bench/http/fixed_server.c | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $< -o $@ -lmicrohttpd

$(BENCH_VENV_STAMP): tools/bench-requirements.txt $(VENV_STAMP)
	.venv/bin/pip install -q -r tools/bench-requirements.txt
	touch $@

$(MLSERVER_VENV_STAMP): tools/mlserver-requirements.txt | $(SETUP_STAMP)
	/usr/bin/python3 -m venv .venv-mlserver
	.venv-mlserver/bin/pip install -q -r tools/mlserver-requirements.txt
	touch $@

bench-http: $(SERVER) $(FIXED_SERVER) $(BENCH_VENV_STAMP) $(MLSERVER_VENV_STAMP)
	.venv/bin/python bench/http/run.py --opdispatchd $(B)/opdispatchd --fixed $(FIXED_SERVER) \
	  --mlserver .venv-mlserver/bin/mlserver --duration $(BENCH_DURATION)

bench-store: $(SERVER) $(VENV_STAMP)
	.venv/bin/python bench/http/store.py --opdispatchd $(B)/opdispatchd

bench-load: $(SERVER) $(CLIENT_C) $(VENV_STAMP)
	.venv/bin/python bench/http/load.py --opdispatchd $(B)/opdispatchd --cli $(CLIENT_C)

# the Python client against raw http.client on the same requests
bench-clients: $(SERVER) $(VENV_STAMP)
	.venv/bin/python bench/http/client_py.py --opdispatchd $(B)/opdispatchd

bench-ops-torch: $(SERVER) $(VENV_STAMP)
	.venv/bin/python bench/ops_torch.py --opdispatchd $(B)/opdispatchd

bench-curves: $(SERVER) $(CLIENT_C) $(FIXED_SERVER) $(VENV_STAMP)
	.venv/bin/python bench/curves.py --opdispatchd $(B)/opdispatchd --cli $(CLIENT_C) --fixed $(FIXED_SERVER)

bench: bench-http bench-store bench-load bench-clients bench-ops-torch bench-curves
