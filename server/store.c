/* store.c — tensors kept on the server between requests, by session.
 *
 * Invariants:
 *  - A tensor id is 128 random bits (32 hex digits) and lives in exactly one
 *    session; a lookup names both, and an id of another session answers
 *    exactly like an unknown one (404, same message), so ids reveal nothing.
 *  - The store holds one reference to each tensor; od_store_get hands out a
 *    new one, so a call using a tensor is safe from a concurrent DELETE.
 *    Views keep their base's storage alive through the storage refcount.
 *  - One mutex guards everything; nothing under it calls the dispatcher or
 *    allocates tensor memory (releasing the last reference happens outside
 *    it), so it is held for hash-table work only.
 *  - Budgets count od_tensor_nbytes per stored tensor, per session and per
 *    device type (a view stored beside its base counts again: a bound, not
 *    an exact count of storage).
 *  - Above --store-high-water-bytes on a device type, a put first evicts the
 *    least recently used tensors of that device type (any session) that
 *    nothing but the store references (a running call, a view or its base
 *    keeps a tensor); an evicted id stays as a tombstone answering 410, up
 *    to OD_STORE_MAX_TOMBSTONES (older ones are forgotten: 404). When even
 *    evicting all such tensors would not make room, the put is 507 and
 *    nothing is evicted.
 *  - A session idle longer than --session-idle-seconds is freed whole by the
 *    reaper (od_store_expire); its ids then answer 404, like unknown ones.
 *  - od_store_clear frees everything (at shutdown), so leak checkers stay
 *    quiet.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "od_autograd.h"
#include "od_server.h"

typedef struct entry {
    char id[OD_ID_LEN];
    od_tensor *t; /* NULL once evicted: the entry is then a tombstone (410) */
    struct session *s;
    int64_t bytes;
    uint64_t last_used;
    char grad_id[OD_ID_LEN]; /* the stored .grad of t ("" when none) */
    struct entry *next; /* bucket chain */
} entry;

typedef struct session {
    char name[OD_SESSION_MAX + 1];
    int64_t ntensors;
    int64_t bytes[OD_NUM_DEVICE_TYPES];
    uint64_t created, last_used;
    struct session *next;
} session;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static entry **g_buckets;
static size_t g_nbuckets, g_nentries;
static session *g_sessions;
static int64_t g_bytes[OD_NUM_DEVICE_TYPES];
static int64_t g_puts, g_deletes, g_expired, g_evicted[OD_NUM_DEVICE_TYPES];
/* Ids of tombstones, oldest first (a ring): at most OD_STORE_MAX_TOMBSTONES
 * are remembered; older evicted ids then answer 404. */
#define OD_STORE_MAX_TOMBSTONES 65536
static char (*g_tomb)[OD_ID_LEN];
static size_t g_tomb_head, g_tomb_n;

/* 128 random bits as hex. getrandom blocks only before the pool is seeded. */
static void random_id(char id[OD_ID_LEN])
{
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n > 0)
            got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        id[2 * i] = hex[r[i] >> 4];
        id[2 * i + 1] = hex[r[i] & 15];
    }
    id[32] = '\0';
}

/* Ids are random: their first 16 hex digits are a good hash. */
static size_t id_hash(const char *id)
{
    uint64_t h = 1469598103934665603u;
    for (int i = 0; i < 16 && id[i]; i++)
        h = (h ^ (unsigned char)id[i]) * 1099511628211u;
    return (size_t)h;
}

static bool grow(void)
{
    size_t n = g_nbuckets ? g_nbuckets * 2 : 256;
    entry **nb = calloc(n, sizeof *nb);
    if (!nb)
        return false;
    for (size_t i = 0; i < g_nbuckets; i++) {
        entry *e = g_buckets[i];
        while (e) {
            entry *next = e->next;
            size_t k = id_hash(e->id) & (n - 1);
            e->next = nb[k];
            nb[k] = e;
            e = next;
        }
    }
    free(g_buckets);
    g_buckets = nb;
    g_nbuckets = n;
    return true;
}

static session *find_session(const char *name)
{
    for (session *s = g_sessions; s; s = s->next)
        if (!strcmp(s->name, name))
            return s;
    return NULL;
}

static session *get_session(const char *name)
{
    session *s = find_session(name);
    if (s)
        return s;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->created = s->last_used = od_now_ns();
    s->next = g_sessions;
    g_sessions = s;
    return s;
}

/* The entry of id in session name, or NULL (also when it is another's). */
static entry *find_entry(const char *name, const char *id, entry ***link)
{
    if (!g_nbuckets || strlen(id) != OD_ID_LEN - 1)
        return NULL;
    entry **p = &g_buckets[id_hash(id) & (g_nbuckets - 1)];
    for (; *p; p = &(*p)->next) {
        if (!strcmp((*p)->id, id)) {
            if (strcmp((*p)->s->name, name))
                return NULL;
            if (link)
                *link = p;
            return *p;
        }
    }
    return NULL;
}

static od_status unknown(const char *id, od_error *err)
{
    return od_error_set(err, OD_ENOTFOUND, "no tensor '%.40s' in this session", id);
}

static od_status gone(const char *id, od_error *err)
{
    return od_error_set(err, OD_EGONE,
                        "tensor '%.40s' was evicted: the store passed --store-high-water-bytes on its "
                        "device and it was the least recently used tensor nothing else referenced; "
                        "store it again",
                        id);
}

/* The link to the entry of id in any session, or NULL. */
static entry **find_any(const char *id)
{
    if (!g_nbuckets)
        return NULL;
    for (entry **p = &g_buckets[id_hash(id) & (g_nbuckets - 1)]; *p; p = &(*p)->next)
        if (!strcmp((*p)->id, id))
            return p;
    return NULL;
}

bool od_session_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > OD_SESSION_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.'))
            return false;
    }
    return true;
}

void od_store_new_session(char id[OD_ID_LEN])
{
    random_id(id);
    pthread_mutex_lock(&g_lock);
    get_session(id);
    pthread_mutex_unlock(&g_lock);
}

/* Unlinks e (under the lock); the caller releases e->t outside it. */
static od_tensor *unlink_entry(entry **link)
{
    entry *e = *link;
    *link = e->next;
    od_tensor *t = e->t;
    if (t) { /* a tombstone was taken out of the counts when it was evicted */
        int dev = t->device.type;
        e->s->ntensors--;
        e->s->bytes[dev] -= e->bytes;
        g_bytes[dev] -= e->bytes;
        g_deletes++;
    }
    g_nentries--;
    free(e);
    return t;
}

/* Remembers id as a tombstone; past the cap, the oldest one is dropped. */
static void add_tombstone(const char *id)
{
    if (!g_tomb && !(g_tomb = calloc(OD_STORE_MAX_TOMBSTONES, sizeof *g_tomb)))
        return;
    if (g_tomb_n == OD_STORE_MAX_TOMBSTONES) {
        entry **link = find_any(g_tomb[g_tomb_head]);
        if (link && !(*link)->t)
            unlink_entry(link);
        g_tomb_head = (g_tomb_head + 1) % OD_STORE_MAX_TOMBSTONES;
        g_tomb_n--;
    }
    memcpy(g_tomb[(g_tomb_head + g_tomb_n++) % OD_STORE_MAX_TOMBSTONES], id, OD_ID_LEN);
}

/* Whether evicting e frees memory: nothing but the store holds the tensor
 * or its storage (a call using it, a view of it or its base keep it). */
static bool evictable(const entry *e, int dev)
{
    return e->t && (int)e->t->device.type == dev && atomic_load(&e->t->refcount) == 1 &&
           atomic_load(&e->t->storage->refcount) == 1;
}

static int by_last_use(const void *a, const void *b)
{
    uint64_t x = (*(entry *const *)a)->last_used, y = (*(entry *const *)b)->last_used;
    return x < y ? -1 : x > y;
}

/* Makes room for `need` more bytes on device type dev under the high-water
 * mark by evicting the least recently used evictable tensors (any session):
 * their tensors go to *out (released by the caller, outside the lock).
 * OD_EQUOTA, evicting nothing, when even all of them would not do. */
static od_status make_room(int dev, int64_t need, od_tensor ***out, size_t *nout, od_error *err)
{
    int64_t hw = (int64_t)od_cfg.store_high_water_bytes;
    *nout = 0;
    if (!hw || g_bytes[dev] + need <= hw)
        return OD_OK;
    entry **cand = malloc((g_nentries ? g_nentries : 1) * sizeof *cand);
    if (!cand)
        return od_error_set(err, OD_ENOMEM, "out of memory");
    size_t n = 0;
    int64_t idle = 0;
    for (size_t i = 0; i < g_nbuckets; i++)
        for (entry *e = g_buckets[i]; e; e = e->next)
            if (evictable(e, dev)) {
                cand[n++] = e;
                idle += e->bytes;
            }
    if (g_bytes[dev] - idle + need > hw) {
        free(cand);
        return od_error_set(err, OD_EQUOTA,
                            "the store holds %lld bytes on %s and %lld more would pass "
                            "--store-high-water-bytes (%zu); only %lld bytes are idle and unreferenced",
                            (long long)g_bytes[dev], od_device_type_name((od_device_type)dev), (long long)need,
                            od_cfg.store_high_water_bytes, (long long)idle);
    }
    qsort(cand, n, sizeof *cand, by_last_use);
    *out = malloc((n ? n : 1) * sizeof **out);
    for (size_t k = 0; k < n && g_bytes[dev] + need > hw; k++) {
        entry *e = cand[k];
        e->s->ntensors--;
        e->s->bytes[dev] -= e->bytes;
        g_bytes[dev] -= e->bytes;
        g_evicted[dev]++;
        if (*out)
            (*out)[(*nout)++] = e->t;
        else
            od_tensor_release(e->t); /* no list: release under the lock rather than leak */
        e->t = NULL;
        add_tombstone(e->id);
    }
    free(cand);
    return OD_OK;
}

static void release_all(od_tensor **ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        od_tensor_release(ts[i]);
    free(ts);
}

od_status od_store_put(const char *name, od_tensor *t, char id[OD_ID_LEN], od_error *err)
{
    int64_t bytes = (int64_t)od_tensor_nbytes(t);
    int dev = t->device.type;
    od_status st = OD_OK;
    od_tensor **evicted = NULL;
    size_t nevicted = 0;
    pthread_mutex_lock(&g_lock);
    session *s = get_session(name);
    if (!s) {
        st = od_error_set(err, OD_ENOMEM, "out of memory");
        goto out;
    }
    if (od_cfg.max_session_bytes && s->bytes[dev] + bytes > (int64_t)od_cfg.max_session_bytes) {
        st = od_error_set(err, OD_EQUOTA,
                          "storing %lld bytes would put this session at %lld bytes on %s, over its "
                          "budget of %zu (--max-session-bytes)",
                          (long long)bytes, (long long)(s->bytes[dev] + bytes), od_device_type_name(t->device.type),
                          od_cfg.max_session_bytes);
        goto out;
    }
    if ((st = make_room(dev, bytes, &evicted, &nevicted, err)) != OD_OK)
        goto out;
    if (g_nentries + 1 > g_nbuckets * 2 && !grow()) {
        st = od_error_set(err, OD_ENOMEM, "out of memory");
        goto out;
    }
    entry *e = calloc(1, sizeof *e);
    if (!e) {
        st = od_error_set(err, OD_ENOMEM, "out of memory");
        goto out;
    }
    do
        random_id(e->id);
    while (find_entry(name, e->id, NULL));
    od_tensor_retain(t);
    e->t = t;
    e->s = s;
    e->bytes = bytes;
    e->last_used = s->last_used = od_now_ns();
    size_t k = id_hash(e->id) & (g_nbuckets - 1);
    e->next = g_buckets[k];
    g_buckets[k] = e;
    g_nentries++;
    s->ntensors++;
    s->bytes[dev] += bytes;
    g_bytes[dev] += bytes;
    g_puts++;
    memcpy(id, e->id, OD_ID_LEN);
out:
    pthread_mutex_unlock(&g_lock);
    if (nevicted)
        od_log(OD_LOG_INFO, "store: evicted %zu tensor(s) on %s to stay under --store-high-water-bytes", nevicted,
               od_device_type_name((od_device_type)dev));
    release_all(evicted, nevicted);
    return st;
}

od_status od_store_get(const char *name, const char *id, od_tensor **out, od_error *err)
{
    pthread_mutex_lock(&g_lock);
    entry *e = find_entry(name, id, NULL);
    bool was_evicted = e && !e->t;
    if (e && e->t) {
        od_tensor_retain(e->t);
        *out = e->t;
        e->last_used = e->s->last_used = od_now_ns();
    }
    pthread_mutex_unlock(&g_lock);
    return !e ? unknown(id, err) : was_evicted ? gone(id, err) : OD_OK;
}

od_status od_store_delete(const char *name, const char *id, od_error *err)
{
    entry **link = NULL;
    od_tensor *t = NULL;
    pthread_mutex_lock(&g_lock);
    bool found = find_entry(name, id, &link) != NULL;
    if (found) /* a tombstone too: deleting an evicted id forgets it */
        t = unlink_entry(link);
    pthread_mutex_unlock(&g_lock);
    if (!found)
        return unknown(id, err);
    od_tensor_release(t);
    return OD_OK;
}

/* Unlinks every tensor of session s (NULL: all) into a list to release. */
static od_tensor **unlink_all(const session *s, size_t *n)
{
    od_tensor **ts = malloc((g_nentries ? g_nentries : 1) * sizeof *ts);
    *n = 0;
    for (size_t i = 0; i < g_nbuckets; i++) {
        entry **p = &g_buckets[i];
        while (*p) {
            if (s && (*p)->s != s) {
                p = &(*p)->next;
                continue;
            }
            od_tensor *t = unlink_entry(p);
            if (ts)
                ts[(*n)++] = t;
            else
                od_tensor_release(t); /* no list: release under the lock rather than leak */
        }
    }
    return ts;
}


od_status od_store_drop_session(const char *name, od_error *err)
{
    size_t n = 0;
    od_tensor **ts = NULL;
    pthread_mutex_lock(&g_lock);
    session **p = &g_sessions;
    while (*p && strcmp((*p)->name, name))
        p = &(*p)->next;
    session *s = *p;
    if (s) {
        ts = unlink_all(s, &n);
        *p = s->next;
        free(s);
    }
    pthread_mutex_unlock(&g_lock);
    if (!s)
        return od_error_set(err, OD_ENOTFOUND, "no session '%.64s'", name);
    release_all(ts, n);
    return OD_OK;
}

int od_store_expire(uint64_t now, uint64_t idle_ns)
{
    if (!idle_ns)
        return 0;
    int expired = 0;
    for (;;) { /* one session at a time: its tensors are released outside the lock */
        size_t n = 0;
        od_tensor **ts = NULL;
        pthread_mutex_lock(&g_lock);
        session **p = &g_sessions;
        while (*p && !(now > (*p)->last_used && now - (*p)->last_used > idle_ns))
            p = &(*p)->next;
        session *s = *p;
        if (s) {
            ts = unlink_all(s, &n);
            *p = s->next;
            od_log(OD_LOG_INFO, "session %.8s... expired after %.0f s idle (%zu tensors freed)", s->name,
                   (double)(now - s->last_used) / 1e9, n);
            free(s);
            g_expired++;
        }
        pthread_mutex_unlock(&g_lock);
        if (!s)
            return expired;
        release_all(ts, n);
        expired++;
    }
}

void od_store_clear(void)
{
    size_t n = 0;
    pthread_mutex_lock(&g_lock);
    od_tensor **ts = unlink_all(NULL, &n);
    while (g_sessions) {
        session *s = g_sessions;
        g_sessions = s->next;
        free(s);
    }
    free(g_buckets);
    g_buckets = NULL;
    g_nbuckets = 0;
    free(g_tomb);
    g_tomb = NULL;
    g_tomb_head = g_tomb_n = 0;
    pthread_mutex_unlock(&g_lock);
    release_all(ts, n);
}

/* ---- JSON ------------------------------------------------------------------------ */

void od_store_tensor_meta_json(od_buf *b, const char *name, const char *id, const od_tensor *t)
{
    char dev[32];
    od_device_print(t->device, dev, sizeof dev);
    od_buf_putc(b, '{');
    if (name) {
        od_buf_puts(b, "\"name\":");
        od_buf_json_str(b, name);
        od_buf_putc(b, ',');
    }
    od_buf_puts(b, "\"id\":");
    od_buf_json_str(b, id);
    od_buf_puts(b, ",\"dtype\":");
    od_buf_json_str(b, od_dtype_name(t->dtype));
    od_buf_puts(b, ",\"shape\":");
    od_buf_i64s(b, t->sizes, t->ndim);
    od_buf_puts(b, ",\"strides\":");
    od_buf_i64s(b, t->strides, t->ndim);
    od_buf_puts(b, ",\"device\":");
    od_buf_json_str(b, dev);
    od_buf_printf(b, ",\"bytes\":%zu,\"contiguous\":%s,\"requires_grad\":%s,\"is_leaf\":%s",
                  od_tensor_nbytes(t), od_tensor_is_contiguous(t) ? "true" : "false",
                  t->requires_grad ? "true" : "false", od_is_leaf(t) ? "true" : "false");
    const char *fn = od_grad_fn_name(t);
    od_buf_puts(b, ",\"grad_fn\":");
    if (fn)
        od_buf_json_str(b, fn);
    else
        od_buf_puts(b, "null");
    char gid[OD_ID_LEN] = "";
    pthread_mutex_lock(&g_lock);
    entry **link = find_any(id);
    if (link && *link && (*link)->t == t && od_grad(t))
        memcpy(gid, (*link)->grad_id, OD_ID_LEN);
    pthread_mutex_unlock(&g_lock);
    od_buf_puts(b, ",\"grad\":");
    if (gid[0])
        od_buf_json_str(b, gid);
    else
        od_buf_puts(b, "null");
    od_buf_putc(b, '}');
}

/* Each stored tensor of the session with a .grad gets that gradient stored
 * too (once: the engine accumulates into the same tensor), its id in the
 * entry; {"id", "grad": metadata} per such tensor into b. */
od_status od_store_sync_grads(const char *name, od_buf *b, od_error *err)
{
    size_t n = 0, cap = 0;
    struct item {
        char id[OD_ID_LEN], grad_id[OD_ID_LEN];
        od_tensor *t, *g;
    } *items = NULL;
    pthread_mutex_lock(&g_lock);
    session *s = find_session(name);
    cap = s ? (size_t)s->ntensors : 0;
    items = cap ? calloc(cap, sizeof *items) : NULL;
    for (size_t i = 0; items && i < g_nbuckets; i++)
        for (entry *e = g_buckets[i]; e; e = e->next)
            if (e->s == s && e->t && od_grad(e->t) && n < cap) {
                struct item *it = &items[n++];
                memcpy(it->id, e->id, OD_ID_LEN);
                memcpy(it->grad_id, e->grad_id, OD_ID_LEN);
                it->t = e->t;
                it->g = od_grad(e->t);
                od_tensor_retain(it->t);
                od_tensor_retain(it->g);
            }
    pthread_mutex_unlock(&g_lock);
    od_status st = OD_OK;
    od_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
        struct item *it = &items[i];
        bool stored = false;
        if (it->grad_id[0]) { /* still the same tensor under that id? */
            pthread_mutex_lock(&g_lock);
            entry *e = find_entry(name, it->grad_id, NULL);
            stored = e && e->t == it->g;
            pthread_mutex_unlock(&g_lock);
        }
        if (!stored && st == OD_OK) {
            if ((st = od_store_put(name, it->g, it->grad_id, err)) == OD_OK) {
                pthread_mutex_lock(&g_lock);
                entry *e = find_entry(name, it->id, NULL);
                if (e)
                    memcpy(e->grad_id, it->grad_id, OD_ID_LEN);
                pthread_mutex_unlock(&g_lock);
            }
        }
        if (st == OD_OK) {
            if (i)
                od_buf_putc(b, ',');
            od_buf_puts(b, "{\"id\":");
            od_buf_json_str(b, it->id);
            od_buf_puts(b, ",\"grad\":");
            od_store_tensor_meta_json(b, NULL, it->grad_id, it->g);
            od_buf_putc(b, '}');
        }
        od_tensor_release(it->t);
        od_tensor_release(it->g);
    }
    od_buf_puts(b, "]");
    free(items);
    return st;
}

void od_store_tensor_detail_json(od_buf *b, const char *name, const char *id, const od_tensor *t)
{
    od_store_tensor_meta_json(b, NULL, id, t);
    if (b->len && b->data[b->len - 1] == '}')
        b->len--; /* the views join the object */
    od_buf_puts(b, ",\"shares_storage_with\":[");
    bool first = true;
    pthread_mutex_lock(&g_lock);
    session *s = find_session(name);
    for (size_t i = 0; s && i < g_nbuckets; i++)
        for (entry *e = g_buckets[i]; e; e = e->next)
            if (e->s == s && e->t && e->t->storage == t->storage && strcmp(e->id, id)) {
                if (!first)
                    od_buf_putc(b, ',');
                first = false;
                od_buf_json_str(b, e->id);
            }
    pthread_mutex_unlock(&g_lock);
    od_buf_puts(b, "]}");
}

void od_store_list_json(const char *name, od_buf *b)
{
    /* Collect new references under the lock; write outside it. */
    size_t n = 0, cap = 0;
    struct {
        char id[OD_ID_LEN];
        od_tensor *t;
    } *items = NULL;
    pthread_mutex_lock(&g_lock);
    session *s = find_session(name);
    cap = s ? (size_t)s->ntensors : 0;
    items = cap ? malloc(cap * sizeof *items) : NULL;
    for (size_t i = 0; items && i < g_nbuckets; i++)
        for (entry *e = g_buckets[i]; e; e = e->next)
            if (e->s == s && e->t && n < cap) {
                memcpy(items[n].id, e->id, OD_ID_LEN);
                od_tensor_retain(e->t);
                items[n++].t = e->t;
            }
    pthread_mutex_unlock(&g_lock);
    od_buf_puts(b, "{\"session\":");
    od_buf_json_str(b, name);
    od_buf_printf(b, ",\"count\":%zu,\"tensors\":[", n);
    for (size_t i = 0; i < n; i++) {
        if (i)
            od_buf_putc(b, ',');
        od_store_tensor_meta_json(b, NULL, items[i].id, items[i].t);
        od_tensor_release(items[i].t);
    }
    od_buf_puts(b, "]}");
    free(items);
}

od_status od_store_session_json(const char *name, od_buf *b, od_error *err)
{
    pthread_mutex_lock(&g_lock);
    session *s = find_session(name);
    if (s) {
        od_buf_puts(b, "{\"id\":");
        od_buf_json_str(b, s->name);
        od_buf_printf(b, ",\"tensors\":%lld,\"bytes\":{", (long long)s->ntensors);
        for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
            od_buf_printf(b, "%s\"%s\":%lld", d ? "," : "", od_device_type_name((od_device_type)d),
                          (long long)s->bytes[d]);
        od_buf_printf(b, "},\"budget_bytes\":%zu,\"idle_s\":%.3f,\"ids\":[", od_cfg.max_session_bytes,
                      (double)(od_now_ns() - s->last_used) / 1e9);
        bool first = true;
        for (size_t i = 0; i < g_nbuckets; i++)
            for (entry *e = g_buckets[i]; e; e = e->next)
                if (e->s == s && e->t) {
                    if (!first)
                        od_buf_putc(b, ',');
                    first = false;
                    od_buf_json_str(b, e->id);
                }
        od_buf_puts(b, "]}");
    }
    pthread_mutex_unlock(&g_lock);
    return s ? OD_OK : od_error_set(err, OD_ENOTFOUND, "no session '%.64s'", name);
}

void od_store_stats(od_store_totals *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g_lock);
    out->tensors = (int64_t)g_nentries;
    for (session *s = g_sessions; s; s = s->next)
        out->sessions++;
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        out->bytes[d] = g_bytes[d];
    out->puts = g_puts;
    out->deletes = g_deletes;
    out->expired_sessions = g_expired;
    for (int d = 0; d < OD_NUM_DEVICE_TYPES; d++)
        out->evicted[d] = g_evicted[d];
    pthread_mutex_unlock(&g_lock);
}
