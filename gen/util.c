#define _POSIX_C_SOURCE 200809L
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unistd.h>

void ktune_buf_printf(ktune_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) {
            fprintf(stderr, "ktune: out of memory\n");
            abort();
        }
        b->data = data;
        b->cap = cap;
    }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void ktune_buf_free(ktune_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int ktune_fail(ktune_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int ktune_fail_at(ktune_err *err, const char *file, int line, int col, const char *fmt, ...)
{
    int n = snprintf(err->msg, sizeof err->msg, "%s:%d:%d: ", file, line, col);
    if (n < 0 || (size_t)n >= sizeof err->msg)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

char *ktune_file_read(const char *path, size_t *len, ktune_err *err)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    if (!f) {
        ktune_fail(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    ktune_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        ktune_buf_printf(&b, "%.*s", (int)n, chunk);
    if (ferror(f)) {
        ktune_fail(err, "%s: read error", path);
        ktune_buf_free(&b);
        goto done;
    }
    if (!b.data)
        ktune_buf_printf(&b, "%s", "");
    data = b.data;
    if (len)
        *len = b.len;
done:
    fclose(f);
    return data;
}

int ktune_mkdirs(const char *path, ktune_err *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return ktune_fail(err, "%s: path too long", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return ktune_fail(err, "%s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return ktune_fail(err, "%s: %s", tmp, strerror(errno));
    return 0;
}

int ktune_file_write_if_changed(const char *path, const char *data, size_t len, ktune_err *err)
{
    return ktune_file_write_validated(path, data, len, NULL, NULL, err);
}

int ktune_file_write_validated(const char *path, const char *data, size_t len,
                               ktune_validate_fn validate, void *ctx, ktune_err *err)
{
    ktune_err ignored;
    size_t oldlen;
    char *old = ktune_file_read(path, &oldlen, &ignored);
    int same = old && oldlen == len && memcmp(old, data, len) == 0;
    free(old);
    if (same)
        return 0;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return ktune_fail(err, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return ktune_fail(err, "%s: %s", tmp, strerror(errno));
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        return ktune_fail(err, "%s: %s", path, strerror(e));
    }
    if (validate && validate(tmp, ctx, err) != 0) {
        unlink(tmp);
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return ktune_fail(err, "%s: not written: what would have been written does not read "
                               "back: %s",
                          path, why);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ktune_fail(err, "%s: %s", path, strerror(e));
    }
    return 1;
}

int ktune_is_identifier(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || strncmp(s, "m4_", 3) == 0 || strncmp(s, "kt4_", 4) == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return 0;
    }
    return 1;
}

int ktune_is_safe_text(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '\\' || c == '"' || c == '[' || c == ']' || c == '`' ||
            c == '\'' || c == '$' || c == '#' || c == ',' || c == '(' || c == ')')
            return 0;
        /* a comment's end or start, and C's trigraphs (two question marks, then a slash, are a
         * backslash in C11) */
        if (i + 1 < n && ((c == '*' && s[i + 1] == '/') || (c == '/' && s[i + 1] == '*') ||
                          (c == '?' && s[i + 1] == '?')))
            return 0;
    }
    return 1;
}

int ktune_is_safe_path(const char *s)
{
    if (!*s || strlen(s) > 1024)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '/' || c == '-' || c == '+'))
            return 0;
    }
    return 1;
}

int ktune_parse_int(const char *s, int64_t *out)
{
    /* -?(0|[1-9][0-9]*): no sign '+', no leading zeros, no spaces, nothing after */
    const char *p = s + (*s == '-');
    if (!(*p >= '0' && *p <= '9') || (p[0] == '0' && p[1] != '\0'))
        return 0;
    for (const char *q = p; *q; q++)
        if (!(*q >= '0' && *q <= '9'))
            return 0;
    if (strlen(p) > 19)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return 0;
    *out = v;
    return 1;
}

int ktune_parse_double(const char *s, double *out)
{
    /* -?digits[.digits][(e|E)[+-]digits]: decimal only, no hex, inf or nan */
    const char *p = s + (*s == '-');
    size_t digits = strspn(p, "0123456789");
    if (digits == 0)
        return 0;
    p += digits;
    if (*p == '.') {
        size_t frac = strspn(p + 1, "0123456789");
        if (frac == 0)
            return 0;
        p += 1 + frac;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '+' || *p == '-';
        size_t exp = strspn(p, "0123456789");
        if (exp == 0 || exp > 4)
            return 0;
        p += exp;
    }
    if (*p)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

double ktune_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int ktune_run_capture(char *const argv[], ktune_buf *out, int *status, ktune_err *err)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return ktune_fail(err, "pipe: %s", strerror(errno));
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return ktune_fail(err, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(pipefd[1], 1);
        close(pipefd[0]);
        close(pipefd[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "ktune: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pipefd[1]);
    char chunk[65536];
    ssize_t n;
    while ((n = read(pipefd[0], chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0)
            ktune_buf_printf(out, "%.*s", (int)n, chunk);
    close(pipefd[0]);
    int st = 0;
    pid_t waited;
    while ((waited = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    *status = waited == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return 0;
}
