/* ktune_explain: a family by name, a key as text, a device detected or described. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "families.h"
#include "select.h"

int ktune__key_parse(const ktune_family *f, const char *text, int64_t *key)
{
    char buf[512];
    int seen[KTUNE_MAX_KEY] = {0};
    if (strlen(text) >= sizeof buf)
        return -1;
    strcpy(buf, text);
    memset(key, 0, sizeof(int64_t) * KTUNE_MAX_KEY);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        int d = 0;
        while (d < f->nkey && strcmp(f->key_names[d], tok) != 0)
            d++;
        if (d == f->nkey || seen[d])
            return -1;
        const char *v = eq + 1;
        if (f->key_kinds[d] == KTUNE_DIM_DTYPE) {
            if (!ktune_dtype_parse(v, &key[d]))
                return -1;
        } else {
            char *end;
            if (v[0] < '1' || v[0] > '9' || strlen(v) > 15)
                return -1;
            key[d] = strtoll(v, &end, 10);
            if (*end)
                return -1;
        }
        seen[d] = 1;
    }
    for (int d = 0; d < f->nkey; d++)
        if (!seen[d])
            return -1;
    return 0;
}

const ktune_family *ktune__family_find(const char *name)
{
    for (int i = 0; i < ktune__nfamilies; i++)
        if (strcmp(ktune__families[i]()->name, name) == 0)
            return ktune__families[i]();
    return NULL;
}

ktune_status ktune_explain(const char *family, const char *key, const ktune_device_spec *spec,
                           ktune_choice *choice)
{
    if (!family || !key || !choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_family *f = ktune__family_find(family);
    int64_t k[KTUNE_MAX_KEY];
    if (!f || ktune__key_parse(f, key, k))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    ktune_device described;
    const ktune_device *dev = &described;
    ktune_status st =
        spec ? ktune__device_from_spec(spec, &described) : ktune__device_current(&dev);
    if (st != KTUNE_OK)
        return st;
    int instance;
    return ktune__select(f, k, dev, &instance, choice);
}
