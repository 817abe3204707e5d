/* The committed table headers compile as C (this file) and as C++ (test_headers.cpp includes
 * it), and each table's rows are sorted by key with a config name. */
#include <string.h>

#include "check.h"
#include "softmax_tables.c"

#ifdef __cplusplus
#define NAME "test_headers (C++)"
#else
#define NAME "test_headers (C)"
#endif

int main(void)
{
    CHECK(ktune_softmax_table_count == KTUNE_EXPECTED_TABLES);
    for (int t = 0; t < ktune_softmax_table_count; t++) {
        const ktune_table *tab = ktune_softmax_tables[t];
        CHECK(tab->nrows > 0 && tab->sms > 0 && tab->cc >= 10 && strlen(tab->device) > 0);
        for (int r = 0; r < tab->nrows; r++) {
            CHECK(tab->rows[r].config && tab->rows[r].config[0]);
            CHECK(tab->rows[r].us > 0 && tab->rows[r].us <= tab->rows[r].default_us);
            if (r > 0) {
                const int64_t *a = tab->rows[r - 1].key, *b = tab->rows[r].key;
                int d = 0;
                while (d < 3 && a[d] == b[d])
                    d++;
                CHECK(d < 3 && a[d] < b[d]);
            }
        }
        printf("%s: %d rows\n", tab->device, tab->nrows);
    }
    CHECK(ktune_softmax_tables[ktune_softmax_table_count] == NULL);
    return check_report(NAME);
}
