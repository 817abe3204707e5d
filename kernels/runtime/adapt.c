/* Online adaptation: timing a key's candidates on the caller's stream with events read on later
 * calls (never a wait in the caller's path), then settling on the fastest median. */
#define _POSIX_C_SOURCE 200809L
#include "adapt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ktune/ktune.h"
#include "select.h"

#define KTUNE_ADAPT_KEYS 256   /* keys adapted in one process */
#define KTUNE_ADAPT_AFTER 8    /* launches of a key before it is timed */
#define KTUNE_ADAPT_SAMPLES 5  /* samples a candidate before the key settles */
#define KTUNE_ADAPT_PENDING 8  /* event pairs in flight a key */
#define KTUNE_ADAPT_CANDIDATES (1 + KTUNE_ADAPT_RUNNER_UPS)

typedef struct {
    const ktune_family *family;
    const ktune_device *device;
    int64_t key[KTUNE_MAX_KEY];
    int ncand, cand[KTUNE_ADAPT_CANDIDATES]; /* instances; cand[0] the table's answer */
    float samples[KTUNE_ADAPT_CANDIDATES][KTUNE_ADAPT_SAMPLES]; /* ms */
    int nsamples[KTUNE_ADAPT_CANDIDATES];
    long calls;
    int settled; /* the chosen candidate, or -1 while timing */
    float settled_ms, first_ms;
    int events; /* the event pairs exist */
    cudaEvent_t start[KTUNE_ADAPT_PENDING], stop[KTUNE_ADAPT_PENDING];
    int pending[KTUNE_ADAPT_PENDING]; /* the candidate a pair times, -1: free */
} adapt_key;

static pthread_mutex_t adapt_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int adapt_on = -1; /* -1: KTUNE_ADAPT not read yet */
static adapt_key keys[KTUNE_ADAPT_KEYS];
static int nkeys;

static int enabled(void)
{
    int on = atomic_load_explicit(&adapt_on, memory_order_acquire);
    if (on < 0) {
        const char *env = getenv("KTUNE_ADAPT");
        on = env && strcmp(env, "1") == 0;
        int unread = -1;
        atomic_compare_exchange_strong(&adapt_on, &unread, on);
        on = atomic_load(&adapt_on);
    }
    return on;
}

void ktune_adapt_enable(int on) { atomic_store(&adapt_on, on ? 1 : 0); }

static int key_equal(int nkey, const int64_t *a, const int64_t *b)
{
    for (int d = 0; d < nkey; d++)
        if (a[d] != b[d])
            return 0;
    return 1;
}

/* The key's state, made on its first launch: the answer, then its row's runner-ups that are
 * compiled in, valid for the key and not already a candidate. NULL when the states are full. */
static adapt_key *state_of(const ktune_family *f, const int64_t *key, const ktune_device *dev,
                           int answer)
{
    for (int i = 0; i < nkeys; i++)
        if (keys[i].family == f && keys[i].device == dev && key_equal(f->nkey, keys[i].key, key))
            return &keys[i];
    if (nkeys == KTUNE_ADAPT_KEYS)
        return NULL;
    adapt_key *k = &keys[nkeys++];
    memset(k, 0, sizeof *k);
    k->family = f;
    k->device = dev;
    memcpy(k->key, key, sizeof(int64_t) * (size_t)f->nkey);
    k->cand[k->ncand++] = answer;
    k->settled = -1;
    for (int p = 0; p < KTUNE_ADAPT_PENDING; p++)
        k->pending[p] = -1;
    int table;
    const int row = ktune__select_row(f, key, dev, &table);
    if (row >= 0 && f->table_runner_instances && f->table_runner_instances[table]) {
        /* the row's answer and runner-ups (the answer may be one of them: a voted key) */
        const int *runners = f->table_runner_instances[table] + row * KTUNE_TABLE_RUNNER_UPS;
        for (int j = -1; j < KTUNE_ADAPT_RUNNER_UPS && k->ncand < KTUNE_ADAPT_CANDIDATES; j++) {
            const int i = j < 0 ? f->table_instances[table][row] : runners[j];
            int known = i < 0;
            for (int c = 0; c < k->ncand && !known; c++)
                known = k->cand[c] == i;
            if (!known && ktune__instance_valid(f, i, key, dev))
                k->cand[k->ncand++] = i;
        }
    }
    if (k->ncand == 1)
        k->settled = 0; /* nothing to choose between */
    return k;
}

static float median(float *v, int n)
{
    for (int i = 1; i < n; i++) /* insertion sort: n is KTUNE_ADAPT_SAMPLES */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            const float t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Reads the samples whose stop event has completed; settles once every candidate has enough. */
static void harvest(adapt_key *k)
{
    for (int p = 0; p < KTUNE_ADAPT_PENDING; p++) {
        const int c = k->pending[p];
        if (c < 0)
            continue;
        const cudaError_t q = cudaEventQuery(k->stop[p]);
        if (q == cudaErrorNotReady)
            continue;
        float ms;
        if (q == cudaSuccess && cudaEventElapsedTime(&ms, k->start[p], k->stop[p]) == cudaSuccess &&
            k->nsamples[c] < KTUNE_ADAPT_SAMPLES)
            k->samples[c][k->nsamples[c]++] = ms;
        k->pending[p] = -1;
    }
    for (int c = 0; c < k->ncand; c++)
        if (k->nsamples[c] < KTUNE_ADAPT_SAMPLES)
            return;
    int best = 0;
    float best_ms = 0;
    for (int c = 0; c < k->ncand; c++) {
        const float m = median(k->samples[c], KTUNE_ADAPT_SAMPLES);
        if (c == 0)
            k->first_ms = m;
        if (c == 0 || m < best_ms) {
            best = c;
            best_ms = m;
        }
    }
    k->settled = best;
    k->settled_ms = best_ms;
}

ktune_status ktune__select_launch(const ktune_family *f, const int64_t *key,
                                  const ktune_device *dev, cudaStream_t stream, int *instance,
                                  ktune_adapt_token *token)
{
    token->slot = -1;
    ktune_status st = ktune__select(f, key, dev, instance, NULL);
    if (st != KTUNE_OK || !enabled())
        return st;
    pthread_mutex_lock(&adapt_lock);
    adapt_key *k = state_of(f, key, dev, *instance);
    if (!k || ++k->calls < KTUNE_ADAPT_AFTER)
        goto done;
    if (k->settled < 0)
        harvest(k);
    if (k->settled >= 0) {
        *instance = k->cand[k->settled];
        goto done;
    }
    enum cudaStreamCaptureStatus capturing;
    if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess ||
        capturing != cudaStreamCaptureStatusNone)
        goto done; /* a graph being captured replays later: nothing to time now */
    if (!k->events) {
        int made = 0;
        for (int p = 0; p < KTUNE_ADAPT_PENDING; p++)
            made += (cudaEventCreate(&k->start[p]) == cudaSuccess) +
                    (cudaEventCreate(&k->stop[p]) == cudaSuccess);
        if (made != 2 * KTUNE_ADAPT_PENDING) {
            k->settled = 0; /* no events: keep the table's answer */
            goto done;
        }
        k->events = 1;
    }
    int p = 0;
    while (p < KTUNE_ADAPT_PENDING && k->pending[p] >= 0)
        p++;
    if (p == KTUNE_ADAPT_PENDING)
        goto done;
    /* the candidate with the fewest samples, counting those in flight */
    int c = -1, fewest = 1 << 30;
    for (int i = 0; i < k->ncand; i++) {
        int n = k->nsamples[i];
        for (int q = 0; q < KTUNE_ADAPT_PENDING; q++)
            n += k->pending[q] == i;
        if (n < fewest) {
            fewest = n;
            c = i;
        }
    }
    if (fewest >= KTUNE_ADAPT_SAMPLES || cudaEventRecord(k->start[p], stream) != cudaSuccess)
        goto done;
    k->pending[p] = c;
    *instance = k->cand[c];
    token->slot = (int)(k - keys);
    token->pending = p;
done:
    pthread_mutex_unlock(&adapt_lock);
    return st;
}

void ktune__adapt_end(const ktune_adapt_token *token, cudaStream_t stream)
{
    if (token->slot < 0)
        return;
    pthread_mutex_lock(&adapt_lock);
    adapt_key *k = &keys[token->slot];
    if (cudaEventRecord(k->stop[token->pending], stream) != cudaSuccess)
        k->pending[token->pending] = -1; /* the sample is lost, not wrong */
    pthread_mutex_unlock(&adapt_lock);
}

size_t ktune_adapt_report(char *buf, size_t size)
{
    size_t used = 0;
    int fits = 1; /* lines after one that does not fit are counted, not written */
    char line[512], keytext[160];
    if (size)
        buf[0] = '\0';
    pthread_mutex_lock(&adapt_lock);
    for (int i = 0; i < nkeys; i++) {
        const adapt_key *k = &keys[i];
        if (k->settled < 0 || k->ncand < 2)
            continue;
        ktune__key_format(k->family, k->key, keytext, sizeof keytext);
        const int n = snprintf(
            line, sizeof line, "# %s %s: %s at %.2f us, the table's %s at %.2f us (of %d)\n%s %s\n",
            k->family->name, keytext, k->family->instances[k->cand[k->settled]].name,
            k->settled_ms * 1e3, k->family->instances[k->cand[0]].name, k->first_ms * 1e3, k->ncand,
            k->family->name, keytext);
        if (n > 0 && fits && used + (size_t)n < size)
            memcpy(buf + used, line, (size_t)n + 1);
        else
            fits = 0;
        used += n > 0 ? (size_t)n : 0;
    }
    pthread_mutex_unlock(&adapt_lock);
    return used;
}

void ktune__adapt_reset(void)
{
    pthread_mutex_lock(&adapt_lock);
    for (int i = 0; i < nkeys; i++)
        if (keys[i].events)
            for (int p = 0; p < KTUNE_ADAPT_PENDING; p++) {
                cudaEventDestroy(keys[i].start[p]);
                cudaEventDestroy(keys[i].stop[p]);
            }
    nkeys = 0;
    atomic_store(&adapt_on, -1);
    pthread_mutex_unlock(&adapt_lock);
}
