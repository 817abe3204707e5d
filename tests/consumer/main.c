/* Links the installed libktune.a; asks which config a softmax would use. Without a GPU the
 * answer is a CUDA error, which it checks it can name. */
#include <ktune/ktune.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    ktune_choice c;
    ktune_status st = ktune_softmax_explain(4096, 1024, KTUNE_F16, &c);
    int devices = 0;
    int have_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    printf("explain: %s%s%s\n", ktune_status_string(st), st == KTUNE_OK ? ": " : "",
           st == KTUNE_OK ? c.why : "");
    if (have_gpu)
        return st == KTUNE_OK && c.config != NULL ? 0 : 1;
    return st == KTUNE_ERROR_CUDA && strcmp(ktune_status_string(st), "CUDA error") == 0 ? 0 : 1;
}
