/* Small helpers of the host tools: a growable text buffer, files, errors, validation. */
#ifndef KTUNE_GEN_UTIL_H
#define KTUNE_GEN_UTIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len, cap;
} ktune_buf;

void ktune_buf_printf(ktune_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ktune_buf_free(ktune_buf *b);

/* An error message, "file:line:col: message" or "argument: message". */
typedef struct {
    char msg[1024];
} ktune_err;

int ktune_fail(ktune_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ktune_fail_at(ktune_err *err, const char *file, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Reads a whole file; NULL (with err set) when it cannot. */
char *ktune_file_read(const char *path, size_t *len, ktune_err *err);
/* Writes data unless the file already holds exactly it: 1 written, 0 unchanged, -1 error. The
 * write goes to a temporary file renamed over the target, so a failure never leaves half a file. */
int ktune_file_write_if_changed(const char *path, const char *data, size_t len, ktune_err *err);
/* The same, and validate(temporary path, ctx, err) must return 0 before the temporary file is
 * renamed over path: a file that would not read back leaves the old one as it was. */
typedef int (*ktune_validate_fn)(const char *path, void *ctx, ktune_err *err);
int ktune_file_write_validated(const char *path, const char *data, size_t len,
                               ktune_validate_fn validate, void *ctx, ktune_err *err);
int ktune_mkdirs(const char *path, ktune_err *err);

/* [A-Za-z_][A-Za-z0-9_]*, at most max characters, not beginning with m4_ or kt4_: the names of
 * m4's builtins and of the templates' macros are out of every name's reach. */
int ktune_is_identifier(const char *s, size_t max);
/* Text safe inside a C string literal, a C comment and a quoted m4 argument: printable ASCII
 * without \ " ' ` [ ] ( ) , $ #, and without the pairs slash-star, star-slash and ??. */
int ktune_is_safe_text(const char *s, size_t max);
/* A relative or absolute path of [A-Za-z0-9_./+-]. */
int ktune_is_safe_path(const char *s);
/* Strict decimal int64: -?(0|[1-9][0-9]*), nothing else ("010", "+2", " 4" are refused). */
int ktune_parse_int(const char *s, int64_t *out);
/* A finite decimal number: -?digits[.digits][e[+-]digits]; no hex, inf or nan. */
int ktune_parse_double(const char *s, double *out);

/* Runs argv (argv[0] found on PATH unless it holds a slash; no shell) and appends what it writes
 * on stdout to out; *status is its exit code, -1 when a signal ended it. 0 once it ran, -1 (err
 * set) when it could not be started. */
int ktune_run_capture(char *const argv[], ktune_buf *out, int *status, ktune_err *err);

/* Seconds on CLOCK_MONOTONIC. */
double ktune_now_s(void);

#endif
