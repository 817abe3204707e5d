/* Online adaptation (ktune/ktune.h: KTUNE_ADAPT): a key a process launches often is timed with
 * its table row's runner-ups on the caller's stream, then settles on the fastest. */
#ifndef KTUNE_ADAPT_H
#define KTUNE_ADAPT_H

#include <cuda_runtime_api.h>

#include "ktune_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One launch's part in adaptation, from ktune__select_launch to ktune__adapt_end. */
typedef struct {
    int slot;    /* the key's state, or -1: this launch is not timed */
    int pending; /* its event pair */
} ktune_adapt_token;

/* ktune__select for a launch on stream. With adaptation off (the default) that is all; with it
 * on, a key launched KTUNE_ADAPT_AFTER times or more may be given one of its candidates (the
 * answer and its row's runner-ups valid for the key) instead, bracketed by events recorded on
 * stream (never while stream is being captured), or the candidate it settled on. Thread-safe. */
ktune_status ktune__select_launch(const ktune_family *family, const int64_t *key,
                                  const ktune_device *device, cudaStream_t stream, int *instance,
                                  ktune_adapt_token *token);

/* After the launch the token names: records its stop event on stream. */
void ktune__adapt_end(const ktune_adapt_token *token, cudaStream_t stream);

/* Forgets what adaptation learned and reads KTUNE_ADAPT again (tests). */
void ktune__adapt_reset(void);

#ifdef __cplusplus
}
#endif

#endif
