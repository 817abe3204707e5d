#define _POSIX_C_SOURCE 200809L
#include "keys.h"

#include <stdio.h>
#include <string.h>

#include "ktune_table.h"
#include "shapes.h"

/* The longest line of an untuned file, and of one --key item. */
#define KTUNE_KEY_TEXT_MAX 1024

/* One key from text: items "name=value" separated by sep. On an error, *bad is the offset in
 * text of the item at fault and why says what is wrong. */
static int key_parse(const ktune_space *s, const char *text, char sep, int64_t *key, size_t *bad,
                     char *why, size_t size)
{
    int given[KTUNE_MAX_KEY] = {0};
    const char *p = text;
    *bad = 0;
    for (;;) {
        while (*p == ' ' && sep != ' ')
            p++;
        const size_t len = strcspn(p, sep == ' ' ? " \t" : ",");
        *bad = (size_t)(p - text);
        if (len == 0)
            return snprintf(why, size, "an empty item"), -1;
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return snprintf(why, size, "'%.*s' is not name=value", (int)(len > 64 ? 64 : len), p),
                   -1;
        const size_t nlen = (size_t)(eq - p);
        int d = -1;
        for (int i = 0; i < s->nkey && d < 0; i++)
            if (strlen(s->key[i].name) == nlen && strncmp(s->key[i].name, p, nlen) == 0)
                d = i;
        if (d < 0)
            return snprintf(why, size, "%s's key has no dimension '%.*s'", s->family,
                            (int)(nlen > 40 ? 40 : nlen), p),
                   -1;
        if (given[d])
            return snprintf(why, size, "%s is given twice", s->key[d].name), -1;
        given[d] = 1;
        char value[64];
        const size_t vlen = len - nlen - 1;
        if (vlen == 0 || vlen >= sizeof value)
            return snprintf(why, size, "%s has no value, or one too long", s->key[d].name), -1;
        memcpy(value, eq + 1, vlen);
        value[vlen] = '\0';
        if (s->key[d].kind == KTUNE_DIM_DTYPE) {
            if (!ktune_dtype_parse(value, &key[d]))
                return snprintf(why, size, "%s: '%s' is not a dtype", s->key[d].name, value), -1;
        } else if (!ktune_parse_int(value, &key[d]) || key[d] < 1 || key[d] > KTUNE_DIM_MAX) {
            return snprintf(why, size, "%s: '%s' is not a size from 1 to 2^40", s->key[d].name,
                            value),
                   -1;
        }
        p += len;
        while (sep == ' ' && (*p == ' ' || *p == '\t'))
            p++;
        if (!*p)
            break;
        if (sep != ' ')
            p++; /* the comma */
    }
    for (int d = 0; d < s->nkey; d++)
        if (!given[d]) {
            *bad = (size_t)(p - text);
            return snprintf(why, size, "%s is missing", s->key[d].name), -1;
        }
    return 0;
}

int ktune_keys_parse(const ktune_space *s, const char *text, ktune_key_sink sink, void *ctx,
                     ktune_err *err)
{
    const char *p = text;
    for (;;) {
        const size_t len = strcspn(p, ";");
        char item[KTUNE_KEY_TEXT_MAX], why[256];
        if (len >= sizeof item)
            return ktune_fail(err, "--key: a key longer than %d characters",
                              KTUNE_KEY_TEXT_MAX - 1);
        memcpy(item, p, len);
        item[len] = '\0';
        int64_t key[KTUNE_MAX_KEY] = {0};
        size_t bad;
        if (key_parse(s, item, ',', key, &bad, why, sizeof why))
            return ktune_fail(err, "--key '%s': %s", item, why);
        if (sink(ctx, key, err))
            return -1;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

/* The keys of a file, a line each: untuned, lines "<family> name=value ..." (other families'
 * skipped); else (--shapes) "name=value ..." (spaces or commas between), the family's name first
 * or not. */
static int read_keys(const ktune_space *s, const char *flag, const char *path, int untuned,
                     ktune_key_sink sink, void *ctx, ktune_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ktune_fail(err, "%s %s: cannot read it", flag, path);
    char line[KTUNE_KEY_TEXT_MAX + 2];
    int lineno = 0, found = 0, rc = 0;
    const size_t flen = strlen(s->family);
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        const size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = ktune_fail_at(err, path, lineno, 1, "a line longer than %d characters",
                               KTUNE_KEY_TEXT_MAX);
            break;
        }
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[strspn(line, " \t")] == '\0')
            continue;
        /* "<family> " then the key; --shapes: the family's name may be left out */
        const int named = strncmp(line, s->family, flen) == 0 && line[flen] == ' ';
        const size_t skip = named ? flen + 1 : 0;
        if (untuned && !named)
            continue;
        const char *text = line + skip;
        const size_t first = strcspn(text, " \t,");
        if (!untuned && !memchr(text, '=', first)) {
            rc = ktune_fail_at(err, path, lineno, 1, "'%.*s' is not %s's name nor name=value",
                               (int)(first > 40 ? 40 : first), text, s->family);
            break;
        }
        int64_t key[KTUNE_MAX_KEY] = {0};
        size_t bad;
        char why[256];
        const char sep = !untuned && strchr(text, ',') ? ',' : ' ';
        if (key_parse(s, text, sep, key, &bad, why, sizeof why))
            rc = ktune_fail_at(err, path, lineno, (int)(skip + 1 + bad), "%s", why);
        else if (sink(ctx, key, err))
            rc = -1;
        found++;
    }
    fclose(f);
    if (rc == 0 && found == 0)
        rc = ktune_fail(err, "%s %s: no key of family %s in it", flag, path, s->family);
    return rc;
}

int ktune_keys_read_untuned(const ktune_space *s, const char *path, ktune_key_sink sink, void *ctx,
                            ktune_err *err)
{
    return read_keys(s, "--untuned", path, 1, sink, ctx, err);
}

int ktune_keys_read_shapes(const ktune_space *s, const char *path, ktune_key_sink sink, void *ctx,
                           ktune_err *err)
{
    return read_keys(s, "--shapes", path, 0, sink, ctx, err);
}
