# mk/faults.mk — allocation-failure injection (tests/faults/faults.c).
#
#   make faults [FAULTS_MODE=once|persistent|both] [FAULTS_ONLY=substring]
#                 every call of the driver with its n-th allocation failing,
#                 n = 1, 2, ... until it succeeds (once: only the n-th fails;
#                 persistent: the n-th and all later ones); each failure must
#                 answer a clean 507 or recover, and LeakSanitizer must find
#                 nothing lost. `make test` runs it (both modes).
#
# The driver links the ASan+UBSan tree's library (build/asan, gcc) with
# -Wl,--wrap on the allocation functions, so only this test binary can fail
# an allocation on purpose; the server and the library are unchanged.

FAULTS_MODE ?= both
FAULTS_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign \
               -Wl,--wrap=aligned_alloc,--wrap=strdup,--wrap=strndup

.PHONY: faults
faults:
	@$(MAKE) --no-print-directory SAN=1 B=build/asan build/asan/faults
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:protect_shadow_gap=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OD_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
	  build/asan/faults $(FAULTS_MODE) $(FAULTS_ONLY)

ifeq ($(SAN),1)
# shared with the other harness; not an intermediate make may delete
.SECONDARY: $(B)/obj/tests/fuzz/fuzz.o
$(B)/faults: tests/faults/faults.c $(B)/obj/tests/fuzz/fuzz.o $(LIB_A) $(PROTO_OBJ) $(SERVER_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/fuzz $< $(B)/obj/tests/fuzz/fuzz.o -o $@ $(FAULTS_WRAP) \
	  -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive $(PROTO_OBJ) $(SERVER_OBJ) \
	  $(SAN_LDFLAGS) $(SERVER_LDLIBS) $(LDLIBS) -ldl
-include $(B)/faults.d
endif
