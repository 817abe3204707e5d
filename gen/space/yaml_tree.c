#define _POSIX_C_SOURCE 200809L
#include "yaml_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define KTUNE_YAML_MAX_DEPTH 64
/* Bounds on the work a hostile file can cause: nodes in all, keys of one mapping (the duplicate
 * check compares each new key with the mapping's others). */
#define KTUNE_YAML_MAX_NODES 4000000
#define KTUNE_YAML_MAX_MAP_KEYS 1024

static ktune_node *node_new(ktune_node_kind kind, yaml_mark_t mark)
{
    ktune_node *n = calloc(1, sizeof *n);
    if (!n) {
        fprintf(stderr, "ktune: out of memory\n");
        abort();
    }
    n->kind = kind;
    n->line = (int)mark.line + 1;
    n->col = (int)mark.column + 1;
    return n;
}

static void node_append(ktune_node *parent, ktune_node *key, ktune_node *child)
{
    if (parent->count == parent->cap) {
        int cap = parent->cap ? parent->cap * 2 : 4;
        size_t size = sizeof(ktune_node *) * (size_t)cap;
        ktune_node **items = realloc(parent->items, size);
        if (items)
            parent->items = items;
        ktune_node **keys = parent->kind == KTUNE_NODE_MAP ? realloc(parent->keys, size) : NULL;
        if (keys)
            parent->keys = keys;
        if (!items || (parent->kind == KTUNE_NODE_MAP && !keys)) {
            fprintf(stderr, "ktune: out of memory\n");
            abort();
        }
        parent->cap = cap;
    }
    parent->items[parent->count] = child;
    if (parent->kind == KTUNE_NODE_MAP)
        parent->keys[parent->count] = key;
    parent->count++;
}

void ktune_node_free(ktune_node *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->count; i++) {
        ktune_node_free(n->items[i]);
        if (n->keys)
            ktune_node_free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->value);
    free(n);
}

const char *ktune_node_kind_name(ktune_node_kind kind)
{
    return kind == KTUNE_NODE_SCALAR ? "a scalar" : kind == KTUNE_NODE_SEQ ? "a list" : "a mapping";
}

/* A map being filled waits for its key (pending == NULL) or for the key's value. */
typedef struct {
    ktune_node *node;
    ktune_node *pending_key;
} frame;

static int attach(const char *path, frame *stack, int depth, ktune_node **root, ktune_node *n,
                  ktune_err *err)
{
    if (depth == 0) {
        *root = n;
        return 0;
    }
    frame *top = &stack[depth - 1];
    if (top->node->kind == KTUNE_NODE_SEQ) {
        node_append(top->node, NULL, n);
        return 0;
    }
    if (!top->pending_key) {
        if (n->kind != KTUNE_NODE_SCALAR) {
            ktune_fail_at(err, path, n->line, n->col, "a mapping key must be a scalar");
            ktune_node_free(n);
            return -1;
        }
        if (top->node->count == KTUNE_YAML_MAX_MAP_KEYS) {
            ktune_fail_at(err, path, n->line, n->col, "a mapping of more than %d keys",
                          KTUNE_YAML_MAX_MAP_KEYS);
            ktune_node_free(n);
            return -1;
        }
        if (ktune_map_get(top->node, n->value)) {
            ktune_fail_at(err, path, n->line, n->col, "duplicate key '%s'", n->value);
            ktune_node_free(n);
            return -1;
        }
        top->pending_key = n;
        return 0;
    }
    node_append(top->node, top->pending_key, n);
    top->pending_key = NULL;
    return 0;
}

ktune_node *ktune_yaml_load(const char *path, ktune_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ktune_fail(err, "%s: cannot open", path);
        return NULL;
    }
    yaml_parser_t parser;
    yaml_event_t ev;
    frame stack[KTUNE_YAML_MAX_DEPTH];
    int depth = 0, documents = 0, done = 0, failed = 0;
    long nodes = 0;
    ktune_node *root = NULL;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    while (!done && !failed) {
        if (!yaml_parser_parse(&parser, &ev)) {
            ktune_fail_at(err, path, (int)parser.problem_mark.line + 1,
                          (int)parser.problem_mark.column + 1, "%s%s%s",
                          parser.problem ? parser.problem : "syntax error",
                          parser.context ? " " : "", parser.context ? parser.context : "");
            failed = 1;
            break;
        }
        ktune_node *n = NULL;
        if ((ev.type == YAML_SCALAR_EVENT || ev.type == YAML_SEQUENCE_START_EVENT ||
             ev.type == YAML_MAPPING_START_EVENT) &&
            ++nodes > KTUNE_YAML_MAX_NODES) {
            ktune_fail_at(err, path, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                          "more than %d nodes", KTUNE_YAML_MAX_NODES);
            yaml_event_delete(&ev);
            failed = 1;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1) {
                ktune_fail_at(err, path, (int)ev.start_mark.line + 1,
                              (int)ev.start_mark.column + 1, "only one document is allowed");
                failed = 1;
            }
            break;
        case YAML_ALIAS_EVENT:
            ktune_fail_at(err, path, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                          "aliases are not supported");
            failed = 1;
            break;
        case YAML_SCALAR_EVENT:
            if (ev.data.scalar.tag) {
                ktune_fail_at(err, path, (int)ev.start_mark.line + 1,
                              (int)ev.start_mark.column + 1, "tags are not supported");
                failed = 1;
                break;
            }
            n = node_new(KTUNE_NODE_SCALAR, ev.start_mark);
            n->value = strdup((const char *)ev.data.scalar.value);
            n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            failed = attach(path, stack, depth, &root, n, err) != 0;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag != NULL
                                                     : ev.data.mapping_start.tag != NULL) {
                ktune_fail_at(err, path, (int)ev.start_mark.line + 1,
                              (int)ev.start_mark.column + 1, "tags are not supported");
                failed = 1;
                break;
            }
            if (depth == KTUNE_YAML_MAX_DEPTH) {
                ktune_fail_at(err, path, (int)ev.start_mark.line + 1,
                              (int)ev.start_mark.column + 1, "nesting deeper than %d",
                              KTUNE_YAML_MAX_DEPTH);
                failed = 1;
                break;
            }
            n = node_new(ev.type == YAML_SEQUENCE_START_EVENT ? KTUNE_NODE_SEQ : KTUNE_NODE_MAP,
                         ev.start_mark);
            if (attach(path, stack, depth, &root, n, err) != 0) {
                failed = 1;
                break;
            }
            stack[depth].node = n;
            stack[depth].pending_key = NULL;
            depth++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    if (!failed && !root) {
        ktune_fail_at(err, path, 1, 1, "the file holds no document");
        failed = 1;
    }
    if (failed) {
        for (int i = 0; i < depth; i++)
            ktune_node_free(stack[i].pending_key);
        ktune_node_free(root);
        root = NULL;
    }
    yaml_parser_delete(&parser);
    fclose(f);
    return root;
}

const ktune_node *ktune_map_get(const ktune_node *map, const char *key)
{
    if (!map || map->kind != KTUNE_NODE_MAP)
        return NULL;
    for (int i = 0; i < map->count; i++)
        if (strcmp(map->keys[i]->value, key) == 0)
            return map->items[i];
    return NULL;
}

int ktune_expect(const char *file, const ktune_node *n, ktune_node_kind kind, const char *what,
                 ktune_err *err)
{
    if (n->kind == kind)
        return 0;
    return ktune_fail_at(err, file, n->line, n->col, "%s must be %s, not %s", what,
                         ktune_node_kind_name(kind), ktune_node_kind_name(n->kind));
}

int ktune_expect_keys(const char *file, const ktune_node *map, const char *const *allowed,
                      const char *const *required, ktune_err *err)
{
    for (int i = 0; i < map->count; i++) {
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, map->keys[i]->value) == 0;
        if (!known) {
            char list[512] = "";
            for (const char *const *a = allowed; *a; a++) {
                strncat(list, *a, sizeof list - strlen(list) - 1);
                if (a[1])
                    strncat(list, ", ", sizeof list - strlen(list) - 1);
            }
            return ktune_fail_at(err, file, map->keys[i]->line, map->keys[i]->col,
                                 "unknown key '%s' (expected one of: %s)", map->keys[i]->value,
                                 list);
        }
    }
    for (const char *const *r = required; r && *r; r++)
        if (!ktune_map_get(map, *r))
            return ktune_fail_at(err, file, map->line, map->col, "missing key '%s'", *r);
    return 0;
}

int ktune_expect_int(const char *file, const ktune_node *n, const char *what, int64_t min,
                     int64_t max, int64_t *out, ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SCALAR, what, err))
        return -1;
    if (!n->plain || !ktune_parse_int(n->value, out))
        return ktune_fail_at(err, file, n->line, n->col, "%s must be an integer, not '%s'", what,
                             n->value);
    if (*out < min || *out > max)
        return ktune_fail_at(err, file, n->line, n->col,
                             "%s must be between %lld and %lld, not %lld", what, (long long)min,
                             (long long)max, (long long)*out);
    return 0;
}

int ktune_expect_double(const char *file, const ktune_node *n, const char *what, double *out,
                        ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SCALAR, what, err))
        return -1;
    if (!ktune_parse_double(n->value, out))
        return ktune_fail_at(err, file, n->line, n->col, "%s must be a number, not '%s'", what,
                             n->value);
    return 0;
}

int ktune_expect_identifier(const char *file, const ktune_node *n, const char *what,
                            ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SCALAR, what, err))
        return -1;
    if (!ktune_is_identifier(n->value, 40))
        return ktune_fail_at(err, file, n->line, n->col,
                             "%s must be an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 40 "
                             "characters, not beginning with m4_ or kt4_), not '%s'",
                             what, n->value);
    return 0;
}

int ktune_expect_text(const char *file, const ktune_node *n, const char *what, ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SCALAR, what, err))
        return -1;
    if (!ktune_is_safe_text(n->value, 200))
        return ktune_fail_at(err, file, n->line, n->col,
                             "%s holds a character that is not allowed (printable ASCII without "
                             "\\ \" ' ` [ ] ( ) , $ # /* */ ??, at most 200)",
                             what);
    return 0;
}

int ktune_expect_list(const char *file, const ktune_node *n, const char *what, ktune_err *err)
{
    if (ktune_expect(file, n, KTUNE_NODE_SEQ, what, err))
        return -1;
    if (n->count == 0)
        return ktune_fail_at(err, file, n->line, n->col, "%s must not be empty", what);
    return 0;
}
