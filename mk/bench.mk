# mk/bench.mk — HTTP benchmarks (part of `make bench`).
#
#   make bench-http   wrk against opdispatchd, a fixed-body libmicrohttpd
#                     server, a FastAPI + numpy peer and MLServer (numpy
#                     runtime, in .venv-mlserver), all in one run on
#                     127.0.0.1 (bench/http/run.py); BENCH_DURATION=S per point
#   make bench-load   opdispatch load against wrk on the same server, operator
#                     and request bytes (bench/http/load.py)
#   make bench-ops-torch  every kernel family in the server (/v1/bench) against
#                     torch 1.13 on the same machine, in turns (bench/ops_torch.py):
#                     scans, sorting/selecting/indexing (select), issue 14's
#                     core families at 1e3/1e6/1.6e7, every other CPU kernel
#                     (rest), the backward kernels (backward), norm, losses,
#                     pooling, convolution, embedding, distances, every
#                     per-element operator at 1e6 and 1.6e7, attention at L = 512
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

.PHONY: bench-http bench-store bench-load bench-clients bench-ops-torch bench-curves bench-json-ab
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

# every family of kernels against torch, each ratio measured in turns with
# torch's (bench/ops_torch.py --help lists the families and their targets)
bench-ops-torch: $(SERVER) $(VENV_STAMP) $(TORCH_QUIET)
	@set -e; for f in scan select rest backward core norm loss pool conv embedding dist; do \
	  echo "== ops_torch --family $$f"; \
	  .venv/bin/python bench/ops_torch.py --opdispatchd $(B)/opdispatchd --family $$f; done
	@echo "== ops_torch --family ew (every per-element operator, 1e6 float32)"
	.venv/bin/python bench/ops_torch.py --opdispatchd $(B)/opdispatchd --family ew --n 1000000
	@echo "== ops_torch --family ew (every per-element operator, 1.6e7 float32)"
	.venv/bin/python bench/ops_torch.py --opdispatchd $(B)/opdispatchd --family ew --n 16000000 --iterations 5
	@echo "== ops_torch --family attention (L = 512)"
	.venv/bin/python bench/ops_torch.py --opdispatchd $(B)/opdispatchd --family attention --ops L=512 --iterations 5

bench-curves: $(SERVER) $(CLIENT_C) $(FIXED_SERVER) $(VENV_STAMP)
	.venv/bin/python bench/curves.py --opdispatchd $(B)/opdispatchd --cli $(CLIENT_C) --fixed $(FIXED_SERVER)

# run by `make bench` one after another (Makefile); bench-json-ab-issue is
# issue 14's number paths against the commit the issue measured (8c53417)
BENCH_PARTS := bench-http bench-store bench-load bench-clients bench-ops-torch bench-curves \
  bench-json-ab-issue

.PHONY: bench-json-ab-issue
bench-json-ab-issue:
	@$(MAKE) --no-print-directory bench-json-ab BASE=8c53417

# The JSON number paths of BASE (a commit) against ours in one process:
# BASE's proto/fmt.c, its names renamed, linked beside ours (bench/json_ab.c).
JSON_AB_DIR = $(B)/bench/json-ab-$(BASE)
bench-json-ab: $(LIB_A) $(PROTO_OBJ) | $(SETUP_STAMP)
	@test -n "$(BASE)" || { echo "usage: make bench-json-ab BASE=<commit>"; exit 2; }
	@mkdir -p $(JSON_AB_DIR)
	git show $(BASE):proto/fmt.c > $(JSON_AB_DIR)/base_fmt.c
	$(CC) $(CFLAGS) -Wno-unused-function -include bench/json_ab_rename.h -c $(JSON_AB_DIR)/base_fmt.c \
	  -o $(JSON_AB_DIR)/base_fmt.o
	$(CC) $(CFLAGS) bench/json_ab.c $(JSON_AB_DIR)/base_fmt.o -o $(JSON_AB_DIR)/json_ab \
	  -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive $(PROTO_OBJ) $(SERVER_LDLIBS) $(LDLIBS)
	$(JSON_AB_DIR)/json_ab
