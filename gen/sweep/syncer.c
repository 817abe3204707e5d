/* The background fsync of gen/syncer.h: one thread, the files asked for since its last round. */
#define _POSIX_C_SOURCE 200809L
#include "syncer.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

enum { KTUNE_SYNCER_FILES = 8 };

struct ktune_syncer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int pending[KTUNE_SYNCER_FILES], npending, stopping;
};

static void *syncer_main(void *arg)
{
    ktune_syncer *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->npending == 0 && !s->stopping)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->npending == 0)
            break;
        int fds[KTUNE_SYNCER_FILES], n = s->npending;
        for (int i = 0; i < n; i++)
            fds[i] = s->pending[i];
        s->npending = 0;
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < n; i++)
            fsync(fds[i]);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

ktune_syncer *ktune_syncer_start(void)
{
    ktune_syncer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return NULL;
    }
    if (pthread_cond_init(&s->wake, NULL) != 0)
        goto no_wake;
    /* the thread takes no signals: an interrupt reaches the thread that waits on the worker */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    const int started = pthread_create(&s->thread, NULL, syncer_main, s) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (!started)
        goto no_thread;
    return s;
no_thread:
    pthread_cond_destroy(&s->wake);
no_wake:
    pthread_mutex_destroy(&s->lock);
    free(s);
    return NULL;
}

void ktune_syncer_request(ktune_syncer *s, int fd)
{
    if (!s) {
        fsync(fd);
        return;
    }
    pthread_mutex_lock(&s->lock);
    int known = 0;
    for (int i = 0; i < s->npending; i++)
        known |= s->pending[i] == fd;
    if (!known && s->npending == KTUNE_SYNCER_FILES) { /* never with the sweep's two journals */
        pthread_mutex_unlock(&s->lock);
        fsync(fd);
        return;
    }
    if (!known)
        s->pending[s->npending++] = fd;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void ktune_syncer_stop(ktune_syncer *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1; /* the thread finishes what is pending first */
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
