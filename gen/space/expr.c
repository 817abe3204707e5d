#include "expr.h"

#include "ktune_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ktune_limit_names[] = {
#define KTUNE_LIMIT_NAME(name, type, what) #name,
    KTUNE_DEVICE_LIMIT_MAP(KTUNE_LIMIT_NAME)
#undef KTUNE_LIMIT_NAME
};

typedef enum {
    OP_NUM, OP_REF, OP_NEG, OP_NOT, OP_MUL, OP_DIV, OP_MOD, OP_ADD, OP_SUB,
    OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_AND, OP_OR, OP_MAX, OP_MIN
} op_kind;

static const char *const op_text[] = {"", "", "-", "!", "*", "/", "%", "+", "-", "<",
                                      "<=", ">", ">=", "==", "!=", "&&", "||", "max", "min"};

struct ktune_expr {
    op_kind op;
    int height; /* 1 for a leaf: the evaluator's and the printer's recursion depth */
    int64_t value;
    ktune_ref_kind ref;
    int index;
    ktune_expr *a, *b;
};

typedef struct {
    const char *text, *p;
    ktune_resolve_fn resolve;
    void *ctx;
    const char *file;
    int line, col;
    ktune_err *err;
    int failed;
    int nest; /* parentheses and unary operators open around the current token */
} parser;

static ktune_expr *node(op_kind op, ktune_expr *a, ktune_expr *b)
{
    ktune_expr *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    e->op = op;
    e->a = a;
    e->b = b;
    int ha = a ? a->height : 0, hb = b ? b->height : 0;
    e->height = 1 + (ha > hb ? ha : hb);
    return e;
}

void ktune_expr_free(ktune_expr *e)
{
    if (!e)
        return;
    ktune_expr_free(e->a);
    ktune_expr_free(e->b);
    free(e);
}

static void fail(parser *ps, const char *at, const char *fmt, const char *arg)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    ktune_fail_at(ps->err, ps->file, ps->line, ps->col + (int)(at - ps->text), "%s", msg);
}

/* Bounds the parser's recursion: a level of nesting more (a parenthesis, a unary operator). */
static int nest_enter(parser *ps, const char *at)
{
    if (++ps->nest <= KTUNE_EXPR_MAX_DEPTH)
        return 1;
    fail(ps, at, "the expression nests deeper than " KTUNE_EXPR_MAX_DEPTH_TEXT " levels%s", "");
    return 0;
}

/* Bounds the tree (and so the evaluator's and printer's recursion): a + b + ... of too many
 * terms is as deep as it is long. */
static ktune_expr *checked(parser *ps, const char *at, ktune_expr *e)
{
    if (e->height > KTUNE_EXPR_MAX_DEPTH)
        fail(ps, at, "the expression is deeper than " KTUNE_EXPR_MAX_DEPTH_TEXT
                     " operations (split it into several constraints)%s", "");
    return e;
}

static void skip(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

static int accept(parser *ps, const char *tok)
{
    skip(ps);
    size_t n = strlen(tok);
    if (strncmp(ps->p, tok, n) != 0)
        return 0;
    /* "<" must not take the first half of "<=", "!" of "!=", "&" alone is not an operator */
    if (n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '!' || tok[0] == '=') &&
        ps->p[1] == '=')
        return 0;
    ps->p += n;
    return 1;
}

static ktune_expr *parse_or(parser *ps);

static ktune_expr *parse_primary(parser *ps)
{
    skip(ps);
    const char *start = ps->p;
    if (accept(ps, "(")) {
        if (!nest_enter(ps, start))
            return node(OP_NUM, NULL, NULL);
        ktune_expr *e = parse_or(ps);
        ps->nest--;
        if (!accept(ps, ")"))
            fail(ps, ps->p, "expected ')'%s", "");
        return e;
    }
    if (*ps->p >= '0' && *ps->p <= '9') {
        int64_t v = 0;
        while (*ps->p >= '0' && *ps->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) {
                fail(ps, start, "number too large%s", "");
                break;
            }
            v = v * 10 + (*ps->p++ - '0');
        }
        ktune_expr *e = node(OP_NUM, NULL, NULL);
        e->value = v;
        return e;
    }
    if ((*ps->p >= 'a' && *ps->p <= 'z') || (*ps->p >= 'A' && *ps->p <= 'Z') || *ps->p == '_') {
        char name[64];
        size_t n = 0;
        while (((*ps->p >= 'a' && *ps->p <= 'z') || (*ps->p >= 'A' && *ps->p <= 'Z') ||
                (*ps->p >= '0' && *ps->p <= '9') || *ps->p == '_')) {
            if (n < sizeof name - 1)
                name[n++] = *ps->p;
            ps->p++;
        }
        name[n] = '\0';
        /* max(a, b) and min(a, b): a name followed by '(' */
        const op_kind fn = strcmp(name, "max") == 0 ? OP_MAX : strcmp(name, "min") == 0 ? OP_MIN
                                                                                       : OP_NUM;
        if (fn != OP_NUM && accept(ps, "(")) {
            if (!nest_enter(ps, start))
                return node(OP_NUM, NULL, NULL);
            ktune_expr *a = parse_or(ps);
            if (!accept(ps, ","))
                fail(ps, ps->p, "expected ',' between %s's two arguments", name);
            ktune_expr *b = parse_or(ps);
            ps->nest--;
            if (!accept(ps, ")"))
                fail(ps, ps->p, "expected ')' after %s's two arguments", name);
            return checked(ps, start, node(fn, a, b));
        }
        ktune_expr *e = node(OP_REF, NULL, NULL);
        if (ps->resolve(ps->ctx, name, &e->ref, &e->index) != 0)
            fail(ps, start,
                 "unknown name '%s' (not a parameter of this variant, a key dimension, a device "
                 "limit or <dtype dimension>_is_<dtype>)",
                 name);
        return e;
    }
    if (*ps->p == '\0')
        fail(ps, ps->p, "unexpected end of expression%s", "");
    else
        fail(ps, ps->p, "unexpected character '%.1s'", ps->p);
    return node(OP_NUM, NULL, NULL);
}

static ktune_expr *parse_unary(parser *ps)
{
    skip(ps);
    const char *at = ps->p;
    op_kind op = accept(ps, "-") ? OP_NEG : accept(ps, "!") ? OP_NOT : OP_NUM;
    if (op == OP_NUM)
        return parse_primary(ps);
    if (!nest_enter(ps, at))
        return node(OP_NUM, NULL, NULL);
    ktune_expr *e = checked(ps, at, node(op, parse_unary(ps), NULL));
    ps->nest--;
    return e;
}

/* Binary levels, loosest last: each entry lists its operators. */
static const struct {
    const char *tok[4];
    op_kind op[4];
} levels[] = {
    {{"*", "/", "%", NULL}, {OP_MUL, OP_DIV, OP_MOD}},
    {{"+", "-", NULL}, {OP_ADD, OP_SUB}},
    {{"<=", ">=", "<", ">"}, {OP_LE, OP_GE, OP_LT, OP_GT}},
    {{"==", "!=", NULL}, {OP_EQ, OP_NE}},
    {{"&&", NULL}, {OP_AND}},
    {{"||", NULL}, {OP_OR}},
};

static ktune_expr *parse_level(parser *ps, int level)
{
    if (level < 0)
        return parse_unary(ps);
    ktune_expr *e = parse_level(ps, level - 1);
    for (;;) {
        skip(ps);
        const char *at = ps->p;
        int matched = -1;
        for (int i = 0; i < 4 && levels[level].tok[i] && matched < 0; i++)
            if (accept(ps, levels[level].tok[i]))
                matched = i;
        if (matched < 0 || ps->failed)
            return e;
        e = checked(ps, at, node(levels[level].op[matched], e, parse_level(ps, level - 1)));
    }
}

static ktune_expr *parse_or(parser *ps)
{
    return parse_level(ps, (int)(sizeof levels / sizeof levels[0]) - 1);
}

ktune_expr *ktune_expr_parse(const char *text, ktune_resolve_fn resolve, void *ctx,
                             const char *file, int line, int col, ktune_err *err)
{
    parser ps = {text, text, resolve, ctx, file, line, col, err, 0, 0};
    ktune_expr *e = parse_or(&ps);
    skip(&ps);
    if (*ps.p && !ps.failed)
        fail(&ps, ps.p, "unexpected '%s'", ps.p);
    if (ps.failed) {
        ktune_expr_free(e);
        return NULL;
    }
    return e;
}

unsigned ktune_expr_uses(const ktune_expr *e)
{
    if (!e)
        return 0;
    unsigned self = e->op == OP_REF ? 1u << e->ref : 0;
    return self | ktune_expr_uses(e->a) | ktune_expr_uses(e->b);
}

int64_t ktune_expr_eval(const ktune_expr *e, const ktune_expr_env *env)
{
    int64_t a = e->a ? ktune_expr_eval(e->a, env) : 0;
    int64_t b = e->b ? ktune_expr_eval(e->b, env) : 0;
    switch (e->op) {
    case OP_NUM: return e->value;
    case OP_REF:
        switch (e->ref) {
        case KTUNE_REF_PARAM: return env->params[e->index];
        case KTUNE_REF_KEY: return env->key[e->index];
        case KTUNE_REF_KEY_BYTES: return ktune_dtype_bytes(env->key[e->index]);
        case KTUNE_REF_KEY_BITS: return ktune_dtype_bits(env->key[e->index]);
        case KTUNE_REF_LIMIT: return env->limits[e->index];
        case KTUNE_REF_KEY_IS: return env->key[e->index / 64] == e->index % 64;
        }
        return 0;
    case OP_NEG: return ktune_sat_neg(a);
    case OP_NOT: return !a;
    case OP_MUL: return ktune_sat_mul(a, b);
    case OP_DIV: return ktune_sat_div(a, b);
    case OP_MOD: return ktune_sat_mod(a, b);
    case OP_ADD: return ktune_sat_add(a, b);
    case OP_SUB: return ktune_sat_sub(a, b);
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_EQ: return a == b;
    case OP_NE: return a != b;
    case OP_AND: return a && b;
    case OP_OR: return a || b;
    case OP_MAX: return a > b ? a : b;
    case OP_MIN: return a < b ? a : b;
    }
    return 0;
}

/* The ktune_table.h function of an arithmetic operator or of max and min, or NULL. */
static const char *sat_function(op_kind op)
{
    switch (op) {
    case OP_NEG: return "ktune_sat_neg";
    case OP_MUL: return "ktune_sat_mul";
    case OP_DIV: return "ktune_sat_div";
    case OP_MOD: return "ktune_sat_mod";
    case OP_ADD: return "ktune_sat_add";
    case OP_SUB: return "ktune_sat_sub";
    case OP_MAX: return "ktune_max64";
    case OP_MIN: return "ktune_min64";
    default: return NULL;
    }
}

void ktune_expr_print_c(const ktune_expr *e, ktune_buf *out, ktune_name_fn name, void *ctx)
{
    const char *fn = sat_function(e->op);
    switch (e->op) {
    case OP_NUM: /* 0 to INT64_MAX: a minus is OP_NEG */
        ktune_buf_printf(out, "%lldLL", (long long)e->value);
        return;
    case OP_REF:
        ktune_buf_printf(out, "%s", name(ctx, e->ref, e->index));
        return;
    case OP_NOT:
        ktune_buf_printf(out, "(!");
        ktune_expr_print_c(e->a, out, name, ctx);
        ktune_buf_printf(out, ")");
        return;
    default:
        /* arithmetic as the evaluator does it (ktune_table.h's ktune_sat_*), comparisons and
         * logic as C does */
        ktune_buf_printf(out, "%s(", fn ? fn : "");
        ktune_expr_print_c(e->a, out, name, ctx);
        if (e->b) {
            if (fn)
                ktune_buf_printf(out, ", ");
            else
                ktune_buf_printf(out, " %s ", op_text[e->op]);
            ktune_expr_print_c(e->b, out, name, ctx);
        }
        ktune_buf_printf(out, ")");
        return;
    }
}
