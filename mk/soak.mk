# mk/soak.mk — the soak (tests/soak/soak.py): mixed traffic at 64 keep-alive
# connections (tiny and large calls, JSON and binary, Open Inference Protocol,
# stored tensors, expected errors, introspection, statistics) against a
# release opdispatchd on 127.0.0.1, watching its RSS, descriptors, threads
# and p99 latency for drift.
#
#   make soak [SOAK_S=600]   the long run; report in $(B)/soak/ (report.md,
#                            soak.csv, soak.png drawn by gnuplot)
#   make test-soak           the short run `make test` makes (SOAK_TEST_S=30,
#                            10 s of warm-up), report in $(B)/soak-test/

SOAK_S      ?= 600
SOAK_TEST_S ?= 30

.PHONY: soak test-soak

soak: $(SERVER) $(VENV_STAMP)
	.venv/bin/python tests/soak/soak.py --server $(B)/opdispatchd --seconds $(SOAK_S) --out $(B)/soak

test-soak: $(SERVER) $(VENV_STAMP)
	.venv/bin/python tests/soak/soak.py --server $(B)/opdispatchd --seconds $(SOAK_TEST_S) --warmup 10 \
	  --out $(B)/soak-test
