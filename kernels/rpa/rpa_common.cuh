/* What the rpa configurations share on the host: the problem's rules, the split of a batch's keys,
 * and the launch of a config (the attention kernel, then the merge of the splits' shares). */
#pragma once

#include "launch.cuh"
#include "rpa_kernel.cuh"

namespace ktune_rpa_impl {

/* Whether the problem keeps the rules of include/ktune/rpa.h. */
inline bool problem_ok(const ktune_rpa_problem &p)
{
    const bool sizes = p.seqs >= 1 && p.seqs < INT32_MAX && p.total_q >= 0 && p.kv_heads >= 1 &&
                       p.decode_seqs >= 0 && p.decode_seqs <= p.seqs &&
                       p.decode_seqs <= p.total_q &&
                       p.q_heads >= p.kv_heads && p.q_heads % p.kv_heads == 0 &&
                       (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256) &&
                       p.page_size >= 8 && p.page_size <= 1024 && p.page_size % 8 == 0 &&
                       p.num_pages >= 1 && p.max_pages >= 1 && p.q_heads <= 65535 &&
                       p.kv_heads <= 65535 && isfinite(p.scale) &&
                       (p.dtype == KTUNE_BF16 || p.dtype == KTUNE_F16);
    if (!sizes || p.max_pages > INT32_MAX / p.page_size || p.num_pages > INT32_MAX ||
        p.seqs > INT64_MAX / p.max_pages || p.total_q > INT32_MAX / p.q_heads ||
        p.num_pages > INT64_MAX / p.page_size / p.kv_heads / p.head_dim)
        return false;
    return p.q && p.k_cache && p.v_cache && p.page_table && p.cu_q_lens && p.kv_lens && p.out &&
           (uintptr_t)p.q % 16 == 0 && (uintptr_t)p.k_cache % 16 == 0 &&
           (uintptr_t)p.v_cache % 16 == 0 && (uintptr_t)p.out % 16 == 0 &&
           (p.workspace_bytes == 0 || (p.workspace && (uintptr_t)p.workspace % 16 == 0));
}

/* The parts a batch runs as (include/ktune/rpa.h's decode_seqs): itself, or its decode_seqs
 * decoding sequences and the others, each a batch of its own (the second's queries, outputs,
 * lengths and page table rows start at its first sequence's; cu_q_lens keeps counting from the
 * batch's 0, which the kernel subtracts). How many, 1 or 2. */
inline int parts_of(const ktune_rpa_problem &p, ktune_rpa_problem part[2])
{
    part[0] = p;
    part[0].decode_seqs = 0;
    if (p.decode_seqs <= 0 || p.decode_seqs >= p.seqs)
        return 1;
    const int64_t d = p.decode_seqs, row = d * p.q_heads * p.head_dim * 2;
    part[1] = part[0];
    part[0].seqs = d;
    part[0].total_q = d;
    part[1].seqs = p.seqs - d;
    part[1].total_q = p.total_q - d;
    part[1].q = static_cast<const char *>(p.q) + row;
    part[1].out = static_cast<char *>(p.out) + row;
    part[1].cu_q_lens = p.cu_q_lens + d;
    part[1].kv_lens = p.kv_lens + d;
    part[1].page_table = p.page_table + d * p.max_pages;
    return 2;
}

/* include/ktune/rpa.h's ktune_rpa_workspace_bytes. */
inline size_t workspace_bytes(int64_t total_q, int64_t q_heads, int64_t head_dim, int splits)
{
    if (splits <= 1 || total_q < 0 || q_heads < 1 || head_dim < 1 || splits > KTUNE_RPA_MAX_SPLITS)
        return 0;
    const double floats =
        (double)splits * (double)total_q * (double)q_heads * (double)(head_dim + 2);
    if (floats * 4 > (double)SIZE_MAX / 2)
        return 0;
    return (size_t)splits * (size_t)total_q * (size_t)q_heads * (size_t)(head_dim + 2) * 4;
}

/* Tile slots of a launch whose blocks take bm rows: enough for any cu_q_lens of the batch (a
 * sequence's rows round up to a tile at most once). */
inline int64_t tile_slots(const ktune_rpa_problem &p, int bm)
{
    return (p.total_q * (p.q_heads / p.kv_heads) + bm - 1) / bm + p.seqs;
}

/* The most splits a batch's keys may take: max_splits (the config's), KTUNE_RPA_MAX_SPLITS and
 * what the workspace holds. */
inline int64_t splits_cap(const ktune_rpa_problem &p, int max_splits)
{
    const size_t per_split = workspace_bytes(p.total_q, p.q_heads, p.head_dim, 2) / 2;
    const int64_t held =
        per_split == 0 ? KTUNE_RPA_MAX_SPLITS : (int64_t)(p.workspace_bytes / per_split);
    int64_t cap = max_splits < KTUNE_RPA_MAX_SPLITS ? max_splits : KTUNE_RPA_MAX_SPLITS;
    return cap < held ? cap : held;
}

/* The splits of a batch's keys: blocks for four times what the device holds at once (`resident`)
 * if the batch has as few tiles as it may (each sequence one, or its rows in whole tiles), so
 * that the chunks of long sequences even out with those of short ones; at most splits_cap; 1
 * for none. */
inline int splits_for(const ktune_rpa_problem &p, int bm, int max_splits, int64_t resident)
{
    const int64_t rows = p.total_q * (p.q_heads / p.kv_heads), fewest = (rows + bm - 1) / bm;
    const int64_t blocks = (fewest > p.seqs ? fewest : p.seqs) * p.kv_heads;
    const int64_t want = (4 * resident + blocks - 1) / blocks, cap = splits_cap(p, max_splits);
    return want < 2 || cap < 2 ? 1 : (int)(want < cap ? want : cap);
}

/* The blocks of kernel (threads and smem bytes a block) the device holds at once: its
 * multiprocessors times the blocks one holds; 0 where the runtime cannot say. */
template <typename Kernel> int64_t resident_blocks(Kernel *kernel, int threads, size_t smem)
{
    int device = 0, sms = 0, per_sm = 0;
    const cudaDeviceAttr count = cudaDevAttrMultiProcessorCount;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, count, device) != cudaSuccess ||
        ktune_launch::set_attributes(kernel, 1, smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) !=
            cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (int64_t)sms * (per_sm > 0 ? per_sm : 1);
}

/* A launch's arguments for blocks of bm rows walking bn keys a step, split in at most max_splits
 * chunks (splits_for); the grid: the tile slots, the KV heads, the splits. A kernel that walks
 * (`walks`: rpa_kernel.cuh's walk_of) gets, for a batch of one query a sequence with a workspace,
 * the balanced split instead: `resident` blocks in one dimension, each a share of the batch's
 * steps, an item in at most max_splits shares. False where the slots overflow a grid. */
template <int D>
bool args_of(const ktune_rpa_problem &p, int bm, int bn, int max_splits, int64_t resident,
             bool walks, args *a, dim3 *grid)
{
    const int64_t slots = tile_slots(p, bm);
    if (slots > INT32_MAX)
        return false;
    a->q = p.q;
    a->k = p.k_cache;
    a->v = p.v_cache;
    a->table = p.page_table;
    a->cu_q = p.cu_q_lens;
    a->kv_lens = p.kv_lens;
    a->out = p.out;
    a->seqs = (int)p.seqs;
    a->q_heads = (int)p.q_heads;
    a->kv_heads = (int)p.kv_heads;
    a->group = (int)(p.q_heads / p.kv_heads);
    a->page_size = (int)p.page_size;
    a->max_pages = (int)p.max_pages;
    a->num_pages = (int)p.num_pages;
    a->total_q = (int)p.total_q;
    a->splits = splits_for(p, bm, max_splits, resident);
    const int64_t max_len = p.max_pages * p.page_size;
    a->chunk_steps = (int)(((max_len + a->splits - 1) / a->splits + bn - 1) / bn);
    a->balanced = 0;
    a->scale_log2 = p.scale * 1.4426950408889634f;
    *grid = dim3((unsigned)slots, (unsigned)p.kv_heads, (unsigned)a->splits);
    const int64_t cap = splits_cap(p, max_splits);
    if (walks && p.total_q == p.seqs && cap >= 2 && resident > 0 && resident <= INT32_MAX) {
        a->balanced = 1;
        a->splits = (int)cap;
        *grid = dim3((unsigned)resident);
    }
    a->part_o = static_cast<float *>(p.workspace);
    a->part_lse = a->part_o + (int64_t)a->splits * a->total_q * a->q_heads * D;
    return true;
}

/* After an attention launch of a's splits: their merge into the output (none for one split),
 * overlapped with the attention's last blocks. */
template <typename T, int D> cudaError_t merge_splits(const args &a, cudaStream_t s)
{
    if (a.splits == 1)
        return cudaSuccess;
    const int warps = 8, rows_total = a.total_q * a.q_heads;
    return ktune_launch::launch_overlapped(
        merge<T, D>, dim3((unsigned)((rows_total + warps - 1) / warps)), dim3(warps * 32),
        dim3(1, 1, 1), 0, s,
        (const float *)a.part_o, (const float *)a.part_lse, static_cast<T *>(a.out), rows_total,
        a.splits);
}

template <int WM, int WN, int MT, int BN, int STAGES, int SPLITS> struct launcher {
    /* Configurations past the registers or the shared memory a block can have (the space's
     * constraints keep them out) are not compiled for that head_dim. */
    template <int D>
    static constexpr bool fits = MT * (D / 2 + BN / WN / 2) <= 128 + 32 * MT &&
                                 smem_bytes<D, WM, WN, MT, BN, STAGES>() <= 232448;

    template <typename T, int D> static cudaError_t run(const ktune_rpa_problem &p, cudaStream_t s)
    {
        if constexpr (!fits<D>)
            return cudaErrorNotSupported;
        else
            return run_fitting<T, D>(p, s);
    }

    template <typename T, int D>
    static cudaError_t run_fitting(const ktune_rpa_problem &p, cudaStream_t s)
    {
        constexpr int BM = 16 * MT * WM, THREADS = WM * WN * 32;
        constexpr size_t smem = smem_bytes<D, WM, WN, MT, BN, STAGES>();
        auto *const kernel = attend<T, D, WM, WN, MT, BN, STAGES>;
        /* asked once a kernel (of the device it first runs on: a process's GPUs are one model,
         * as a table's are) */
        static const int64_t resident = resident_blocks(kernel, THREADS, smem);
        args a;
        dim3 grid;
        if (!args_of<D>(p, BM, BN, SPLITS, resident, true, &a, &grid))
            return cudaErrorInvalidValue;
        const cudaError_t e = ktune_launch::launch_overlapped(kernel, grid, dim3(THREADS),
                                                              dim3(1, 1, 1), smem, s, a);
        return e == cudaSuccess ? merge_splits<T, D>(a, s) : e;
    }
};

/* Runs Launcher::run<T, D> for the problem's dtype and head_dim; total_q 0 is nothing to do. */
template <typename Launcher> cudaError_t dispatch(const ktune_rpa_problem *p, cudaStream_t s)
{
    if (!p || !problem_ok(*p))
        return cudaErrorInvalidValue;
    if (p->total_q == 0)
        return cudaSuccess;
    const bool bf16 = p->dtype == KTUNE_BF16;
    switch (p->head_dim) {
    case 64:
        return bf16 ? Launcher::template run<__nv_bfloat16, 64>(*p, s)
                    : Launcher::template run<__half, 64>(*p, s);
    case 128:
        return bf16 ? Launcher::template run<__nv_bfloat16, 128>(*p, s)
                    : Launcher::template run<__half, 128>(*p, s);
    default:
        return bf16 ? Launcher::template run<__nv_bfloat16, 256>(*p, s)
                    : Launcher::template run<__half, 256>(*p, s);
    }
}

} // namespace ktune_rpa_impl
