/* libFuzzer target: arbitrary bytes as the lines of a run folder's trials.csv and final.csv
 * (after their header line), read against each space. */
#include <math.h>

#include "run_folder.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ktune_space *spaces = fuzz_spaces();
    fuzz_write("trials.csv", "key,config,status,median_us,spread,samples,detail\n", data, size);
    fuzz_write("final.csv", "key,config,rank,of,us,spread,is_default,is_committed\n", data, size);
    for (int i = 0; i < FUZZ_NSPACES; i++) {
        ktune_err err;
        if (ktune_trials_check(fuzz_dir(), &spaces[i], &err) != 0)
            fuzz_check_error(&err, fuzz_dir());
        ktune_final_row *rows = NULL;
        int n = 0;
        if (ktune_final_load(fuzz_dir(), &spaces[i], &rows, &n, &err) != 0) {
            fuzz_check_error(&err, fuzz_dir());
            continue;
        }
        /* what loads is what apply may take: configs of the space, finite positive times */
        for (int r = 0; r < n; r++)
            if (rows[r].rank > 0 && (ktune_space_find_config(&spaces[i], rows[r].config) < 0 ||
                                     !(rows[r].us > 0) || !isfinite(rows[r].us) ||
                                     rows[r].rank > rows[r].of))
                abort();
        free(rows);
    }
    return 0;
}
