/* ktune_rpa: check the problem, look the configuration up, launch it. */
#include "adapt.h"
#include "device.h"
#include "rpa_instance.cuh"
#include "rpa_space.h"
#include "select.h"

static_assert(KTUNE_RPA_NKEY == 7,
              "rpa keys are (dtype, q_len, page_size, head_dim, q_heads, kv_heads, max_len)");

static const ktune_family family = ktune__rpa_family();

extern "C" const ktune_family *ktune__family_rpa(void) { return &family; }

/* The configuration of a part of a batch (ktune_rpa_impl::parts_of's). */
static ktune_status choose(const ktune_rpa_problem *p, int *instance, ktune_choice *choice,
                           cudaStream_t stream = 0, ktune_adapt_token *token = nullptr)
{
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    const int64_t q_len = p->total_q == 0 ? 1 : (p->total_q + p->seqs - 1) / p->seqs;
    const int64_t key[KTUNE_MAX_KEY] = {p->dtype,    q_len,       p->page_size,
                                        p->head_dim, p->q_heads,  p->kv_heads,
                                        p->max_pages * p->page_size};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_rpa(const ktune_rpa_problem *problem, cudaStream_t stream)
{
    if (!problem || !ktune_rpa_impl::problem_ok(*problem))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    ktune_rpa_problem part[2];
    const int parts = ktune_rpa_impl::parts_of(*problem, part);
    for (int i = 0; i < parts; i++) {
        int instance;
        ktune_adapt_token token;
        const ktune_status st = choose(&part[i], &instance, NULL, stream, &token);
        if (st != KTUNE_OK)
            return st;
        ktune__rpa_launch_t *launch = (ktune__rpa_launch_t *)family.instances[instance].launch;
        const cudaError_t e = launch(&part[i], stream);
        ktune__adapt_end(&token, stream);
        if (e != cudaSuccess)
            return KTUNE_ERROR_CUDA;
    }
    return KTUNE_OK;
}

extern "C" ktune_status ktune_rpa_explain(const ktune_rpa_problem *problem, ktune_choice *choice)
{
    if (!choice || !problem || !ktune_rpa_impl::problem_ok(*problem))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    ktune_rpa_problem part[2];
    const int parts = ktune_rpa_impl::parts_of(*problem, part);
    int instance;
    return choose(&part[parts - 1], &instance, choice);
}

extern "C" size_t ktune_rpa_workspace_bytes(int64_t total_q, int64_t q_heads, int64_t head_dim,
                                            int splits)
{
    return ktune_rpa_impl::workspace_bytes(total_q, q_heads, head_dim, splits);
}
