/* ktune_matmul: look the configuration up, launch it. */
#include "device.h"
#include "matmul_instance.cuh"
#include "matmul_space.h"
#include "adapt.h"
#include "select.h"

static_assert(KTUNE_MATMUL_NKEY == 4, "matmul keys are (dtype, m, n, k)");

static const ktune_family family = ktune__matmul_family();

extern "C" const ktune_family *ktune__family_matmul(void) { return &family; }

static ktune_status choose(int64_t m, int64_t n, int64_t k, ktune_dtype dtype, int *instance,
                           ktune_choice *choice, cudaStream_t stream = 0,
                           ktune_adapt_token *token = nullptr)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX ||
        (dtype != KTUNE_F16 && dtype != KTUNE_BF16))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    const int64_t key[KTUNE_MAX_KEY] = {dtype, m, n, k};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_matmul(const void *a, const void *w, void *c, int64_t m, int64_t n,
                                     int64_t k, ktune_dtype dtype, cudaStream_t stream)
{
    if (!a || !w || !c)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    ktune_status st = choose(m, n, k, dtype, &instance, NULL, stream, &token);
    if (st != KTUNE_OK)
        return st;
    ktune__matmul_launch_t *launch = (ktune__matmul_launch_t *)family.instances[instance].launch;
    const cudaError_t e = launch(a, w, c, m, n, k, dtype, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_matmul_explain(int64_t m, int64_t n, int64_t k, ktune_dtype dtype,
                                             ktune_choice *choice)
{
    if (!choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(m, n, k, dtype, &instance, choice);
}
