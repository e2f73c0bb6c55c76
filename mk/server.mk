# mk/server.mk — opdispatchd extras, included by the Makefile.
#
#   make test-integration-asan   the integration suite against the ASan+UBSan
#                                server (build/asan/opdispatchd); the suite fails
#                                on any sanitizer report in the server's stderr;
#                                the differential and OpInfo replays take a
#                                third of the release pass's samples (same
#                                operators), and the files about what surrounds
#                                the server (nginx replicas, the browser, deploy
#                                manifests) run in the release pass only, as do
#                                the two longest per-operator sweeps (activations,
#                                linalg: their operators' kernels still run here
#                                through both replays): CI's 30 minutes
#   make serve-asan              run the ASan server on 127.0.0.1:8000 (debugging)

.PHONY: test-integration-asan serve-asan

test-integration-asan:
	@$(MAKE) --no-print-directory SAN=1 B=build/asan build/asan/opdispatchd plugins
	@$(MAKE) --no-print-directory venv
	@if ls tests/integration/test_*.py >/dev/null 2>&1; then \
	  export OD_SERVER=$(abspath build/asan/opdispatchd) \
	  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  DIFF_N=$${DIFF_N:-20} OPINFO_SAMPLES=$${OPINFO_SAMPLES:-2} && \
	  $(call pytest-integration,--ignore=tests/integration/test_scaleout.py --ignore=tests/integration/test_dashboard.py \
	    --ignore=tests/integration/test_deploy_files.py --ignore=tests/integration/test_activations.py \
	    --ignore=tests/integration/test_linalg.py); \
	else echo "integration: no tests yet"; fi
	OD_SERVER=$(abspath build/asan/opdispatchd) \
	  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:protect_shadow_gap=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  node --test clients/js/test/

serve-asan:
	@$(MAKE) --no-print-directory SAN=1 B=build/asan build/asan/opdispatchd
	build/asan/opdispatchd --host 127.0.0.1 --port 8000
