/* Every family the library holds, by the accessor each family's .cu defines
 * (ktune__family_<family>); the list is generated from the build's families. */
#ifndef KTUNE_FAMILIES_H
#define KTUNE_FAMILIES_H

#include "ktune_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef const ktune_family *(*ktune_family_fn)(void);
extern const ktune_family_fn ktune__families[];
extern const int ktune__nfamilies;

/* The family named name, or NULL. */
const ktune_family *ktune__family_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif
