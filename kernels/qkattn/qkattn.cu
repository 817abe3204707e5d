/* ktune_qkattn: check the problem, look the configuration up, launch it. */
#include "adapt.h"
#include "device.h"
#include "qkattn_instance.cuh"
#include "qkattn_space.h"
#include "select.h"

static_assert(KTUNE_QKATTN_NKEY == 6,
              "qkattn keys are (dtype, batch, heads, seq_len, head_dim, mask)");

static const ktune_family family = ktune__qkattn_family();

extern "C" const ktune_family *ktune__family_qkattn(void) { return &family; }

static ktune_status choose(const ktune_qkattn_problem *p, int *instance, ktune_choice *choice,
                           cudaStream_t stream = 0, ktune_adapt_token *token = nullptr)
{
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    const int64_t key[KTUNE_MAX_KEY] = {p->dtype,   p->batch,    p->heads,
                                        p->seq_len, p->head_dim, p->causal + 1};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_qkattn(const ktune_qkattn_problem *problem, cudaStream_t stream)
{
    if (!problem || !ktune_qkattn_impl::problem_ok(*problem))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    const ktune_status st = choose(problem, &instance, NULL, stream, &token);
    if (st != KTUNE_OK)
        return st;
    ktune__qkattn_launch_t *launch = (ktune__qkattn_launch_t *)family.instances[instance].launch;
    const cudaError_t e = launch(problem, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_qkattn_explain(const ktune_qkattn_problem *problem,
                                             ktune_choice *choice)
{
    if (!choice || !problem || !ktune_qkattn_impl::shape_ok(*problem))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(problem, &instance, choice);
}

extern "C" size_t ktune_qkattn_workspace_bytes(int64_t batch, int64_t heads, int64_t seq_len,
                                               int64_t head_dim)
{
    return ktune_qkattn_impl::workspace_bytes(batch, heads, seq_len, head_dim);
}
