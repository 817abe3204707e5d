/* A device's registry for one family: the tuned entries, with the runs that produced them. */
#ifndef KTUNE_GEN_REGISTRY_H
#define KTUNE_GEN_REGISTRY_H

#include "space.h"

/* The longest time a registry or a run folder may record (us): 1000 s. */
#define KTUNE_TIME_MAX_US 1e9

/* An entry keeps the next KTUNE_RUNNER_UPS_TOP configs, then the fastest of each other variant. */
#define KTUNE_RUNNER_UPS_TOP 3
#define KTUNE_RUNNER_UPS 8

typedef struct {
    char config[KTUNE_CONFIG_NAME_MAX];
    double us;
} ktune_runner_up;

typedef struct {
    int64_t key[KTUNE_MAX_KEY];
    char config[KTUNE_CONFIG_NAME_MAX];
    double us, spread, default_us;
    int run;
    ktune_runner_up runner_ups[KTUNE_RUNNER_UPS];
    int nrunner_ups;
} ktune_entry;

/* A run's provenance, also the metadata a sweep writes into its run folder. */
typedef struct {
    int id;
    char name[256];   /* the run folder's name */
    char family[KTUNE_NAME_MAX + 1]; /* meta.yaml only */
    char device[256];
    int sms, cc;
    char driver[64], cuda[64], source[64], date[32];
    char search[16]; /* meta.yaml only: staged or exhaustive (runs that predate it: exhaustive) */
} ktune_run_info;

typedef struct {
    char family[KTUNE_NAME_MAX + 1];
    char device[256];
    int sms, cc;
    ktune_run_info *runs;
    int nruns;
    ktune_entry *entries; /* sorted by key */
    int nentries;
} ktune_registry;

/* Loads path; every config must be in space, every text safe for a header (ktune_is_safe_text),
 * every time finite and positive, run ids unique. */
int ktune_registry_load(const char *path, const ktune_space *space, ktune_registry *reg,
                        ktune_err *err);
void ktune_registry_free(ktune_registry *reg);
/* The registry as YAML, byte-identical for identical content. */
void ktune_registry_format(const ktune_registry *reg, const ktune_space *space, ktune_buf *out);
/* Writes the registry to path through a temporary file that must load back (every text safe,
 * every config in space, every time finite and positive) and hold the same entries before it
 * replaces path: a registry that would not read back leaves the old file as it was. 1 written,
 * 0 unchanged, -1 error. */
int ktune_registry_write(const char *path, const ktune_registry *reg, const ktune_space *space,
                         ktune_err *err);
/* Index of the entry with this key, or -1. */
int ktune_registry_find(const ktune_registry *reg, const ktune_space *space, const int64_t *key);
/* Inserts or replaces, keeping entries sorted. */
void ktune_registry_put(ktune_registry *reg, const ktune_space *space, const ktune_entry *entry);
/* The id the next added run gets; ktune_registry_add_run returns it. */
int ktune_registry_next_run_id(const ktune_registry *reg);
int ktune_registry_add_run(ktune_registry *reg, const ktune_run_info *run);

/* "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"; identifier form uses '_'. */
void ktune_device_slug(const char *device, char *out, size_t size, char sep);

/* Run metadata (meta.yaml of a run folder). */
int ktune_run_info_load(const char *path, ktune_run_info *run, ktune_err *err);

#endif
