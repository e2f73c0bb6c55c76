/* main.c — opdispatchd: options, start-up, signals, graceful shutdown.
 *
 * Invariants: every option has an environment variable (flags win); the
 * registry is frozen before the first request; SIGTERM/SIGINT stop new
 * connections, close those still receiving a request or idle, let requests
 * whose handler runs finish (up to --drain-timeout), and exit 0. Signals are
 * blocked in every thread and taken on the main thread with sigwaitinfo
 * (then sigtimedwait while draining), so no handler runs inside a worker.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "od_server.h"
#include "od_plugin.h"
#include "od_stats.h"

/* One table of options: getopt's list, the environment variables and
 * --help all come from it (a new option is its row, its O_ id, its case in
 * apply() and its od_config field). */
enum {
    O_HOST = 1, O_PORT, O_THREADS, O_MAX_BODY, O_MAX_RANK, O_MAX_ELEMS, O_MAX_OUT, O_MAX_DEPTH,
    O_MAX_VALUES, O_MAX_INFLIGHT, O_MAX_ACTIVE, O_BODY_WAIT, O_CPU_CACHE, O_CALL_WORKERS, O_MAX_CALL_S, O_MAX_CONN, O_MAX_CONN_IP, O_IDLE,
    O_REQ_TIMEOUT, O_DRAIN, O_DEVICE, O_SESSION_BYTES, O_SESSION_IDLE, O_HIGH_WATER, O_PLUGIN, O_TOKEN_FILE, O_ALLOW_ANON, O_TLS_CERT, O_TLS_KEY, O_LOG,
    O_NO_ACCESS, O_BENCH, O_HELP, O_VERSION
};

typedef struct opt_def {
    int id;
    const char *name;    /* --name */
    const char *metavar; /* NULL: takes no value */
    const char *env;     /* NULL: none */
    const char *dflt;    /* as shown in --help */
    const char *help;
} opt_def;

static const opt_def OPTS[] = {
    {O_HOST, "host", "ADDR", "OD_HOST", "127.0.0.1", "listen address, IPv4 or IPv6"},
    {O_PORT, "port", "N", "OD_PORT", "8000", "TCP port; 0 picks a free one and prints it"},
    {O_THREADS, "threads", "N", "OD_THREADS", "number of cores", "HTTP worker threads"},
    {O_MAX_BODY, "max-body-bytes", "N", "OD_MAX_BODY_BYTES", "512M", "largest request body; 413 above"},
    {O_MAX_RANK, "max-rank", "N", "OD_MAX_RANK", "16", "largest tensor rank accepted"},
    {O_MAX_ELEMS, "max-elements", "N", "OD_MAX_ELEMENTS", "268435456", "largest tensor (elements) accepted"},
    {O_MAX_OUT, "max-output-bytes", "N", "OD_MAX_OUTPUT_BYTES", "1G",
     "largest output a call may allocate (checked before allocating) and largest response data as "
     "sent; 413 above"},
    {O_MAX_DEPTH, "max-json-depth", "N", "OD_MAX_JSON_DEPTH", "64", "deepest JSON nesting; 400 above"},
    {O_MAX_VALUES, "max-json-values", "N", "OD_MAX_JSON_VALUES", "65536",
     "JSON values a request may hold outside tensor data; 413 above"},
    {O_MAX_INFLIGHT, "max-inflight-body-bytes", "N", "OD_MAX_INFLIGHT_BODY_BYTES", "2G",
     "request bodies held at once, all connections together; 503 above"},
    {O_MAX_ACTIVE, "max-active-body-bytes", "N", "OD_MAX_ACTIVE_BODY_BYTES", "256M",
     "bodies of 1 MiB or more read and worked on at once; a request past it waits its turn with its "
     "body unread, so fewer buffers are filled at once and more stay in cache; 0 = no queue"},
    {O_BODY_WAIT, "max-body-wait-ms", "MS", "OD_MAX_BODY_WAIT_MS", "1000",
     "longest a request waits for --max-active-body-bytes before its body is read anyway (a client "
     "that sends its body slowly holds up the others no longer than this)"},
    {O_CPU_CACHE, "cpu-cache-bytes", "N", "OD_CPU_CACHE_BYTES", "1G",
     "freed large CPU blocks kept for reuse (bodies, tensors); memory taken fresh from the kernel "
     "is zeroed page by page, so a load whose buffers outgrow this pays that on every call"},
    {O_CALL_WORKERS, "call-workers", "N", "OD_CALL_WORKERS", "cores",
     "operator calls run at once, on their own threads so the HTTP threads keep answering; 0 runs "
     "calls on the HTTP threads (no hand-off, no answers while kernels run)"},
    {O_MAX_CALL_S, "max-call-seconds", "S", "OD_MAX_CALL_SECONDS", "60",
     "cancel a call still running after S seconds (checked between kernel chunks); 504, 0 = none"},
    {O_MAX_CONN, "max-connections", "N", "OD_MAX_CONNECTIONS", "1024", "open connections in all"},
    {O_MAX_CONN_IP, "max-connections-per-ip", "N", "OD_MAX_CONNECTIONS_PER_IP", "256",
     "open connections per client address, 0 = no cap"},
    {O_IDLE, "idle-timeout", "S", "OD_IDLE_TIMEOUT", "60", "close a connection idle this long"},
    {O_REQ_TIMEOUT, "request-timeout", "S", "OD_REQUEST_TIMEOUT", "60",
     "answer 408 and close when a request's headers and body are not all in S seconds after its "
     "request line, 0 = none"},
    {O_DRAIN, "drain-timeout", "S", "OD_DRAIN_TIMEOUT", "30",
     "on SIGTERM, wait at most S seconds for calls that are running"},
    {O_DEVICE, "default-device", "D", "OD_DEFAULT_DEVICE", "auto",
     "device of calls that name none: auto (CUDA when available, else CPU), cpu, cuda, cuda:N"},
    {O_SESSION_BYTES, "max-session-bytes", "N", "OD_MAX_SESSION_BYTES", "4G",
     "bytes of stored tensors one session may keep on each device type; 507 above, 0 = no cap"},
    {O_SESSION_IDLE, "session-idle-seconds", "S", "OD_SESSION_IDLE_SECONDS", "3600",
     "free a session and its stored tensors after S seconds without use, 0 = never"},
    {O_HIGH_WATER, "store-high-water-bytes", "N", "OD_STORE_HIGH_WATER_BYTES", "16G",
     "stored tensor bytes per device type (all sessions) above which the least recently used "
     "unreferenced ones are evicted (their ids then answer 410), 0 = never"},
    {O_PLUGIN, "plugin", "PATH", "OD_PLUGINS", NULL,
     "load a plugin (a shared library whose od_plugin_init registers operators and kernels) before "
     "the registry freezes; repeatable; the variable takes a ':'-separated list"},
    {O_TOKEN_FILE, "token-file", "FILE", "OD_TOKEN_FILE", NULL,
     "bearer tokens and their scopes, one `TOKEN SCOPES [NAME]` a line (scopes: a comma list of "
     "read, call, admin); every route but health and the dashboard's files then needs a token "
     "with its scope (401, 403); the file must not be readable by other users"},
    {O_ALLOW_ANON, "allow-anonymous", NULL, "OD_ALLOW_ANONYMOUS=1", NULL,
     "listen on a non-loopback --host without --token-file (else refused); with a token file, "
     "requests without a token may read and call (admin still needs a token)"},
    {O_TLS_CERT, "tls-cert", "FILE", "OD_TLS_CERT", NULL,
     "serve HTTPS with this PEM certificate (chain); needs --tls-key"},
    {O_TLS_KEY, "tls-key", "FILE", "OD_TLS_KEY", NULL, "the PEM private key of --tls-cert"},
    {O_LOG, "log-level", "L", "OD_LOG_LEVEL", "info", "error, warn, info (access log) or debug"},
    {O_NO_ACCESS, "no-access-log", NULL, "OD_ACCESS_LOG=0", NULL, "no per-request line"},
    {O_BENCH, "enable-bench", NULL, "OD_ENABLE_BENCH=1", NULL,
     "allow POST /v1/bench (an operator run many times on server-side inputs; 403 otherwise)"},
    {O_HELP, "help", NULL, NULL, NULL, "this text"},
    {O_VERSION, "version", NULL, NULL, NULL, "the version"},
};
#define NOPTS ((int)(sizeof OPTS / sizeof OPTS[0]))

/* Prints text from column `col`, wrapped at 79 columns. */
static void wrap(FILE *f, const char *text, int col, int at)
{
    while (*text) {
        int room = 79 - at;
        int n = (int)strlen(text);
        if (n > room) { /* break at the last space that fits */
            n = room;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0)
                n = room;
        }
        for (int k = 0; k < n; k++)
            fputc(text[k] == '\1' ? ' ' : text[k], f);
        text += n;
        while (*text == ' ')
            text++;
        if (*text) {
            fprintf(f, "\n%*s", col, "");
            at = col;
        }
    }
    fputc('\n', f);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: opdispatchd [options]\n\n"
               "Serves operator calls over HTTP: POST /v1/ops/{op} (JSON or binary tensors),\n"
               "the Open Inference Protocol (/v2/...), introspection (/v1/ops, /v1/keys,\n"
               "/v1/devices), statistics (/v1/stats, /metrics). GET / lists the endpoints.\n\n"
               "Options (each also read from the environment variable shown; flags win):\n");
    enum { COL = 30 };
    for (int i = 0; i < NOPTS; i++) {
        const opt_def *o = &OPTS[i];
        char head[64], text[512];
        int hn = snprintf(head, sizeof head, "  --%s%s%s", o->name, o->metavar ? " " : "",
                          o->metavar ? o->metavar : "");
        if (o->env && o->dflt) /* \1: a space the wrap keeps */
            snprintf(text, sizeof text, "%s [%s,\1%s]", o->help, o->env, o->dflt);
        else if (o->env)
            snprintf(text, sizeof text, "%s [%s]", o->help, o->env);
        else
            snprintf(text, sizeof text, "%s", o->help);
        fprintf(f, "%s", head);
        if (hn >= COL) {
            fprintf(f, "\n%*s", COL, "");
        } else {
            fprintf(f, "%*s", COL - hn, "");
        }
        wrap(f, text, COL, COL);
    }
    fprintf(f, "\nSizes take a K, M or G suffix (powers of 1024). The access log goes to stderr,\n"
               "one line per request: ip, method, path, status, bytes sent, microseconds.\n");
}

static bool parse_num(const char *s, unsigned long long *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return false;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30;
    else if (*end)
        return false;
    if (mul > 1 && end[1])
        return false;
    if (v > ~0ull / mul)
        return false;
    *out = v * mul;
    return true;
}

/* Applies one option; returns false (after saying why) on a bad value. */
static bool apply(int id, const char *val, const char *src)
{
    unsigned long long v = 0;
    bool numeric = id != O_HOST && id != O_DEVICE && id != O_LOG && id != O_PLUGIN && id != O_TOKEN_FILE &&
                   id != O_TLS_CERT && id != O_TLS_KEY;
    if (numeric && !parse_num(val, &v)) {
        fprintf(stderr, "opdispatchd: %s: '%s' is not a non-negative number\n", src, val);
        return false;
    }
    switch (id) {
    case O_HOST:
        if (strlen(val) >= sizeof od_cfg.host) {
            fprintf(stderr, "opdispatchd: %s: address too long\n", src);
            return false;
        }
        snprintf(od_cfg.host, sizeof od_cfg.host, "%s", val);
        break;
    case O_PORT:
        if (v > 65535) {
            fprintf(stderr, "opdispatchd: %s: port %llu is out of range\n", src, v);
            return false;
        }
        od_cfg.port = (int)v;
        break;
    case O_THREADS:
        if (v < 1 || v > 1024) {
            fprintf(stderr, "opdispatchd: %s: threads must be 1..1024\n", src);
            return false;
        }
        od_cfg.threads = (int)v;
        break;
    case O_TOKEN_FILE:
    case O_TLS_CERT:
    case O_TLS_KEY: {
        char *dst = id == O_TOKEN_FILE ? od_cfg.token_file : id == O_TLS_CERT ? od_cfg.tls_cert : od_cfg.tls_key;
        if (!*val || strlen(val) >= sizeof od_cfg.token_file) {
            fprintf(stderr, "opdispatchd: %s: %s path\n", src, *val ? "too long a" : "an empty");
            return false;
        }
        snprintf(dst, sizeof od_cfg.token_file, "%s", val);
        break;
    }
    case O_MAX_BODY: od_cfg.max_body_bytes = (size_t)v; break;
    case O_MAX_RANK:
        if (v > OD_MAX_DIMS) {
            fprintf(stderr, "opdispatchd: %s: the largest supported rank is %d\n", src, OD_MAX_DIMS);
            return false;
        }
        od_cfg.max_rank = (int)v;
        break;
    case O_MAX_ELEMS:
        if (v < 1 || v > (1ull << 62)) {
            fprintf(stderr, "opdispatchd: %s: out of range\n", src);
            return false;
        }
        od_cfg.max_elements = (int64_t)v;
        break;
    case O_MAX_OUT: od_cfg.max_output_bytes = (size_t)v; break;
    case O_MAX_DEPTH:
        if (v < 2 || v > 10000) {
            fprintf(stderr, "opdispatchd: %s: JSON depth must be 2..10000\n", src);
            return false;
        }
        od_cfg.max_json_depth = (int)v;
        break;
    case O_MAX_CONN:
        if (v < 1 || v > 1000000) {
            fprintf(stderr, "opdispatchd: %s: out of range\n", src);
            return false;
        }
        od_cfg.max_connections = (unsigned)v;
        break;
    case O_MAX_CONN_IP: od_cfg.max_connections_per_ip = (unsigned)(v > 1000000 ? 1000000 : v); break;
    case O_IDLE: od_cfg.idle_timeout_s = (unsigned)(v > 86400 ? 86400 : v); break;
    case O_REQ_TIMEOUT: od_cfg.request_timeout_s = (unsigned)(v > 86400 ? 86400 : v); break;
    case O_DRAIN: od_cfg.drain_timeout_s = (unsigned)(v > 86400 ? 86400 : v); break;
    case O_MAX_VALUES: od_cfg.max_json_values = (int64_t)(v > (1ull << 40) ? (1ull << 40) : v); break;
    case O_MAX_INFLIGHT: od_cfg.max_inflight_body_bytes = (size_t)v; break;
    case O_MAX_ACTIVE: od_cfg.max_active_body_bytes = (size_t)v; break;
    case O_BODY_WAIT: od_cfg.max_body_wait_ms = (unsigned)(v > 86400000 ? 86400000 : v); break;
    case O_CPU_CACHE: od_cfg.cpu_cache_bytes = (size_t)v; break;
    case O_SESSION_BYTES: od_cfg.max_session_bytes = (size_t)v; break;
    case O_HIGH_WATER: od_cfg.store_high_water_bytes = (size_t)v; break;
    case O_PLUGIN: {
        /* the variable is a list; each path is copied, as getenv's may change */
        char *list = strdup(val), *save = NULL;
        for (char *p = list ? strtok_r(list, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save)) {
            if (od_cfg.nplugins == OD_MAX_PLUGINS) {
                fprintf(stderr, "opdispatchd: %s: at most %d plugins\n", src, OD_MAX_PLUGINS);
                free(list);
                return false;
            }
            if (access(p, R_OK) != 0) { /* a typo is a configuration error, like a bad number */
                fprintf(stderr, "opdispatchd: %s: '%s': %s\n", src, p, strerror(errno));
                free(list);
                return false;
            }
            od_cfg.plugins[od_cfg.nplugins++] = strdup(p);
        }
        free(list);
        return true;
    }
    case O_SESSION_IDLE: od_cfg.session_idle_s = (unsigned)(v > 31536000 ? 31536000 : v); break;
    case O_CALL_WORKERS:
        if (v > 1024) {
            fprintf(stderr, "opdispatchd: %s: call workers must be 0..1024\n", src);
            return false;
        }
        od_cfg.call_workers = (int)v;
        break;
    case O_MAX_CALL_S: od_cfg.max_call_seconds = (unsigned)(v > 86400 ? 86400 : v); break;
    case O_DEVICE: {
        od_device d;
        od_error e;
        if (strcmp(val, "auto") != 0 && od_device_parse(val, &d, &e) != OD_OK) {
            fprintf(stderr, "opdispatchd: %s: %s\n", src, e.message);
            return false;
        }
        snprintf(od_cfg.default_device, sizeof od_cfg.default_device, "%s", val);
        break;
    }
    case O_LOG: {
        static const char *names[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (!strcmp(val, names[i])) {
                od_cfg.log_level = (od_log_level)i;
                return true;
            }
        fprintf(stderr, "opdispatchd: %s: log level must be error, warn, info or debug\n", src);
        return false;
    }
    default: break;
    }
    return true;
}

/* Loads each --plugin in order and runs its entry point (before the
 * registry freezes). The libraries stay loaded: their kernels are in them.
 * 0, or -1 after logging which plugin failed and why. */
static int load_plugins(void)
{
    for (int i = 0; i < od_cfg.nplugins; i++) {
        const char *path = od_cfg.plugins[i];
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            od_log(OD_LOG_ERROR, "plugin %s: cannot load it: %s", path, dlerror());
            return -1;
        }
        const int *abi = dlsym(h, OD_PLUGIN_ABI_SYMBOL);
        if (!abi || *abi != OD_PLUGIN_API_VERSION) {
            od_log(OD_LOG_ERROR, "plugin %s: %s (rebuild it against this server's headers)", path,
                   abi ? "built for another plugin ABI" : "declares no ABI (OD_PLUGIN_DECLARE_ABI)");
            dlclose(h);
            return -1;
        }
        void *sym = dlsym(h, OD_PLUGIN_ENTRY);
        if (!sym) {
            od_log(OD_LOG_ERROR, "plugin %s: no %s function (see dispatcher/od_plugin.h)", path,
                   OD_PLUGIN_ENTRY);
            dlclose(h);
            return -1;
        }
        od_plugin_init_fn init;
        memcpy(&init, &sym, sizeof init); /* object pointer to function pointer, as POSIX allows */
        int before = od_op_count();
        od_error err;
        od_error_clear(&err);
        if (init(OD_PLUGIN_API_VERSION, &err) != OD_OK) {
            od_log(OD_LOG_ERROR, "plugin %s: %s", path, err.message[0] ? err.message : "its init failed");
            return -1;
        }
        od_log(OD_LOG_INFO, "plugin %s: loaded (%d operators added)", path, od_op_count() - before);
    }
    return 0;
}

int main(int argc, char **argv)
{
    od_config_defaults(&od_cfg);
    for (int i = 0; i < NOPTS; i++) {
        const char *v = OPTS[i].env && OPTS[i].metavar ? getenv(OPTS[i].env) : NULL;
        if (v && *v && !apply(OPTS[i].id, v, OPTS[i].env))
            return 2;
    }
    const char *eb = getenv("OD_ENABLE_BENCH");
    od_cfg.enable_bench = eb && !strcmp(eb, "1");
    const char *aa = getenv("OD_ALLOW_ANONYMOUS");
    od_cfg.allow_anonymous = aa && !strcmp(aa, "1");
    const char *al = getenv("OD_ACCESS_LOG");
    if (al && (!strcmp(al, "0") || !strcmp(al, "off") || !strcmp(al, "false")))
        od_cfg.access_log = false;

    struct option opts[NOPTS + 1];
    for (int i = 0; i < NOPTS; i++)
        opts[i] = (struct option){OPTS[i].name, OPTS[i].metavar ? required_argument : no_argument, 0,
                                  OPTS[i].id};
    opts[NOPTS] = (struct option){0, 0, 0, 0};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == O_HELP || c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == O_VERSION) {
            printf("opdispatchd %s\n", OD_VERSION);
            return 0;
        }
        if (c == O_NO_ACCESS) {
            od_cfg.access_log = false;
            continue;
        }
        if (c == O_BENCH) {
            od_cfg.enable_bench = true;
            continue;
        }
        if (c == O_ALLOW_ANON) {
            od_cfg.allow_anonymous = true;
            continue;
        }
        if (c == '?') {
            usage(stderr);
            return 2;
        }
        char src[64] = "";
        for (int i = 0; i < NOPTS; i++)
            if (OPTS[i].id == c)
                snprintf(src, sizeof src, "--%s", OPTS[i].name);
        if (!apply(c, optarg, src))
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "opdispatchd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    if (!*od_cfg.token_file && !od_cfg.allow_anonymous && !od_host_is_loopback(od_cfg.host)) {
        /* anyone who can reach the port could run kernels, reset statistics
         * and start server-side load: say so rather than serve it */
        fprintf(stderr,
                "opdispatchd: refusing to listen on %s without authentication: every client that can "
                "reach it could call operators and use the admin endpoints. Give --token-file FILE "
                "(bearer tokens with scopes), or --allow-anonymous to serve it open (e.g. behind a "
                "proxy that authenticates), or listen on 127.0.0.1.\n",
                od_cfg.host);
        return 2;
    }
    if (!*od_cfg.tls_cert != !*od_cfg.tls_key) {
        fprintf(stderr, "opdispatchd: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (*od_cfg.token_file) {
        char why[512];
        if (od_auth_load(od_cfg.token_file, why, sizeof why) != 0) {
            fprintf(stderr, "opdispatchd: %s\n", why);
            return 2;
        }
    }

    /* Block the shutdown signals before any thread starts, so every thread
     * inherits the mask and only sigwaitinfo/sigtimedwait below see them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    od_error err;
    od_error_clear(&err);
    if (od_init(&err) != OD_OK) {
        od_log(OD_LOG_ERROR, "start-up failed: %s", err.message);
        return 1;
    }
    if (load_plugins() != 0)
        return 1;
    od_registry_freeze();
    od_set_stats_hook(od_stats_kernel);
    od_cpu_cache_set_limit(od_cfg.cpu_cache_bytes);

    int port = 0;
    if (od_server_start(&port) != 0)
        return 1;
    const char *why = od_cuda_why();
    if (*why)
        od_log(OD_LOG_INFO, "CPU only: %s", why);
    else
        od_log(OD_LOG_INFO, "CUDA available; default device %s", od_cfg.default_device);
    if (od_auth_enabled())
        od_log(OD_LOG_INFO, "tokens from %s; requests without one may %s", od_cfg.token_file,
               od_auth_anonymous() ? "read and call" : "only reach health and the dashboard's files");
    else if (!od_host_is_loopback(od_cfg.host))
        od_log(OD_LOG_WARN, "--allow-anonymous: every client that reaches %s may use every endpoint",
               od_cfg.host);
    od_log(OD_LOG_INFO, "%d operators, %d HTTP threads, %d call workers, body cap %zu bytes",
           od_op_count(), od_cfg.threads, od_cfg.call_workers, od_cfg.max_body_bytes);
    bool v6 = strchr(od_cfg.host, ':') != NULL;
    printf("opdispatchd %s listening on %s://%s%s%s:%d/\n", OD_VERSION, *od_cfg.tls_cert ? "https" : "http",
           v6 ? "[" : "", od_cfg.host, v6 ? "]" : "", port);
    fflush(stdout);

    int sig;
    do {
        sig = sigwaitinfo(&sigs, NULL);
    } while (sig < 0 && errno == EINTR);
    od_log(OD_LOG_INFO, "signal %d: no new connections; draining %ld in-flight request(s)", sig,
           od_server_inflight());
    od_server_quiesce();
    od_load_stop(); /* a server-side load is not a request to drain: it ends now */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += od_cfg.drain_timeout_s;
    for (;;) {
        if (od_server_inflight() == 0)
            break;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline.tv_sec ||
            (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)) {
            od_log(OD_LOG_WARN, "drain timeout: %ld request(s) still in flight", od_server_inflight());
            break;
        }
        struct timespec tick = {0, 5 * 1000 * 1000};
        if (sigtimedwait(&sigs, NULL, &tick) > 0) {
            od_log(OD_LOG_WARN, "second signal: stopping now");
            break;
        }
    }
    od_server_stop();
    od_store_clear();
    od_auth_free();
    od_log(OD_LOG_INFO, "stopped");
    return 0;
}
