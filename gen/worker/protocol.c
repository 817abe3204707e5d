#define _POSIX_C_SOURCE 200809L
#include "protocol.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ktune_trial_status_names[KTUNE_TRIAL_COUNT] = {
#define KTUNE_TRIAL_NAME(name, text) text,
    KTUNE_TRIAL_STATUS_MAP(KTUNE_TRIAL_NAME)
#undef KTUNE_TRIAL_NAME
};

ktune_trial_status ktune_trial_status_parse(const char *text)
{
    for (int i = 1; i < KTUNE_TRIAL_COUNT; i++)
        if (strcmp(text, ktune_trial_status_names[i]) == 0)
            return (ktune_trial_status)i;
    return KTUNE_TRIAL_NONE;
}

static const struct {
    char letter;
    int keyed, least, most;
    const char *what;
} requests[KTUNE_REQUEST_COUNT] = {
    {0, 0, 0, 0, "none"},
#define KTUNE_REQUEST_ROW(name, letter, keyed, least, most, what) {letter, keyed, least, most, what},
    KTUNE_REQUEST_MAP(KTUNE_REQUEST_ROW)
#undef KTUNE_REQUEST_ROW
};

char ktune_request_letter(ktune_request_kind kind)
{
    return kind > KTUNE_REQUEST_NONE && kind < KTUNE_REQUEST_COUNT ? requests[kind].letter : '?';
}

ktune_request_kind ktune_request_kind_of(char letter)
{
    for (int k = 1; k < KTUNE_REQUEST_COUNT; k++)
        if (requests[k].letter == letter)
            return (ktune_request_kind)k;
    return KTUNE_REQUEST_NONE;
}

const char *ktune_request_name(ktune_request_kind kind)
{
    return kind > KTUNE_REQUEST_NONE && kind < KTUNE_REQUEST_COUNT ? requests[kind].what : "none";
}

/* Appends to line[*len..size) as snprintf does; 0, or -1 once it no longer fits. */
static int add(char *line, size_t size, size_t *len, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int add(char *line, size_t size, size_t *len, const char *fmt, ...)
{
    if (*len >= size)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

int ktune_request_format(const ktune_request *r, char *line, size_t size)
{
    if (r->kind <= KTUNE_REQUEST_NONE || r->kind >= KTUNE_REQUEST_COUNT)
        return -1;
    const int keyed = requests[r->kind].keyed;
    if (r->nconfigs < requests[r->kind].least || r->nconfigs > requests[r->kind].most ||
        (keyed && (r->nkey < 0 || r->nkey > KTUNE_MAX_KEY)))
        return -1;
    size_t len = 0;
    if (add(line, size, &len, "%c %ld", requests[r->kind].letter, r->id))
        return -1;
    for (int d = 0; keyed && d < r->nkey; d++)
        if (add(line, size, &len, " %lld", (long long)r->key[d]))
            return -1;
    if (r->kind == KTUNE_REQUEST_SCREEN && r->best_us > 0 &&
        add(line, size, &len, " @%.4f", r->best_us))
        return -1;
    for (int i = 0; i < r->nconfigs; i++) {
        const char *c = r->configs[i];
        if (!c || !*c || strpbrk(c, " \t\r\n") || c[0] == '+' || c[0] == '@')
            return -1;
        if (add(line, size, &len, " %s%s",
                r->kind == KTUNE_REQUEST_SCREEN && r->pinned[i] ? "+" : "", c))
            return -1;
    }
    return add(line, size, &len, "\n") ? -1 : (int)len;
}

/* Strict numbers: the whole token, in range. */
static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return 0;
    *out = v;
    return 1;
}

/* A number of the protocol: finite and below 1e18 in magnitude (times, spreads, bytes, FLOP and
 * FLOP/s are far below it), so that it formats back in fewer characters than a token holds. */
static int parse_f64(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || fabs(v) >= 1e18)
        return 0;
    *out = v;
    return 1;
}

static int fail_why(char *why, size_t size, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail_why(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

int ktune_request_parse(char *line, int nkey, ktune_request *r, char *why, size_t size)
{
    memset(r, 0, sizeof *r);
    r->id = -1;
    char *save = NULL;
    char *tok = strtok_r(line, " \r\n", &save);
    if (!tok)
        return fail_why(why, size, "empty request");
    if (tok[1] || (r->kind = ktune_request_kind_of(tok[0])) == KTUNE_REQUEST_NONE)
        return fail_why(why, size, "unknown request '%s'", tok);
    int64_t v;
    tok = strtok_r(NULL, " \r\n", &save);
    if (!tok || !parse_i64(tok, &v))
        return fail_why(why, size, "malformed request: no id at '%s'", tok ? tok : "");
    r->id = (long)v;
    if (requests[r->kind].keyed) {
        if (nkey < 0 || nkey > KTUNE_MAX_KEY)
            return fail_why(why, size, "a key of more than %d dimensions", KTUNE_MAX_KEY);
        r->nkey = nkey;
        for (int d = 0; d < nkey; d++) {
            tok = strtok_r(NULL, " \r\n", &save);
            if (!tok || !parse_i64(tok, &r->key[d]))
                return fail_why(why, size, "malformed request: a key value expected at '%s'",
                                tok ? tok : "the end");
        }
    }
    while ((tok = strtok_r(NULL, " \r\n", &save))) {
        if (tok[0] == '@' && r->kind == KTUNE_REQUEST_SCREEN && r->nconfigs == 0 &&
            r->best_us == 0) {
            /* at least 0.0001 us: what the request's four decimals can carry back */
            if (!parse_f64(tok + 1, &r->best_us) || r->best_us < 1e-4)
                return fail_why(why, size, "malformed request: '%s' is not @<us> of 0.0001 or more",
                                tok);
            continue;
        }
        if (r->nconfigs == requests[r->kind].most)
            return fail_why(why, size, "more configs than the request takes, at '%s'", tok);
        const int pinned = tok[0] == '+' && r->kind == KTUNE_REQUEST_SCREEN;
        if (!tok[pinned] || tok[pinned] == '+' || tok[pinned] == '@')
            return fail_why(why, size, "malformed request: '%s' is not a config name", tok);
        r->pinned[r->nconfigs] = (unsigned char)pinned;
        r->configs[r->nconfigs++] = tok + pinned;
    }
    if (r->nconfigs < requests[r->kind].least)
        return fail_why(why, size, "malformed request: %c names too few configs",
                        requests[r->kind].letter);
    return 0;
}

void ktune_answer_fail(ktune_answer *a, long id, ktune_trial_status status, const char *fmt, ...)
{
    a->id = id;
    a->status = status == KTUNE_TRIAL_OK ? KTUNE_TRIAL_FAILED : status;
    a->n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->detail, sizeof a->detail, fmt, ap);
    va_end(ap);
    const size_t len = strlen(a->detail), tail = strlen(KTUNE_CONTEXT_LOST);
    a->context_lost = len >= tail && strcmp(a->detail + len - tail, KTUNE_CONTEXT_LOST) == 0;
}

int ktune_answer_format(ktune_request_kind kind, const ktune_answer *a, char *line, size_t size)
{
    size_t len = 0;
    if (a->status <= KTUNE_TRIAL_NONE || a->status >= KTUNE_TRIAL_COUNT)
        return -1;
    if (add(line, size, &len, "R %ld %s", a->id, ktune_trial_status_names[a->status]))
        return -1;
    if (a->status != KTUNE_TRIAL_OK) {
        /* one line: a detail's newlines would start another */
        if (add(line, size, &len, " 0 0 0 "))
            return -1;
        for (const char *c = a->detail; *c && len + 2 < size; c++)
            line[len++] = *c == '\n' || *c == '\r' ? ' ' : *c;
        line[len] = '\0';
        return add(line, size, &len, "\n") ? -1 : (int)len;
    }
    int rc = 0;
    switch (kind) {
    case KTUNE_REQUEST_TRIAL:
        rc = add(line, size, &len, " %.4f %.5f %d", a->entries[0].median_us, a->entries[0].spread,
                 a->entries[0].samples);
        break;
    case KTUNE_REQUEST_SCREEN:
        for (int i = 0; i < a->n && !rc; i++) {
            const ktune_answer_entry *x = &a->entries[i];
            rc = x->status <= KTUNE_TRIAL_NONE || x->status >= KTUNE_TRIAL_COUNT ||
                 add(line, size, &len, " %s %.4f %.5f %d", ktune_trial_status_names[x->status],
                     x->median_us, x->spread, x->samples);
        }
        break;
    case KTUNE_REQUEST_INTERLEAVE:
        for (int i = 0; i < a->n && !rc; i++)
            rc = add(line, size, &len, " %.4f %.5f", a->entries[i].median_us, a->entries[i].spread);
        break;
    case KTUNE_REQUEST_BENCH: {
#define KTUNE_FIELD_PRINT(name, format, what)                                                      \
    if (!rc)                                                                                       \
        rc = add(line, size, &len, " " format, fields->name);
        const ktune_bench_answer *fields = &a->bench;
        KTUNE_BENCH_FIELDS(KTUNE_FIELD_PRINT)
        const int nv = a->bench.nvendors;
        if (nv < 0 || nv > KTUNE_BENCH_MAX_VENDORS)
            return -1;
        if (!rc)
            rc = add(line, size, &len, " %d", nv);
        for (int v = 0; v < nv && !rc; v++) {
            const ktune_bench_vendor *x = &a->bench.vendors[v];
            if (!x->name[0] || strpbrk(x->name, " \t\r\n"))
                return -1;
            rc = add(line, size, &len, " %s %.4f %.5f", x->name, x->us, x->spread);
        }
        break;
    }
    case KTUNE_REQUEST_STATS: {
        const ktune_stats_answer *fields = &a->stats;
        KTUNE_STATS_FIELDS(KTUNE_FIELD_PRINT)
#undef KTUNE_FIELD_PRINT
        break;
    }
    default:
        return -1;
    }
    if (rc || add(line, size, &len, "\n"))
        return -1;
    return (int)len;
}

/* The next space-separated token of *p (advanced past it), as a string in tok; 0 at the end. */
static int next_token(const char **p, char *tok, size_t size)
{
    const char *s = *p;
    while (*s == ' ')
        s++;
    size_t n = strcspn(s, " \r\n");
    if (n == 0 || n >= size)
        return 0;
    memcpy(tok, s, n);
    tok[n] = '\0';
    *p = s + n;
    return 1;
}

static int next_double(const char **p, double *out)
{
    char tok[64];
    return next_token(p, tok, sizeof tok) && parse_f64(tok, out);
}

static int next_int(const char **p, int *out)
{
    char tok[64];
    int64_t v;
    if (!next_token(p, tok, sizeof tok) || !parse_i64(tok, &v) || v < 0 || v > 1 << 30)
        return 0;
    *out = (int)v;
    return 1;
}

static int unexpected(ktune_answer *a, const char *line)
{
    const size_t n = strcspn(line, "\r\n");
    ktune_answer_fail(a, a->id, KTUNE_TRIAL_FAILED, "unexpected answer: %.*s",
                      (int)(n > 900 ? 900 : n), line);
    return -1;
}

int ktune_answer_parse(const char *line, ktune_request_kind kind, int n, ktune_answer *a)
{
    memset(a, 0, sizeof *a);
    a->id = -1;
    const char *p = line;
    char tok[64];
    int64_t id;
    if (n < 0 || n > KTUNE_PROTOCOL_MAX_CONFIGS || !next_token(&p, tok, sizeof tok) ||
        strcmp(tok, "R") != 0 || !next_token(&p, tok, sizeof tok) || !parse_i64(tok, &id))
        return unexpected(a, line);
    a->id = (long)id;
    if (!next_token(&p, tok, sizeof tok) ||
        (a->status = ktune_trial_status_parse(tok)) == KTUNE_TRIAL_NONE ||
        a->status == KTUNE_TRIAL_TIMEOUT)
        return unexpected(a, line);
    if (a->status != KTUNE_TRIAL_OK) {
        double ignored;
        for (int i = 0; i < 3; i++)
            if (!next_double(&p, &ignored))
                return unexpected(a, line);
        while (*p == ' ')
            p++;
        ktune_answer_fail(a, a->id, a->status, "%.*s", (int)strcspn(p, "\r\n"), p);
        /* a TRIAL's outcome is its config's */
        if (kind == KTUNE_REQUEST_TRIAL) {
            a->n = 1;
            a->entries[0].status = a->status;
        }
        return 0;
    }
    int ok = 1;
    switch (kind) {
    case KTUNE_REQUEST_TRIAL:
        a->n = 1;
        a->entries[0].status = KTUNE_TRIAL_OK;
        ok = next_double(&p, &a->entries[0].median_us) && next_double(&p, &a->entries[0].spread) &&
             next_int(&p, &a->entries[0].samples);
        break;
    case KTUNE_REQUEST_SCREEN:
        a->n = n;
        for (int i = 0; i < n && ok; i++) {
            ktune_answer_entry *x = &a->entries[i];
            ok = next_token(&p, tok, sizeof tok) &&
                 (x->status = ktune_trial_status_parse(tok)) != KTUNE_TRIAL_NONE &&
                 next_double(&p, &x->median_us) && next_double(&p, &x->spread) &&
                 next_int(&p, &x->samples);
        }
        break;
    case KTUNE_REQUEST_INTERLEAVE:
        a->n = n;
        for (int i = 0; i < n && ok; i++) {
            a->entries[i].status = KTUNE_TRIAL_OK;
            ok = next_double(&p, &a->entries[i].median_us) &&
                 next_double(&p, &a->entries[i].spread);
        }
        break;
    case KTUNE_REQUEST_BENCH: {
#define KTUNE_FIELD_READ(name, format, what) ok = ok && next_double(&p, &fields->name);
        ktune_bench_answer *fields = &a->bench;
        KTUNE_BENCH_FIELDS(KTUNE_FIELD_READ)
        ok = ok && next_int(&p, &a->bench.nvendors) && a->bench.nvendors <= KTUNE_BENCH_MAX_VENDORS;
        for (int v = 0; ok && v < a->bench.nvendors; v++) {
            ktune_bench_vendor *x = &a->bench.vendors[v];
            ok = next_token(&p, x->name, sizeof x->name) && next_double(&p, &x->us) &&
                 next_double(&p, &x->spread);
        }
        break;
    }
    case KTUNE_REQUEST_STATS: {
        ktune_stats_answer *fields = &a->stats;
        KTUNE_STATS_FIELDS(KTUNE_FIELD_READ)
#undef KTUNE_FIELD_READ
        break;
    }
    default:
        ok = 0;
    }
    if (ok && next_token(&p, tok, sizeof tok))
        ok = 0; /* more than the kind's body */
    return ok ? 0 : unexpected(a, line);
}

int ktune_gpu_uuid_valid(const char *text)
{
    if (strncmp(text, "GPU-", 4) != 0 && strncmp(text, "MIG-", 4) != 0)
        return 0;
    static const char groups[] = {8, 4, 4, 4, 12};
    const char *c = text + 4;
    for (int g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, c++)
            if (!isxdigit((unsigned char)*c))
                return 0;
        if (*c != (g < 4 ? '-' : '\0'))
            return 0;
        c += g < 4;
    }
    return 1;
}

int ktune_hello_format(const ktune_hello *h, char *line, size_t size)
{
    size_t len = 0;
    if (add(line, size, &len, "H"))
        return -1;
#define KTUNE_LIMIT_PRINT(name, type, what)                                                        \
    if (add(line, size, &len, " %lld", (long long)h->name))                                        \
        return -1;
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_PRINT)
#undef KTUNE_LIMIT_PRINT
    if (add(line, size, &len, " %s %s %s ", h->driver_api, h->runtime,
            ktune_gpu_uuid_valid(h->uuid) ? h->uuid : "-"))
        return -1;
    for (const char *c = h->name; *c && len + 2 < size; c++)
        line[len++] = *c == '\n' || *c == '\r' ? ' ' : *c;
    line[len] = '\0';
    return add(line, size, &len, "\n") ? -1 : (int)len;
}

int ktune_no_device_format(const char *message, char *line, size_t size)
{
    size_t len = 0;
    if (add(line, size, &len, "E "))
        return -1;
    for (const char *c = message; *c && len + 2 < size; c++)
        line[len++] = *c == '\n' || *c == '\r' ? ' ' : *c;
    line[len] = '\0';
    return add(line, size, &len, "\n") ? -1 : (int)len;
}

int ktune_hello_parse(const char *line, ktune_hello *h, char *why, size_t size)
{
    memset(h, 0, sizeof *h);
    const int n = (int)strcspn(line, "\r\n");
    if (strncmp(line, "E ", 2) == 0) {
        snprintf(why, size, "%.*s", n - 2, line + 2);
        return 1;
    }
    const char *p = line;
    char tok[64];
    int ok = next_token(&p, tok, sizeof tok) && strcmp(tok, "H") == 0;
#define KTUNE_LIMIT_READ(name, type, what)                                                         \
    if (ok) {                                                                                      \
        int64_t v = 0;                                                                             \
        ok = next_token(&p, tok, sizeof tok) && parse_i64(tok, &v) && v >= 0 &&                    \
             (int64_t)(type)v == v; /* fits the field */                                           \
        h->name = (type)v;                                                                         \
    }
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_READ)
#undef KTUNE_LIMIT_READ
    ok = ok && next_token(&p, h->driver_api, sizeof h->driver_api) &&
         next_token(&p, h->runtime, sizeof h->runtime) && next_token(&p, h->uuid, sizeof h->uuid);
    if (ok && strcmp(h->uuid, "-") == 0)
        h->uuid[0] = '\0';
    else if (ok && !ktune_gpu_uuid_valid(h->uuid))
        ok = 0;
    while (ok && *p == ' ')
        p++;
    const int name_len = (int)strcspn(p, "\r\n");
    if (!ok || name_len == 0 || (size_t)name_len >= sizeof h->name) {
        snprintf(why, size, "unexpected first line '%.*s'", n > 300 ? 300 : n, line);
        return -1;
    }
    snprintf(h->name, sizeof h->name, "%.*s", name_len, p);
    return 0;
}
