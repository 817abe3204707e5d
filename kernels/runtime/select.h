/* Choosing a configuration for a key: the policy documented in ktune/ktune.h. */
#ifndef KTUNE_SELECT_H
#define KTUNE_SELECT_H

#include "ktune_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Chooses the instance for key on device. On KTUNE_OK, *instance holds its index into
 * family->instances and choice (if not NULL) says what was chosen and why. Reads KTUNE_FORCE,
 * KTUNE_LOG and KTUNE_UNTUNED_FILE. Thread-safe. With choice NULL (the launch path) a key
 * answered before on the same device is answered again from a table read without a lock and
 * without formatting text; device must then outlive the process's calls (ktune__device_current's
 * does). */
ktune_status ktune__select(const ktune_family *family, const int64_t *key, const ktune_device *device,
                          int *instance, ktune_choice *choice);

/* The table row whose measurement ktune__select answers key from (the exact key's, else the
 * nearest row that measured the configuration the nearest keys vote for), its table's index in
 * *table; -1 where no row answers (a default does). */
int ktune__select_row(const ktune_family *family, const int64_t *key, const ktune_device *device,
                      int *table);

/* The instance the nearest row whose answer is valid for key answers (the rule before the vote),
 * or -1: the vote's yardstick in `ktune bench`. */
int ktune__select_nearest(const ktune_family *family, const int64_t *key,
                          const ktune_device *device);

/* The index of the table ktune__select answers from on device (step 1 of ktune/ktune.h), or -1. */
int ktune__select_table(const ktune_family *family, const ktune_device *device);

/* The instance the nearest keys' vote (step 3) picks for the key of row r of table ti with that
 * row left out: what the library would launch had that key not been tuned; -1 where it picks
 * none (a default would answer). `ktune explain --holdout` measures the vote by it. */
int ktune__select_holdout(const ktune_family *family, const ktune_device *device, int ti, int r);

/* Index of the instance named name, or -1. */
int ktune__instance_find(const ktune_family *family, const char *name);
/* Whether instance i serves key on dev: compiled for the key's instantiated values
 * (ktune_family.combo), and its variant's constraints hold. */
int ktune__instance_valid(const ktune_family *family, int i, const int64_t *key,
                          const ktune_device *dev);

/* Parses "name=value ..." (spaces or commas between) into key; -1 when a name is unknown,
 * repeated or missing, or a value is not a dtype's name or a positive decimal integer. */
int ktune__key_parse(const ktune_family *family, const char *text, int64_t *key);

/* Writes "dtype=f16 rows=4 cols=100" into buf. */
void ktune__key_format(const ktune_family *family, const int64_t *key, char *buf, size_t size);

/* Forgets cached environment settings, answers and warnings (tests change the environment); not
 * to be called while another thread selects. */
void ktune__select_reset(void);

#ifdef __cplusplus
}
#endif

#endif
