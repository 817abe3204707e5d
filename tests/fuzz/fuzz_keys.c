/* libFuzzer target: arbitrary bytes as an untuned-keys file (--untuned), as a list of keys
 * (--shapes) and as the text of --key, against the shipped spaces. Every key read back must have
 * each dimension in range. */
#include "keys.h"

#include "fuzz_common.h"

static int key_in_range(void *ctx, const int64_t *key, ktune_err *err)
{
    const ktune_space *s = ctx;
    (void)err;
    for (int d = 0; d < s->nkey; d++)
        if (s->key[d].kind == KTUNE_DIM_DTYPE ? key[d] < 0 || key[d] >= KTUNE_DTYPE_COUNT
                                              : key[d] < 1 || key[d] > ((int64_t)1 << 40))
            abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("untuned.txt", NULL, data, size);
    ktune_space *spaces = fuzz_spaces();
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    for (int i = 0; i < FUZZ_NSPACES; i++) {
        ktune_err err;
        if (ktune_keys_read_untuned(&spaces[i], path, key_in_range, &spaces[i], &err) != 0 &&
            strncmp(err.msg, path, strlen(path)) != 0 && strncmp(err.msg, "--untuned ", 10) != 0)
            abort(); /* an error names the file */
        if (ktune_keys_read_shapes(&spaces[i], path, key_in_range, &spaces[i], &err) != 0 &&
            strncmp(err.msg, path, strlen(path)) != 0 && strncmp(err.msg, "--shapes ", 9) != 0)
            abort(); /* an error names the file */
        if (ktune_keys_parse(&spaces[i], text, key_in_range, &spaces[i], &err) != 0 &&
            strncmp(err.msg, "--key", 5) != 0)
            abort(); /* an error names the flag */
    }
    free(text);
    return 0;
}
