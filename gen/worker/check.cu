/* Checks: each candidate's output poisoned, the candidate run once on input set 0 (its probe,
 * timed) and compared with the reference on the GPU, the counters copied to the host in groups. */
#include <algorithm>
#include <stdio.h>
#include <string.h>

#include "worker_state.cuh"

/* A launch error the context survives fails the config alone (*e cleared); others stay in *e.
 * cudaErrorNotSupported is a launcher's refusal of the problem by design (a tile that is not
 * compiled for this type, an instruction this device lacks): the config is invalid there, as
 * one its constraints exclude. */
void ktune_worker_state::fail_alone(trial &x, const char *what, cudaError_t *e)
{
    if (*e == cudaSuccess || !recoverable(*e))
        return;
    cudaGetLastError();
    x.status = *e == cudaErrorNotSupported ? KTUNE_TRIAL_INVALID : KTUNE_TRIAL_FAILED;
    snprintf(x.detail, sizeof x.detail, "%s: %s", what, cudaGetErrorString(*e));
    *e = cudaSuccess;
}

/* Enqueues the checks of configs (those of ts with an instance), in pieces behind pipelined
 * gates, waiting for none: each poisons the output, runs the config on set 0 (timed: the config's
 * probe) and compares. The counters go to the host in groups of consecutive configs, one copy a
 * group, the first of one config, each twice as long as the last up to max_check_group (in a
 * trace of an exhaustive softmax sweep on an H100, a copy a check and the GPU's idle time around
 * it took 12.8 us a check). `all` spans them. A config whose launch fails where the
 * context survives is failed alone; an error that loses the context is returned. check_result
 * then reads a config's outcome as soon as its group's copy has run. */
constexpr size_t max_check_group = 16;
/* A check's GPU time for the gates, which is not known before its probe: a piece of
 * gate_piece_us holds 8. */
constexpr double check_gate_us = gate_piece_us / 8;

cudaError_t ktune_worker_state::check_enqueue(std::vector<trial> &ts, span &all)
{
    events_used = 0;
    const size_t n = ts.size();
    gate_pipe gates(*this);
    cudaError_t e = n <= (size_t)max_screen ? cudaSuccess : cudaErrorInvalidValue;
    if (e == cudaSuccess) /* the first piece one check: the host enqueues it in microseconds */
        e = gates.start(check_gate_us);
    if (e == cudaSuccess)
        e = span_mark(all, false);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(check_counters, check_counters_init, sizeof check_counters_init,
                            cudaMemcpyHostToDevice, stream);
    size_t group = 0, group_size = 1; /* the first config whose counters are not copied yet */
    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        trial &x = ts[i];
        if (x.instance >= 0) {
            e = fam.poison(stream);
            if (e == cudaSuccess)
                e = span_mark(x.t.probe, false);
            if (e == cudaSuccess)
                e = fam.launch(x.instance, 0, stream);
            if (e == cudaSuccess)
                e = span_mark(x.t.probe, true);
            if (e == cudaSuccess)
                e = fam.compare(stream, check_counters + 2 * i, &x.rows, &x.cols);
            fail_alone(x, "check", &e);
        }
        if (e == cudaSuccess && (i + 1 - group == group_size || i + 1 == n)) {
            span copied;
            e = cudaMemcpyAsync(check_counters_host + 2 * group, check_counters + 2 * group,
                                2 * (i + 1 - group) * sizeof *check_counters,
                                cudaMemcpyDeviceToHost, stream);
            if (e == cudaSuccess)
                e = span_mark(copied, false);
            for (; group <= i; group++)
                ts[group].checked = copied;
            group_size = std::min(2 * group_size, max_check_group);
        }
        if (e == cudaSuccess && x.instance >= 0)
            e = gates.pass(check_gate_us);
    }
    if (e == cudaSuccess)
        e = span_mark(all, true);
    gates.finish();
    return e;
}

/* Waits for the check of x (ts[i] of check_enqueue) to have run, then marks x wrong if it was. */
cudaError_t ktune_worker_state::check_result(trial &x, size_t i)
{
    cudaError_t e = event_wait(x.checked.first);
    if (e != cudaSuccess)
        return e;
    spent.probe += span_us(x.t.probe) * 1e-6;
    const unsigned long long *bad = check_counters_host + 2 * i;
    if (x.ok() && bad[0] != 0) {
        x.status = KTUNE_TRIAL_WRONG;
        if (fam.wrong_detail)
            fam.wrong_detail(bad, x.rows, x.cols, x.detail, sizeof x.detail);
        else
            snprintf(x.detail, sizeof x.detail,
                     "%llu of %lld elements out of tolerance; first at row %lld col %lld",
                     bad[0], (long long)(x.rows * x.cols), (long long)(bad[1] / x.cols),
                     (long long)(bad[1] % x.cols));
    }
    return cudaSuccess;
}

/* The checks' device time, after the wait that follows them. */
void ktune_worker_state::count_checks(const span &all) { spent.check += span_us(all) * 1e-6; }

/* Verifies configs and waits for the outcome. */
cudaError_t ktune_worker_state::check_all(std::vector<trial> &ts)
{
    span all;
    cudaError_t e = check_enqueue(ts, all);
    if (e == cudaSuccess)
        e = wait_all();
    for (size_t i = 0; i < ts.size() && e == cudaSuccess; i++)
        if (ts[i].ok())
            e = check_result(ts[i], i);
    if (e == cudaSuccess)
        count_checks(all);
    return e;
}
