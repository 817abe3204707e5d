/* A gnuplot PNG of a bench: time against one key dimension, a panel for each value of the
 * others, a line for each variant (its fastest config), the tuned choice and each vendor path. */
#ifndef KTUNE_GEN_PLOT_H
#define KTUNE_GEN_PLOT_H

#include "space.h"

/* The most vendor paths one plot draws. */
#define KTUNE_PLOT_MAX_VENDORS 8

typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    double tuned_us;
    double vendor_us[KTUNE_PLOT_MAX_VENDORS]; /* a value for each of the plot's vendor paths, 0
                                                 where none */
    double *variant_us; /* a value for each variant of the space, 0 where none */
} ktune_plot_point;

/* The key dimension a plot of these points draws time against: the first integer dimension
 * whose value differs between two points of dtype `dtype` (-1: every point), else the first
 * integer dimension; -1 where the key has none. */
int ktune_plot_axis(const ktune_space *space, const ktune_plot_point *points, int count,
                    int64_t dtype);

/* Writes png (and png's .gp script and .dat data beside it) for the points whose dtype is dtype
 * (-1: the space has no dtype dimension), with x the key dimension x_dim, and a line for each of
 * the nvendors vendor paths named (identifiers); runs gnuplot. */
int ktune_plot_write(const ktune_space *space, const ktune_plot_point *points, int count,
                     int x_dim, int64_t dtype, const char *const *vendors, int nvendors,
                     const char *device, const char *png, ktune_err *err);

#endif
