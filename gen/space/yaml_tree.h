/* A YAML document read with libyaml into a tree that keeps every node's position. */
#ifndef KTUNE_GEN_YAML_TREE_H
#define KTUNE_GEN_YAML_TREE_H

#include "util.h"

typedef enum { KTUNE_NODE_SCALAR, KTUNE_NODE_SEQ, KTUNE_NODE_MAP } ktune_node_kind;

typedef struct ktune_node {
    ktune_node_kind kind;
    int line, col;  /* from 1 */
    char *value;    /* scalars */
    int plain;      /* scalar written without quotes */
    int count, cap;
    struct ktune_node **items; /* sequence items, or map values */
    struct ktune_node **keys;  /* map keys (scalars) */
} ktune_node;

/* Loads one document. Rejects syntax errors, aliases, tags, non-scalar and duplicate keys, nesting
 * deeper than 64, mappings of more than 1024 keys and files of more than 4 million nodes, with
 * "file:line:col: message". */
ktune_node *ktune_yaml_load(const char *path, ktune_err *err);
void ktune_node_free(ktune_node *node);

const ktune_node *ktune_map_get(const ktune_node *map, const char *key);
const char *ktune_node_kind_name(ktune_node_kind kind);

/* Schema checks, each failing with the node's position. */
int ktune_expect(const char *file, const ktune_node *n, ktune_node_kind kind, const char *what,
                 ktune_err *err);
/* Every key of map must be one of allowed (NULL-terminated); required ones must be present. */
int ktune_expect_keys(const char *file, const ktune_node *map, const char *const *allowed,
                      const char *const *required, ktune_err *err);
int ktune_expect_int(const char *file, const ktune_node *n, const char *what, int64_t min,
                     int64_t max, int64_t *out, ktune_err *err);
int ktune_expect_double(const char *file, const ktune_node *n, const char *what, double *out,
                        ktune_err *err);
int ktune_expect_identifier(const char *file, const ktune_node *n, const char *what,
                            ktune_err *err);
int ktune_expect_text(const char *file, const ktune_node *n, const char *what, ktune_err *err);
/* A non-empty sequence. */
int ktune_expect_list(const char *file, const ktune_node *n, const char *what, ktune_err *err);

#endif
