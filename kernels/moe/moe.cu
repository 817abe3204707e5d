/* ktune_moe: check the arguments, look the configuration up, launch it. */
#include "device.h"
#include "moe_instance.cuh"
#include "moe_space.h"
#include "adapt.h"
#include "select.h"

static_assert(KTUNE_MOE_NKEY == 5, "moe keys are (dtype, rows, n, k, groups)");

static const ktune_family family = ktune__moe_family();

extern "C" const ktune_family *ktune__family_moe(void) { return &family; }

static ktune_status choose(int64_t rows, int64_t n, int64_t k, int64_t groups, ktune_dtype dtype,
                           int *instance, ktune_choice *choice, cudaStream_t stream = 0,
                           ktune_adapt_token *token = nullptr)
{
    if (rows < 0 || n < 1 || k < 1 || rows > INT32_MAX || k > INT32_MAX || k % 8 != 0 ||
        groups < 1 || groups > KTUNE_MOE_MAX_GROUPS || groups * n > INT32_MAX ||
        (dtype != KTUNE_BF16 && dtype != KTUNE_F16))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    /* rows 0 has no work; it is looked up as one row */
    const int64_t key[KTUNE_MAX_KEY] = {dtype, rows > 0 ? rows : 1, n, k, groups};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_moe(const void *a, const void *w, const int32_t *offsets, void *c,
                                  int64_t rows, int64_t n, int64_t k, int64_t groups,
                                  ktune_dtype dtype, cudaStream_t stream)
{
    if (!a || !w || !offsets || !c || (uintptr_t)a % 16 != 0 || (uintptr_t)w % 16 != 0 ||
        (uintptr_t)c % 2 != 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    /* rows 0 launches nothing: nothing to time */
    ktune_status st =
        choose(rows, n, k, groups, dtype, &instance, NULL, stream, rows > 0 ? &token : nullptr);
    if (st != KTUNE_OK || rows == 0)
        return st;
    ktune__moe_launch_t *launch = (ktune__moe_launch_t *)family.instances[instance].launch;
    const ktune_moe_impl::problem pb = {a, w, offsets, c, rows, n, k, groups};
    const cudaError_t e = launch(&pb, dtype, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_moe_explain(int64_t rows, int64_t n, int64_t k, int64_t groups,
                                          ktune_dtype dtype, ktune_choice *choice)
{
    if (!choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(rows, n, k, groups, dtype, &instance, choice);
}
