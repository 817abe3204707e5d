/* A family's committed table headers compile as C (this file) and as C++ (test_headers.cpp
 * includes it), and each table's rows are sorted by key with a config name and a time no slower
 * than the default's beyond the noise. The build names the family: KTUNE_TEST_PREFIX
 * (ktune__<family>), KTUNE_TEST_NKEY (KTUNE_<FAMILY>_NKEY), KTUNE_TEST_SPACE and
 * KTUNE_TEST_TABLES (its generated space header and list of tables). */
#include <string.h>

#include "check.h"
#include KTUNE_TEST_SPACE
#include KTUNE_TEST_TABLES

#define KT_CAT2(a, b) a##b
#define KT_CAT(a, b) KT_CAT2(a, b)
#define table_count KT_CAT(KTUNE_TEST_PREFIX, _table_count)
#define tables KT_CAT(KTUNE_TEST_PREFIX, _tables)

#ifdef __cplusplus
#define NAME "test_headers (C++)"
#else
#define NAME "test_headers (C)"
#endif

int main(void)
{
    const int nkey = KTUNE_TEST_NKEY;
    CHECK(table_count == KTUNE_EXPECTED_TABLES);
    for (int t = 0; t < table_count; t++) {
        const ktune_table *tab = tables[t];
        CHECK(tab->nrows > 0 && tab->sms > 0 && tab->cc >= 10 && strlen(tab->device) > 0);
        for (int r = 0; r < tab->nrows; r++) {
            CHECK(tab->rows[r].config && tab->rows[r].config[0]);
            /* no slower than the default beyond the noise floors apply keeps a committed
             * config by (KTUNE_NOISE_FLOOR, KTUNE_NOISE_FLOOR_US: 1% and 0.15 us): a kept
             * entry's refreshed time may sit just above the default's in the same run */
            CHECK(tab->rows[r].us > 0 &&
                  tab->rows[r].us <= tab->rows[r].default_us * 1.01 + 0.15);
            if (r > 0) {
                const int64_t *a = tab->rows[r - 1].key, *b = tab->rows[r].key;
                int d = 0;
                while (d < nkey && a[d] == b[d])
                    d++;
                CHECK(d < nkey && a[d] < b[d]);
            }
        }
        printf("%s: %d rows\n", tab->device, tab->nrows);
    }
    CHECK(tables[table_count] == NULL);
    return check_report(NAME);
}
