"""How the .ci scripts time a PyTorch call on the GPU (rpa-sdpa, qkattn-sdpa): 3 warm-up calls,
then the median of 7 samples of about 20 ms each (at most 200 calls a sample), by CUDA events."""


def time_us(torch, fn):
    """The median time of one call of fn, in microseconds (torch: the imported module)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end) * 1000, 1.0)
    reps = max(1, min(200, int(20000 / once)))  # samples of about 20 ms
    times = []
    for _ in range(7):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / reps)
    return sorted(times)[len(times) // 2]
