/* ktune_softmax: look the configuration up, launch it. */
#include "device.h"
#include "adapt.h"
#include "select.h"
#include "softmax_instance.cuh"
#include "softmax_space.h"

static_assert(KTUNE_SOFTMAX_NKEY == 3, "softmax keys are (dtype, rows, cols)");

static const ktune_family family = ktune__softmax_family();

extern "C" const ktune_family *ktune__family_softmax(void) { return &family; }

static ktune_status choose(int64_t rows, int64_t cols, ktune_dtype dtype, int *instance,
                           ktune_choice *choice, cudaStream_t stream = 0,
                           ktune_adapt_token *token = nullptr)
{
    if (rows < 1 || cols < 1 || cols > INT32_MAX || (dtype != KTUNE_F32 && dtype != KTUNE_F16 &&
                                                     dtype != KTUNE_BF16))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    const int64_t key[KTUNE_MAX_KEY] = {dtype, rows, cols};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_softmax(const void *x, void *y, int64_t rows, int64_t cols,
                                      ktune_dtype dtype, cudaStream_t stream)
{
    if (!x || !y)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    ktune_status st = choose(rows, cols, dtype, &instance, NULL, stream, &token);
    if (st != KTUNE_OK)
        return st;
    ktune__softmax_launch_t *launch = (ktune__softmax_launch_t *)family.instances[instance].launch;
    const cudaError_t e = launch(x, y, rows, cols, dtype, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_softmax_explain(int64_t rows, int64_t cols, ktune_dtype dtype,
                                              ktune_choice *choice)
{
    if (!choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(rows, cols, dtype, &instance, choice);
}
