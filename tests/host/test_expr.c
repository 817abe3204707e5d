/* Constraint and cost expressions: precedence, evaluation, the C they print as, and their
 * errors. */
#include <string.h>

#include "check.h"
#include "expr.h"
#include "ktune_table.h"

static int resolve(void *ctx, const char *name, ktune_ref_kind *kind, int *index)
{
    (void)ctx;
    static const char *const params[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, params[i]) == 0) {
            *kind = KTUNE_REF_PARAM;
            *index = i;
            return 0;
        }
    if (strcmp(name, "cols") == 0) {
        *kind = KTUNE_REF_KEY;
        *index = 1;
        return 0;
    }
    if (strcmp(name, "dtype_bytes") == 0) {
        *kind = KTUNE_REF_KEY_BYTES;
        *index = 0;
        return 0;
    }
    if (strcmp(name, "dtype_bits") == 0) {
        *kind = KTUNE_REF_KEY_BITS;
        *index = 0;
        return 0;
    }
    if (strcmp(name, "sms") == 0) {
        *kind = KTUNE_REF_LIMIT;
        *index = 0;
        return 0;
    }
    return -1;
}

static long long eval(const char *text)
{
    ktune_err err;
    ktune_expr *e = ktune_expr_parse(text, resolve, NULL, "t.yaml", 1, 1, &err);
    if (!e) {
        fprintf(stderr, "parse failed: %s\n", err.msg);
        return -999999;
    }
    const int64_t params[] = {2, 3, 5}, key[] = {1 /* f16 */, 1000}, limits[] = {132, 90, 1024, 0, 0, 1};
    ktune_expr_env env = {params, key, limits};
    long long v = ktune_expr_eval(e, &env);
    ktune_expr_free(e);
    return v;
}

static const char *name(void *ctx, ktune_ref_kind kind, int index)
{
    (void)ctx;
    static char buf[32];
    snprintf(buf, sizeof buf, "%c%d", "pkbl"[kind], index);
    return buf;
}

int main(void)
{
    CHECK(eval("1 + 2 * 3") == 7);
    CHECK(eval("(1 + 2) * 3") == 9);
    CHECK(eval("a * b + c") == 11);
    CHECK(eval("10 - 4 - 3") == 3);
    CHECK(eval("17 / 5 % 2") == 1);
    CHECK(eval("-a + 10") == 8);
    CHECK(eval("!0 && !(a > b)") == 1);
    CHECK(eval("a < b && b <= 3 && c >= 5 && c > 4 && a == 2 && a != 3") == 1);
    CHECK(eval("0 || a == 3 || cols == 1000") == 1);
    CHECK(eval("1 || 0 && 0") == 1); /* && binds tighter */
    CHECK(eval("dtype_bytes * 8") == 16);
    CHECK(eval("sms") == 132);
    CHECK(eval("dtype_bits") == 16);
    CHECK(eval("max(a, b) * 10 + min(a, b)") == 32);
    CHECK(eval("max(a * c, (cols + 1) / 100) + min(-a, b)") == 8);
    CHECK(eval("max(min(1, 2), max(a,0))") == 2);
    CHECK(eval("max(0 - 4611686018427387904 * 4, 0 - 1) == 0 - 1") == 1);
    /* every type of the table: its bits, and bytes rounded up */
    ktune_err perr;
    ktune_expr *bits = ktune_expr_parse("dtype_bits * 100 + dtype_bytes", resolve, NULL, "t", 1, 1,
                                        &perr);
    static const struct {
        const char *name;
        long long value;
    } types[] = {{"f32", 3204},     {"f16", 1602},     {"bf16", 1602},  {"int8", 801},
                 {"fp8_e4m3", 801}, {"fp8_e5m2", 801}, {"int32", 3204}, {"uint4", 401},
                 {"uint3", 301},    {"uint2", 201}};
    CHECK(KTUNE_DTYPE_COUNT == sizeof types / sizeof types[0]);
    for (size_t i = 0; bits && i < sizeof types / sizeof types[0]; i++) {
        int64_t dtype = -1;
        CHECK(ktune_dtype_parse(types[i].name, &dtype) && dtype == (int64_t)i);
        CHECK(strcmp(ktune_dtype_name(dtype), types[i].name) == 0);
        const int64_t key[] = {dtype, 1};
        ktune_expr_env env = {NULL, key, NULL};
        CHECK(ktune_expr_eval(bits, &env) == types[i].value);
    }
    CHECK(strcmp(ktune_dtype_name(KTUNE_DTYPE_COUNT), "?") == 0 && ktune_dtype_bits(-1) == 0);
    ktune_expr_free(bits);
    CHECK(eval("cols / (a - 2)") == 0); /* by zero: 0 */
    CHECK(eval("cols % 0 == 0") == 1);
    /* beyond int64: saturates, never wraps (and never trips UBSan) */
    CHECK(eval("4611686018427387904 * 4 > 0") == 1);
    CHECK(eval("-4611686018427387904 * 4 < 0") == 1);
    CHECK(eval("4611686018427387904 + 4611686018427387904 + 4611686018427387904 > 0") == 1);
    CHECK(eval("0 - 4611686018427387904 - 4611686018427387904 - 4611686018427387904 < 0") == 1);
    /* the generated checks compute with the same functions (ktune_table.h) */
    CHECK(ktune_sat_mul(INT64_C(4611686018427387904), 4) == INT64_MAX);
    CHECK(ktune_sat_mul(INT64_C(-4611686018427387904), 4) == INT64_MIN);
    CHECK(ktune_sat_add(INT64_MAX, 1) == INT64_MAX && ktune_sat_sub(INT64_MIN, 1) == INT64_MIN);
    CHECK(ktune_sat_div(INT64_MIN, -1) == INT64_MAX && ktune_sat_div(7, 0) == 0);
    CHECK(ktune_sat_mod(INT64_MIN, -1) == 0 && ktune_sat_mod(7, 0) == 0 && ktune_sat_mod(7, 4) == 3);
    CHECK(ktune_sat_neg(INT64_MIN) == INT64_MAX && ktune_sat_neg(5) == -5);
    CHECK(eval("4611686018427387904 * 4") == INT64_MAX && eval("-4611686018427387904 * 4") == INT64_MIN);

    ktune_err err;
    ktune_expr *e = ktune_expr_parse("a * nope <= 4", resolve, NULL, "s.yaml", 7, 9, &err);
    CHECK(e == NULL);
    CHECK(strcmp(err.msg, "s.yaml:7:13: unknown name 'nope' (not a parameter of this variant, a "
                          "key dimension, a device limit or <dtype dimension>_is_<dtype>)") == 0);
    e = ktune_expr_parse("a * (b + 1", resolve, NULL, "s.yaml", 2, 3, &err);
    CHECK(e == NULL && strstr(err.msg, "s.yaml:2:13: expected ')'") == err.msg);
    e = ktune_expr_parse("a b", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strstr(err.msg, "s.yaml:1:3: unexpected 'b'") == err.msg);
    e = ktune_expr_parse("a = 1", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL);
    e = ktune_expr_parse("99999999999999999999", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strstr(err.msg, "number too large") != NULL);
    e = ktune_expr_parse("max(a)", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strcmp(err.msg, "s.yaml:1:6: expected ',' between max's two arguments") == 0);
    e = ktune_expr_parse("min(a, b, c)", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strcmp(err.msg, "s.yaml:1:9: expected ')' after min's two arguments") == 0);
    e = ktune_expr_parse("max + 1", resolve, NULL, "s.yaml", 1, 1, &err); /* a name without '(' */
    CHECK(e == NULL && strstr(err.msg, "s.yaml:1:1: unknown name 'max'") == err.msg);
    e = ktune_expr_parse("", resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strstr(err.msg, "unexpected end") != NULL);

    /* depth: 100 levels parse, 101 do not (nesting, unary chains and left-deep sums alike) */
    ktune_buf deep = {0};
    for (int i = 0; i < 100; i++)
        ktune_buf_printf(&deep, "(");
    ktune_buf_printf(&deep, "1");
    for (int i = 0; i < 100; i++)
        ktune_buf_printf(&deep, ")");
    e = ktune_expr_parse(deep.data, resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e != NULL);
    ktune_expr_free(e);
    ktune_buf_free(&deep);
    ktune_buf_printf(&deep, "(");
    for (int i = 0; i < 100; i++)
        ktune_buf_printf(&deep, "(");
    e = ktune_expr_parse(deep.data, resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strcmp(err.msg, "s.yaml:1:101: the expression nests deeper than 100 levels") == 0);
    ktune_buf_free(&deep);
    for (int i = 0; i < 99; i++)
        ktune_buf_printf(&deep, "1+");
    ktune_buf_printf(&deep, "1");
    e = ktune_expr_parse(deep.data, resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e != NULL);
    ktune_expr_free(e);
    ktune_buf_printf(&deep, "+1");
    e = ktune_expr_parse(deep.data, resolve, NULL, "s.yaml", 1, 1, &err);
    CHECK(e == NULL && strstr(err.msg, "s.yaml:1:200: the expression is deeper than 100") == err.msg);
    ktune_buf_free(&deep);

    /* numbers as the loaders read them: plain decimal only */
    int64_t iv;
    double dv;
    CHECK(ktune_parse_int("0", &iv) && iv == 0);
    CHECK(ktune_parse_int("-17", &iv) && iv == -17);
    CHECK(ktune_parse_int("9223372036854775807", &iv) && iv == INT64_MAX);
    CHECK(!ktune_parse_int("9223372036854775808", &iv));
    CHECK(!ktune_parse_int("010", &iv) && !ktune_parse_int("+2", &iv) && !ktune_parse_int(" 4", &iv));
    CHECK(!ktune_parse_int("4 ", &iv) && !ktune_parse_int("", &iv) && !ktune_parse_int("-", &iv));
    CHECK(!ktune_parse_int("0x10", &iv) && !ktune_parse_int("1e3", &iv));
    CHECK(ktune_parse_double("12.5", &dv) && dv == 12.5);
    CHECK(ktune_parse_double("-1e-3", &dv) && dv == -1e-3);
    CHECK(ktune_parse_double("7", &dv) && dv == 7);
    CHECK(!ktune_parse_double("nan", &dv) && !ktune_parse_double("inf", &dv));
    CHECK(!ktune_parse_double("-inf", &dv) && !ktune_parse_double("1e999", &dv));
    CHECK(!ktune_parse_double("0x1p3", &dv) && !ktune_parse_double(".5", &dv));
    CHECK(!ktune_parse_double("5.", &dv) && !ktune_parse_double("1e", &dv));

    e = ktune_expr_parse("a * cols <= 4 * sms || !(c % b == 0)", resolve, NULL, "s", 1, 1, &err);
    CHECK(e != NULL);
    CHECK(ktune_expr_uses(e) == ((1u << KTUNE_REF_PARAM) | (1u << KTUNE_REF_KEY) | (1u << KTUNE_REF_LIMIT)));
    ktune_buf c = {0};
    ktune_expr_print_c(e, &c, name, NULL);
    CHECK(strcmp(c.data, "((ktune_sat_mul(p0, k1) <= ktune_sat_mul(4LL, l0)) || "
                         "(!(ktune_sat_mod(p2, p1) == 0LL)))") == 0);
    printf("printed: %s\n", c.data);
    ktune_buf_free(&c);
    ktune_expr_free(e);
    e = ktune_expr_parse("max(a, min(b, 2 * c))", resolve, NULL, "s", 1, 1, &err);
    CHECK(e != NULL);
    ktune_expr_print_c(e, &c, name, NULL);
    CHECK(strcmp(c.data, "ktune_max64(p0, ktune_min64(p1, ktune_sat_mul(2LL, p2)))") == 0);
    CHECK(ktune_max64(-3, 2) == 2 && ktune_min64(-3, 2) == -3);
    ktune_buf_free(&c);
    ktune_expr_free(e);
    return check_report("test_expr");
}
