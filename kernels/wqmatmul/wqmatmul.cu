/* ktune_wqmatmul: check the arguments, look the configuration up, launch it; the packed weight's
 * functions. */
#include "adapt.h"
#include "device.h"
#include "select.h"
#include "wqmatmul_instance.cuh"
#include "wqmatmul_pack.cuh"
#include "wqmatmul_space.h"

static_assert(KTUNE_WQMATMUL_NKEY == 6, "wqmatmul keys are (dtype, bits, group, m, n, k)");

static const ktune_family family = ktune__wqmatmul_family();

extern "C" const ktune_family *ktune__family_wqmatmul(void) { return &family; }

static bool shape_ok(int64_t m, int64_t n, int64_t k, int bits, int group, ktune_dtype dtype)
{
    return m >= 1 && n >= 1 && k >= 1 && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX &&
           ktune_wqmatmul_impl::weight_takes(k, bits, group) &&
           (dtype == KTUNE_BF16 || dtype == KTUNE_F16);
}

static ktune_status choose(int64_t m, int64_t n, int64_t k, int bits, int group, ktune_dtype dtype,
                           int *instance, ktune_choice *choice, cudaStream_t stream = 0,
                           ktune_adapt_token *token = nullptr)
{
    if (!shape_ok(m, n, k, bits, group, dtype))
        return KTUNE_ERROR_INVALID_ARGUMENT;
    const ktune_device *device;
    ktune_status st = ktune__device_current(&device);
    if (st != KTUNE_OK)
        return st;
    const int64_t key[KTUNE_MAX_KEY] = {dtype, bits, group, m, n, k};
    /* the launch path adapts where KTUNE_ADAPT asks it to (adapt.h) */
    return token ? ktune__select_launch(&family, key, device, stream, instance, token)
                 : ktune__select(&family, key, device, instance, choice);
}

extern "C" ktune_status ktune_wqmatmul(const void *a, const ktune_qweight *w, void *c, int64_t m,
                                       int64_t n, int64_t k, ktune_dtype dtype,
                                       cudaStream_t stream)
{
    if (!a || !w || !c || !w->packed || !w->scales || w->layout != KTUNE_QWEIGHT_K32 ||
        (uintptr_t)a % 16 != 0 || (uintptr_t)w->packed % 16 != 0 || (uintptr_t)c % 2 != 0 ||
        (uintptr_t)w->scales % 2 != 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    ktune_adapt_token token;
    ktune_status st = choose(m, n, k, w->bits, w->group, dtype, &instance, NULL, stream, &token);
    if (st != KTUNE_OK)
        return st;
    ktune__wqmatmul_launch_t *launch = (ktune__wqmatmul_launch_t *)family.instances[instance].launch;
    const cudaError_t e = launch(a, w, c, m, n, k, dtype, stream);
    ktune__adapt_end(&token, stream);
    return e == cudaSuccess ? KTUNE_OK : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_wqmatmul_explain(int64_t m, int64_t n, int64_t k, int bits, int group,
                                               ktune_dtype dtype, ktune_choice *choice)
{
    if (!choice)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    int instance;
    return choose(m, n, k, bits, group, dtype, &instance, choice);
}

extern "C" size_t ktune_qweight_packed_bytes(int64_t n, int64_t k, int bits, int layout)
{
    if (!ktune_wqmatmul_impl::layout_takes(n, k, bits, layout) || n > INT64_MAX / k / 8)
        return 0;
    return (size_t)(n * k / 8 * bits);
}

extern "C" ktune_status ktune_qweight_pack(const uint8_t *q, void *packed, int64_t n, int64_t k,
                                           int bits, int layout, cudaStream_t stream)
{
    if (!q || !packed || (uintptr_t)packed % 16 != 0 ||
        ktune_qweight_packed_bytes(n, k, bits, layout) == 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    return ktune_wqmatmul_impl::pack(q, packed, n, k, bits, stream) == cudaSuccess
               ? KTUNE_OK
               : KTUNE_ERROR_CUDA;
}

extern "C" ktune_status ktune_qweight_dequantize(const ktune_qweight *w, void *out, int64_t n,
                                                 int64_t k, ktune_dtype dtype, cudaStream_t stream)
{
    if (!w || !out || !w->packed || !w->scales || (dtype != KTUNE_BF16 && dtype != KTUNE_F16) ||
        ktune_qweight_packed_bytes(n, k, w->bits, w->layout) == 0 ||
        !ktune_wqmatmul_impl::weight_takes(k, w->bits, w->group) || (uintptr_t)out % 2 != 0 ||
        (uintptr_t)w->scales % 2 != 0 || (uintptr_t)w->packed % 4 != 0)
        return KTUNE_ERROR_INVALID_ARGUMENT;
    return ktune_wqmatmul_impl::dequantize(*w, out, n, k, dtype, stream) == cudaSuccess
               ? KTUNE_OK
               : KTUNE_ERROR_CUDA;
}
