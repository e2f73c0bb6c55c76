/* server_int.h — what config.c, server.c, respond.c and daemon.c share
 * with each other; handlers use od_server.h only.
 */
#ifndef OD_SERVER_INT_H
#define OD_SERVER_INT_H

#include "od_server.h"

/* config.c: the log's pieces, for the access log. line: borrowed. */
int od_log_timestamp(char *buf, size_t cap);
void od_log_write(const char *line, size_t n);

/* server.c: the route table and the request lifecycle (MHD's callbacks). */
void od_routes_init(void);
/* The methods allowed on path, for a 405's Allow header, into allow (cap bytes). */
void od_route_allow(const char *path, char *allow, size_t cap);
enum MHD_Result od_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls);
void od_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                     enum MHD_RequestTerminationCode toe);

/* server.c: the admission queue of large bodies. The reaper lets in every
 * request that has waited its longest wait by now (ns); at stop, every one
 * still waiting is let in to be answered 503 (MHD must not stop with
 * suspended connections). Neither may run under a lock MHD's callbacks take. */
void od_admit_overdue(uint64_t now);
void od_admit_all_busy(void);

/* respond.c */
void od_respond_init(void);
/* Queues the answer a call worker stashed in r (on the I/O thread). */
void od_respond_stashed(od_req *r);
/* Request statistics for r's route, status and time so far. */
void od_record_route(od_req *r);

/* daemon.c: the phase of a connection, for the reaper and the drain. */
enum { OD_PH_WAIT, OD_PH_RECV, OD_PH_WORK };
void od_conn_phase(struct MHD_Connection *c, int phase);

#endif
