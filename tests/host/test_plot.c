/* The axis a bench plot draws time against: the first integer key dimension that varies among
 * the plotted dtype's rows, else the first integer dimension. */
#include <string.h>

#include "check.h"
#include "plot.h"

static void dim(ktune_space *s, const char *name, ktune_dim_kind kind)
{
    snprintf(s->key[s->nkey].name, sizeof s->key[s->nkey].name, "%s", name);
    s->key[s->nkey++].kind = kind;
}

int main(void)
{
    static ktune_space s; /* (dtype, batch, heads, seq_len): qkattn's leading dimensions */
    dim(&s, "dtype", KTUNE_DIM_DTYPE);
    dim(&s, "batch", KTUNE_DIM_INT);
    dim(&s, "heads", KTUNE_DIM_INT);
    dim(&s, "seq_len", KTUNE_DIM_INT);
    ktune_plot_point p[4];
    memset(p, 0, sizeof p);
    const int64_t keys[4][4] = {{KTUNE_F16, 1, 5, 1024},
                                {KTUNE_F16, 1, 5, 2048},
                                {KTUNE_BF16, 1, 8, 1024},
                                {KTUNE_BF16, 2, 8, 1024}};
    for (int i = 0; i < 4; i++)
        memcpy(p[i].key, keys[i], sizeof keys[i]);
    /* batch is 1 in every f16 row: seq_len, the first that varies */
    CHECK(ktune_plot_axis(&s, p, 4, KTUNE_F16) == 3);
    /* the bf16 rows differ in batch first */
    CHECK(ktune_plot_axis(&s, p, 4, KTUNE_BF16) == 1);
    /* every row: batch differs between them */
    CHECK(ktune_plot_axis(&s, p, 4, -1) == 1);
    /* one row: nothing varies, the first integer dimension */
    CHECK(ktune_plot_axis(&s, p, 1, KTUNE_F16) == 1);
    /* no row of the dtype: the first integer dimension */
    CHECK(ktune_plot_axis(&s, p, 2, KTUNE_BF16) == 1);
    /* a key without integer dimensions */
    static ktune_space only_dtype;
    dim(&only_dtype, "dtype", KTUNE_DIM_DTYPE);
    CHECK(ktune_plot_axis(&only_dtype, p, 4, KTUNE_F16) == -1);
    return check_report("test_plot");
}
