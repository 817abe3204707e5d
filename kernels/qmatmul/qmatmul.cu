/* ktune_qmatmul: check the arguments, look the configuration up, launch it. */
#include "device.h"
#include "qmatmul_instance.cuh"
#include "qmatmul_space.h"
#include "adapt.h"
#include "select.h"

static_assert(KTUNE_QMATMUL_NKEY == 4, "qmatmul keys are (dtype, m, n, k)");

static const ktune_family family = ktune__qmatmul_family();

extern "C" const ktune_family *ktune__family_qmatmul(void) { return &family; }

static ktune_status choose(int64_t m, int64_t n, int64_t k, ktune_dtype qdtype, int *instance,
                           ktune_choice *choice, cudaStream_t stream = 0,
                           ktune_adapt_token *token = nullptr)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX ||
        k % 16 != 0 || (qdtype != KTUNE_INT8 && qdtype != KTUNE_FP8_E4M3))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    if (qdtype == KTUNE_FP8_E4M3 && device->cc < 89)
        return KTUNE_ERROR_INVALID_ARGUMENT; /* no fp8 tensor cores before 8.9 */
    const int64_t key[KTUNE_MAX_KEY] = {qdtype, m, n, k};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_qmatmul(const void *a, const void *w, void *c, int64_t m, int64_t n,
                                      int64_t k, ktune_dtype qdtype,
                                      const ktune_qmatmul_epilogue *epilogue, cudaStream_t stream)
{
    if (!a || !w || !c || !epilogue || !epilogue->a_scale || !epilogue->w_scale ||
        (epilogue->out_dtype != KTUNE_BF16 && epilogue->out_dtype != KTUNE_F16) ||
        (uintptr_t)a % 16 != 0 || (uintptr_t)w % 16 != 0 || (uintptr_t)c % 2 != 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    ktune_status st = choose(m, n, k, qdtype, &instance, NULL, stream, &token);
    if (st != KTUNE_OK)
        return st;
    ktune__qmatmul_launch_t *launch = (ktune__qmatmul_launch_t *)family.instances[instance].launch;
    const cudaError_t e = launch(a, w, c, m, n, k, qdtype, epilogue, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_qmatmul_explain(int64_t m, int64_t n, int64_t k, ktune_dtype qdtype,
                                              ktune_choice *choice)
{
    if (!choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(m, n, k, qdtype, &instance, choice);
}
