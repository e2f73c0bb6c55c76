/* web_files.c — the dashboard's static files: GET / (for a browser),
 * /web/{file}, /web/vendor/chart.js and the JavaScript client.
 *
 * Invariants: files come only from three fixed places (server/web/, the JS
 * client, Debian's Chart.js), found at start-up from OD_WEB_ROOT or the
 * paths compiled in; a request names a file by one segment of
 * [A-Za-z0-9._-] with no leading dot, so nothing outside them can be read.
 * Nothing is fetched from the network: the page works offline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "od_server.h"

#ifndef OD_WEB_ROOT
#define OD_WEB_ROOT "server/web"
#endif
#ifndef OD_JS_CLIENT
#define OD_JS_CLIENT "clients/js/opdispatch.mjs"
#endif
#define OD_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"

static const char *web_root(void)
{
    const char *e = getenv("OD_WEB_ROOT");
    return e && *e ? e : OD_WEB_ROOT;
}

static bool safe_name(const char *n)
{
    if (!n[0] || n[0] == '.' || strlen(n) > 128)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            return false;
    return true;
}

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    static const struct {
        const char *ext, *type;
    } types[] = {{".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
                 {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
                 {".svg", "image/svg+xml"}, {".png", "image/png"}, {".json", "application/json"}};
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

static void send_file(od_req *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
        if (f)
            fclose(f);
        od_respond_error(r, OD_ENOTFOUND, "no such file: %s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
        return;
    }
    od_buf b;
    od_buf_init(&b);
    if (!od_buf_reserve(&b, (size_t)st.st_size + 1)) {
        fclose(f);
        od_buf_free(&b);
        od_respond_error(r, OD_ENOMEM, "out of memory");
        return;
    }
    b.len = fread(b.data, 1, (size_t)st.st_size, f);
    fclose(f);
    od_respond_buf(r, 200, content_type(path), &b);
}

bool od_web_wants_page(od_req *r)
{
    const char *acc = od_req_header(r, "Accept");
    return acc && strstr(acc, "text/html");
}

void od_web_index(od_req *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/index.html", web_root());
    send_file(r, path);
}

void od_h_web_file(od_req *r)
{
    const char *name = r->params[0];
    if (!safe_name(name)) {
        od_respond_error(r, OD_ENOTFOUND, "no such file");
        return;
    }
    char path[1024];
    if (!strcmp(name, "opdispatch.mjs"))
        snprintf(path, sizeof path, "%s", getenv("OD_JS_CLIENT") ? getenv("OD_JS_CLIENT") : OD_JS_CLIENT);
    else
        snprintf(path, sizeof path, "%s/%s", web_root(), name);
    send_file(r, path);
}

void od_h_web_vendor(od_req *r)
{
    if (strcmp(r->params[0], "chart.js")) {
        od_respond_error(r, OD_ENOTFOUND, "no such file");
        return;
    }
    send_file(r, OD_CHARTJS);
}
