/* fuzz.h — what the libFuzzer harnesses (and tests/faults/faults.c) share:
 * the library's start-up, the limits they run under, and the in-process
 * HTTP exchange.
 *
 * Invariants:
 *  - Start-up (od_init, registry frozen, statistics, routes) happens once, in
 *    LLVMFuzzerInitialize, so every input sees the server's real operator
 *    table and nothing an input does is counted as a leak of start-up.
 *  - Limits are the server's defaults except the ones that bound a single
 *    input's time (elements, output bytes): a fuzzer is after the code that
 *    decides, not the kernels' speed on a million elements.
 *  - fz_http_exchange feeds bytes to a real libmicrohttpd daemon that has no
 *    listening socket, through a socketpair handed to MHD_add_connection, and
 *    runs it from this thread (no internal polling thread, no call workers),
 *    so a request's handler, answer and completion callback all run inside
 *    the call; when it returns, the connection is closed and the request freed.
 */
#ifndef OD_FUZZ_H
#define OD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "od_ops.h"
#include "od_proto.h"

/* The library with every built-in operator, once per process. */
void fz_init_library(void);
/* fz_init_library plus the server's tables (routes, statistics, answers)
 * and a daemon for fz_http_exchange. */
void fz_init_server(void);
/* The limits every harness decodes with (od_limits() of the server after
 * fz_init_*). */
od_proto_limits fz_limits(void);

/* Sends req[0..n) (borrowed) on a fresh connection, runs the daemon until
 * it stops answering, closes the connection and lets MHD finish with it.
 * Returns the bytes answered, copied into resp (cap bytes, may be NULL). */
size_t fz_http_exchange(const uint8_t *req, size_t n, char *resp, size_t cap);

/* Checks the first answer in resp[0..n) to the request that req (the bytes
 * sent, borrowed) starts with: not a 500, and when it is an error in JSON,
 * the protocol's error shape ({"error": {"code", "message"}} on /v1,
 * {"error": "<message>"} on /v2). Aborts, printing the answer, when not.
 * libmicrohttpd's own answers to broken HTTP are HTML and not checked, nor
 * is the body of an answer to HEAD (there is none to read). */
void fz_check_answer(const uint8_t *req, size_t req_len, const char *resp, size_t n);

/* Frees what requests stored on the server (sessions, stored tensors), so
 * one input's state neither leaks into the next nor grows without bound. */
void fz_http_forget(void);

#endif
