/* od_stats.h — per-operator, per-key and per-route statistics (server-internal).
 *
 * Invariants: recording never takes a lock and never writes memory another
 * thread writes: each thread counts into its own shard (created on its first
 * record), with relaxed atomic loads/stores so readers see torn-free values.
 * Readers merge the shards under the shard-list mutex, which writers take
 * only once per thread. A reset bumps a generation number; each owner
 * zeroes its own shard when it next records, and readers skip shards of an
 * older generation, so a reset never races an owner's increments.
 */
#ifndef OD_STATS_H
#define OD_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "od_dispatch.h"
#include "od_proto.h"

/* route_names: borrowed, nroutes entries, valid for the process. */
void od_stats_init(int nops, const char *const *route_names, int nroutes);
void od_stats_shutdown(void);

/* The dispatcher's stats hook: one kernel run of op at key. */
void od_stats_kernel(const od_op *op, od_key key, od_status st, uint64_t ns);

typedef struct od_req_sample {
    const od_op *op;
    od_key key;
    bool ok;
    uint64_t e2e_ns, decode_ns, infer_ns, encode_ns;
    uint64_t bytes_in, bytes_out;
} od_req_sample;
void od_stats_request(const od_req_sample *s);

/* One HTTP request on route (index into route_names, -1 for no route). */
void od_stats_route(int route, int http_status, uint64_t ns);

void od_stats_reset(void);

/* GET /v1/stats, GET /metrics, and the Triton statistics extension (op NULL:
 * every operator; else the one). */
void od_stats_json(od_buf *b);
void od_stats_prometheus(od_buf *b);
void od_stats_triton(od_buf *b, const od_op *op);

/* Short model name of an operator: "add.Tensor", "relu" (no namespace). */
void od_model_name(const od_op *op, char *buf, size_t cap);

#endif
