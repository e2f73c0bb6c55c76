/* auth.c — who may do what: the bearer tokens of --token-file and their
 * scopes.
 *
 * The token file: one token a line, `TOKEN SCOPES [NAME]`, fields separated
 * by spaces or tabs; SCOPES is a comma list of read, call and admin; NAME
 * (letters, digits, '.', '_', '-'; at most 32) is what the access log shows
 * for requests made with the token (default: "line<N>"). Blank lines and
 * lines whose first non-blank character is '#' are comments. A token is
 * 16..OD_TOKEN_MAX characters of RFC 6750's b64token alphabet.
 *
 * Invariants:
 *  - The table is written once, by od_auth_load before the server starts,
 *    and read-only after: lookups take no lock.
 *  - A file that cannot be read whole and exactly is refused (the server does
 *    not start): a malformed line, an unknown scope, a duplicate token, no
 *    token at all, or a file other users may read or write (a token file
 *    every local user can read hands its scopes to every local user).
 *    Messages name the file and the line, never a token.
 *  - A presented token is compared with every token in the table, each over
 *    the same fixed length, whatever matches: the time a lookup takes says
 *    nothing about how much of a token was right.
 *  - No token is ever logged; requests are named by the token's NAME.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "od_server.h"

#define OD_TOKEN_MAX 128     /* longest token accepted */
#define MAX_TOKENS 256       /* tokens in one file */
#define MAX_FILE_BYTES 65536 /* a token file larger than this is a mistake */
#define NAME_MAX_LEN 32

typedef struct token {
    unsigned char key[OD_TOKEN_MAX]; /* zero-padded, so every compare has one length */
    size_t len;
    unsigned scopes;                 /* OD_SCOPE_* bits */
    char name[NAME_MAX_LEN + 1];
} token;

static token *g_tokens; /* owned; g_ntokens of them */
static int g_ntokens;
static bool g_enabled;

bool od_auth_enabled(void) { return g_enabled; }

/* RFC 6750's b64token: ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/",
 * then "=" padding. */
static bool token_ok(const char *s, size_t n)
{
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !strchr("-._~+/", c))
            break;
    }
    if (i == 0)
        return false;
    while (i < n && s[i] == '=')
        i++;
    return i == n;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '_' && c != '-')
            return false;
    }
    return true;
}

/* Comma list of scope names into bits; 0 when any is unknown or empty. */
static unsigned parse_scopes(const char *s, size_t n)
{
    unsigned bits = 0;
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != ',')
            j++;
        size_t len = j - i;
        unsigned b = 0;
        for (unsigned k = 0; k < OD_NUM_SCOPES; k++)
            if (len == strlen(od_scope_name(1u << k)) && !strncmp(s + i, od_scope_name(1u << k), len))
                b = 1u << k;
        if (!b)
            return 0;
        bits |= b;
        i = j + 1;
    }
    return bits;
}

/* Splits line into at most 4 fields (a 4th means too many). */
static int split(char *line, const char *f[4], size_t fl[4])
{
    int n = 0;
    char *p = line;
    while (*p && n < 4) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        f[n] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        fl[n] = (size_t)(p - f[n]);
        n++;
    }
    return n;
}

/* Says why the file is refused (where: its line, 0 for the whole file),
 * drops what was read, returns -1. */
static int fail(char *why, size_t cap, const char *path, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *why, size_t cap, const char *path, int line, const char *fmt, ...)
{
    char where[32] = "", msg[256];
    if (line > 0)
        snprintf(where, sizeof where, ", line %d", line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(why, cap, "--token-file %s%s: %s", path, where, msg);
    free(g_tokens);
    g_tokens = NULL;
    g_ntokens = 0;
    return -1;
}

int od_auth_load(const char *path, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(why, cap, path, 0, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, cap, path, 0, "not a regular file");
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        close(fd);
        return fail(why, cap, path, 0, "other users may %s it; chmod o-rwx it",
                    (st.st_mode & S_IWOTH) ? "write" : "read");
    }
    if (st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return fail(why, cap, path, 0, "larger than 64 KiB");
    }
    char *text = malloc((size_t)st.st_size + 1);
    g_tokens = calloc(MAX_TOKENS, sizeof *g_tokens);
    if (!text || !g_tokens) {
        free(text);
        close(fd);
        return fail(why, cap, path, 0, "out of memory");
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, text + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    text[got] = '\0';
    if (strlen(text) != got) {
        free(text);
        return fail(why, cap, path, 0, "contains a NUL byte");
    }
    int lineno = 0;
    /* by hand, not strtok_r: it would skip empty lines and miscount */
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r')
            line[--ll] = '\0';
        const char *f[4];
        size_t fl[4];
        int nf = split(line, f, fl);
        char *next = nl ? nl + 1 : NULL;
        if (nf == 0 || f[0][0] == '#') {
            line = next;
            continue;
        }
        int r = 0;
        if (nf < 2)
            r = fail(why, cap, path, lineno, "expected `TOKEN SCOPES [NAME]`");
        else if (nf > 3)
            r = fail(why, cap, path, lineno, "more than three fields (TOKEN SCOPES NAME)");
        else if (fl[0] < 16 || fl[0] > OD_TOKEN_MAX)
            r = fail(why, cap, path, lineno, "a token must be 16 to 128 characters long");
        else if (!token_ok(f[0], fl[0]))
            r = fail(why, cap, path, lineno, "a token is letters, digits and -._~+/ (then = padding)");
        else if (!parse_scopes(f[1], fl[1]))
            r = fail(why, cap, path, lineno, "scopes are a comma list of read, call, admin");
        else if (nf == 3 && !name_ok(f[2], fl[2]))
            r = fail(why, cap, path, lineno, "a name is 1 to 32 letters, digits, '.', '_' or '-'");
        else if (g_ntokens == MAX_TOKENS)
            r = fail(why, cap, path, lineno, "more than 256 tokens");
        if (r) {
            free(text);
            return -1;
        }
        token *t = &g_tokens[g_ntokens];
        memcpy(t->key, f[0], fl[0]);
        t->len = fl[0];
        t->scopes = parse_scopes(f[1], fl[1]);
        if (nf == 3) {
            memcpy(t->name, f[2], fl[2]);
            t->name[fl[2]] = '\0';
        } else {
            snprintf(t->name, sizeof t->name, "line%d", lineno);
        }
        for (int i = 0; i < g_ntokens; i++)
            if (g_tokens[i].len == t->len && !memcmp(g_tokens[i].key, t->key, t->len)) {
                char other[NAME_MAX_LEN + 1];
                snprintf(other, sizeof other, "%s", g_tokens[i].name);
                free(text);
                return fail(why, cap, path, lineno, "the same token as the one named %s", other);
            }
        g_ntokens++;
        line = next;
    }
    free(text);
    if (g_ntokens == 0)
        return fail(why, cap, path, 0, "no tokens in it (a line is `TOKEN SCOPES [NAME]`)");
    g_enabled = true;
    return 0;
}

void od_auth_free(void)
{
    free(g_tokens);
    g_tokens = NULL;
    g_ntokens = 0;
    g_enabled = false;
}

unsigned od_auth_anonymous(void)
{
    if (!g_enabled) /* no token file: loopback, or --allow-anonymous: everything */
        return OD_SCOPE_READ | OD_SCOPE_CALL | OD_SCOPE_ADMIN;
    return od_cfg.allow_anonymous ? OD_SCOPE_READ | OD_SCOPE_CALL : 0;
}

int od_auth_scopes(const char *authorization, const char **name)
{
    *name = "-";
    if (!authorization)
        return (int)od_auth_anonymous();
    /* "Bearer" is case-insensitive (RFC 7235), then spaces, then the token */
    if (strncasecmp(authorization, "Bearer", 6) != 0 || (authorization[6] != ' ' && authorization[6] != '\t'))
        return -1;
    const char *p = authorization + 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0 || n > OD_TOKEN_MAX)
        return -1;
    unsigned char key[OD_TOKEN_MAX] = {0};
    memcpy(key, p, n);
    /* every token, every byte: no early exit on a match or a mismatch */
    int hit = -1;
    for (int i = 0; i < g_ntokens; i++) {
        unsigned diff = (unsigned)(g_tokens[i].len ^ n);
        for (size_t k = 0; k < OD_TOKEN_MAX; k++)
            diff |= (unsigned)(g_tokens[i].key[k] ^ key[k]);
        if (diff == 0)
            hit = i;
    }
    if (hit < 0)
        return -1;
    *name = g_tokens[hit].name;
    return (int)g_tokens[hit].scopes;
}

const char *od_scope_name(unsigned scope)
{
    switch (scope) {
    case 0: return "none";
    case OD_SCOPE_READ: return "read";
    case OD_SCOPE_CALL: return "call";
    case OD_SCOPE_ADMIN: return "admin";
    default: return "?";
    }
}

bool od_host_is_loopback(const char *host)
{
    if (!strcmp(host, "localhost") || !strcmp(host, "::1"))
        return true;
    /* 127.0.0.0/8, also as an IPv4-mapped IPv6 address */
    if (!strncasecmp(host, "::ffff:", 7))
        host += 7;
    return !strncmp(host, "127.", 4);
}
