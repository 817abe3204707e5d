/* Putting files on disk (fsync) in the background: the sweep's journals are written and flushed
 * line by line, and a thread makes them durable while the next measurement runs, so the GPU does
 * not wait for the disk. */
#ifndef KTUNE_GEN_SYNCER_H
#define KTUNE_GEN_SYNCER_H

typedef struct ktune_syncer ktune_syncer;

/* Starts the thread; NULL where it cannot, and then every request is an fsync on the spot. */
ktune_syncer *ktune_syncer_start(void);
/* Asks for fd to be on disk soon (at once without a syncer). fd stays open until the stop. */
void ktune_syncer_request(ktune_syncer *s, int fd);
/* Puts every file asked for on disk, then stops the thread and frees the syncer. */
void ktune_syncer_stop(ktune_syncer *s);

#endif
