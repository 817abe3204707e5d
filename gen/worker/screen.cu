/* The screen: configs verified, then timed with the screen's samples, in one pass that keeps the
 * GPU busy while the host builds the next config's graph. */
#include <algorithm>
#include <math.h>

#include "worker_state.cuh"

/* The screen holds a config's graph (for the final round, kept_add) while its first sample is
 * within hold_margin of the key's fastest, the max_held fastest at most. */
constexpr size_t max_held = 12;
constexpr double hold_margin = 1.15;

/* Verifies, then times, configs with the screen's samples (precise ones when none are given),
 * with no warm-up besides the check's launch. The checks are enqueued first, all of them; then,
 * config after config as soon as its own check has run (the host builds a config's graph while
 * the GPU checks the next ones), its first sample, or all of them where there is no cut, in
 * pieces behind pipelined gates; one wait. With a cut, a config whose first sample takes more
 * than screen_cut times the fastest first sample (the window's, or `best_us`, the shape's fastest
 * so far) stops there; the others' remaining samples follow, behind pipelined gates; one wait. */
cudaError_t ktune_worker_state::screen(std::vector<trial> &ts, double best_us)
{
    precision p = opt.precise;
    if (opt.screen.samples > 0)
        p.samples = opt.screen.samples;
    if (opt.screen.min_sample_us > 0)
        p.min_sample_us = opt.screen.min_sample_us;
    const bool cut = opt.screen_cut > 0 && p.samples > 1;
    const size_t n = ts.size();
    auto first_us = [this](const trial &x) { return span_us(x.t.samples[0]) / x.t.per; };
    /* Configs whose last sample is enqueued: retired, or pending for `kept` (where the final
     * round can use their graphs) until their first sample has run (all: after the wait), then
     * held or retired. */
    const bool keep = p.min_sample_us == opt.precise.min_sample_us;
    std::vector<trial *> pending, held;
    auto done = [&](trial &x) {
        if (keep && x.ok() && x.pinned)
            return; /* kept after the wait, whatever its time */
        if (keep && x.ok() && x.t.exec && !x.t.samples.empty())
            pending.push_back(&x);
        else
            retire(x.t);
    };
    auto settle = [&](bool all) {
        size_t left = 0;
        for (trial *x : pending) {
            if (!all && !event_done(x->t.samples[0].first + 1)) {
                pending[left++] = x;
                continue;
            }
            fastest_us = std::min(fastest_us, first_us(*x));
            held.push_back(x);
        }
        pending.resize(left);
        std::sort(held.begin(), held.end(),
                  [&](trial *a, trial *b) { return first_us(*a) < first_us(*b); });
        while (!held.empty() && (held.size() > max_held ||
                                 first_us(*held.back()) > hold_margin * fastest_us)) {
            retire(held.back()->t);
            held.pop_back();
        }
    };
    /* Configs whose samples have all run are timed while the GPU runs later ones' (the spans of
     * a window read after its wait held the GPU 0.33 ms a window of an exhaustive softmax sweep
     * on an H100): ts[0..timed_upto) are timed or have nothing to time yet. */
    size_t timed_upto = 0;
    auto time_ready = [&](size_t upto) {
        for (; timed_upto < upto; timed_upto++) {
            trial &y = ts[timed_upto];
            if (!y.ok() || y.t.samples.size() < (size_t)p.samples)
                continue;
            if (!event_done(y.t.samples.back().first + 1))
                break;
            y.m = sample_times(y.t);
            y.timed = true;
        }
    };
    span checks;
    cudaError_t e = check_enqueue(ts, checks);
    if (e != cudaSuccess)
        return e;
    const double bytes = fam.bytes(current_key);
    gate_pipe gates(*this);
    e = gates.start();
    for (size_t i = 0; i < n && e == cudaSuccess; i++) {
        trial &x = ts[i];
        if (!x.ok())
            continue;
        e = check_result(x, i);
        if (e != cudaSuccess || !x.ok())
            continue;
        run config;
        config.instance = x.instance;
        e = enqueue_setup(config, x.t, p, bytes, 0);
        if (e == cudaSuccess)
            count_probe_as_sample(x.t);
        const int first = (int)x.t.samples.size(), last = cut ? 1 : p.samples;
        for (int r = first; r < last && e == cudaSuccess; r++)
            e = enqueue_sample(config, x.t);
        fail_alone(x, "timing", &e);
        if (!cut)
            done(x);
        settle(false);
        if (e == cudaSuccess)
            e = gates.pass((last - first) * sample_estimate_us(x.t));
        reap_graphs();
        if (!cut)
            time_ready(i);
    }
    gates.finish();
    if (e == cudaSuccess)
        e = wait_all();
    if (e == cudaSuccess)
        count_checks(checks);
    if (e == cudaSuccess && cut) {
        for (const trial &x : ts)
            if (x.ok())
                best_us = std::min(best_us, first_us(x));
        e = gates.start();
        timed_upto = 0;
        for (size_t i = 0; i < n && e == cudaSuccess; i++) {
            trial &x = ts[i];
            if (!x.ok() || first_us(x) > opt.screen_cut * best_us) {
                retire(x.t);
                continue;
            }
            run config;
            config.instance = x.instance;
            for (int r = 1; r < p.samples && e == cudaSuccess; r++)
                e = enqueue_sample(config, x.t);
            fail_alone(x, "timing", &e);
            done(x);
            settle(false);
            if (e == cudaSuccess)
                e = gates.pass((p.samples - 1) * sample_estimate_us(x.t));
            time_ready(i);
        }
        gates.finish();
        reap_graphs();
        if (e == cudaSuccess)
            e = wait_all();
    }
    if (e == cudaSuccess)
        settle(true);
    for (trial &x : ts) {
        if (!x.ok()) {
            retire(x.t);
            continue;
        }
        const bool hold = e == cudaSuccess && x.t.exec &&
                          (x.pinned || std::count(held.begin(), held.end(), &x) > 0);
        if (!x.timed)
            x.m = sample_times(x.t);
        const cudaGraphExec_t exec = hold ? x.t.exec : nullptr;
        if (hold)
            x.t.exec = nullptr;
        else
            retire(x.t);
        if (exec)
            kept_add({x.instance, x.t.per, x.t.flush, x.pinned, exec, x.m.median_us,
                      x.t.each_us});
    }
    return e;
}
