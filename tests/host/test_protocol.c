/* The parent-worker protocol (gen/worker/protocol.h): every request and answer written and read
 * back, the lines as the workers have always spoken them, and malformed lines refused. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "protocol.h"

static ktune_answer a, b; /* large: not on the stack */

static void test_requests(void)
{
    char line[KTUNE_PROTOCOL_LINE], why[256];
    ktune_request r = {.kind = KTUNE_REQUEST_TRIAL, .id = 7, .nkey = 2, .key = {3, 1024},
                       .nconfigs = 1, .configs = {"softmax_vec_v4"}};
    CHECK(ktune_request_format(&r, line, sizeof line) > 0);
    CHECK(strcmp(line, "T 7 3 1024 softmax_vec_v4\n") == 0);
    ktune_request p;
    CHECK(ktune_request_parse(line, 2, &p, why, sizeof why) == 0);
    CHECK(p.kind == KTUNE_REQUEST_TRIAL && p.id == 7 && p.key[0] == 3 && p.key[1] == 1024 &&
          p.nconfigs == 1 && strcmp(p.configs[0], "softmax_vec_v4") == 0);

    ktune_request s = {.kind = KTUNE_REQUEST_SCREEN, .id = 0, .nkey = 1, .key = {8192},
                       .best_us = 12.5, .nconfigs = 3, .configs = {"a", "b", "c"},
                       .pinned = {0, 1, 0}};
    CHECK(ktune_request_format(&s, line, sizeof line) > 0);
    CHECK(strcmp(line, "X 0 8192 @12.5000 a +b c\n") == 0);
    CHECK(ktune_request_parse(line, 1, &p, why, sizeof why) == 0);
    CHECK(p.kind == KTUNE_REQUEST_SCREEN && p.nconfigs == 3 && p.pinned[1] == 1 &&
          p.pinned[0] == 0 && fabs(p.best_us - 12.5) < 1e-9 && strcmp(p.configs[1], "b") == 0);

    ktune_request q = {.kind = KTUNE_REQUEST_QUIT};
    CHECK(ktune_request_format(&q, line, sizeof line) > 0 && strcmp(line, "Q 0\n") == 0);
    ktune_request st = {.kind = KTUNE_REQUEST_STATS, .id = 4};
    CHECK(ktune_request_format(&st, line, sizeof line) > 0 && strcmp(line, "S 4\n") == 0);

    /* what a request cannot be */
    ktune_request bench_one = {.kind = KTUNE_REQUEST_BENCH, .nkey = 1, .nconfigs = 1,
                               .configs = {"a"}};
    CHECK(ktune_request_format(&bench_one, line, sizeof line) == -1); /* B takes two */
    ktune_request spaced = {.kind = KTUNE_REQUEST_TRIAL, .nkey = 1, .nconfigs = 1,
                            .configs = {"a b"}};
    CHECK(ktune_request_format(&spaced, line, sizeof line) == -1);
    CHECK(ktune_request_format(&r, line, 10) == -1); /* does not fit */
    const char *bad[] = {"",
                         "Z 1 2 a",
                         "TT 1 2 a",
                         "T x 2 a",
                         "T 1 2",           /* no config */
                         "T 1 2x a",        /* key not a number */
                         "T 1 2 a b",       /* two configs */
                         "M 1 2 +a",        /* + only in a screen */
                         "X 1 2 @0 a",      /* @ above 0 */
                         "X 1 2 @0.00001 a", /* below what four decimals carry back */
                         "X 1 2 @nan a",
                         "X 1 2 a @3",      /* @ before the configs */
                         "B 1 2 a",
                         "T 1 99999999999999999999 a"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(line, sizeof line, "%s", bad[i]);
        why[0] = '\0';
        CHECK(ktune_request_parse(line, 1, &p, why, sizeof why) == -1);
        CHECK(why[0] != '\0');
    }
    /* a screen of more configs than a request takes */
    size_t len = (size_t)snprintf(line, sizeof line, "X 0 1");
    for (int i = 0; i <= KTUNE_PROTOCOL_MAX_CONFIGS; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, " c%d", i);
    CHECK(ktune_request_parse(line, 1, &p, why, sizeof why) == -1);
    CHECK(strstr(why, "more configs") != NULL);
}

static void test_answers(void)
{
    char line[KTUNE_PROTOCOL_LINE];
    memset(&a, 0, sizeof a);
    a.id = 3;
    a.status = KTUNE_TRIAL_OK;
    a.n = 1;
    a.entries[0] = (ktune_answer_entry){KTUNE_TRIAL_OK, 12.5, 0.001, 7};
    CHECK(ktune_answer_format(KTUNE_REQUEST_TRIAL, &a, line, sizeof line) > 0);
    CHECK(strcmp(line, "R 3 ok 12.5000 0.00100 7\n") == 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_TRIAL, 1, &b) == 0);
    CHECK(b.id == 3 && b.status == KTUNE_TRIAL_OK && b.n == 1 && b.entries[0].samples == 7 &&
          fabs(b.entries[0].median_us - 12.5) < 1e-9);
    /* a number too large to format back within a token (its digits in %.4f) is malformed */
    CHECK(ktune_answer_parse("R 4 ok 1333333333333333333333333333333333333333333333333330001 0 7",
                             KTUNE_REQUEST_TRIAL, 1, &b) == -1);
    CHECK(ktune_answer_parse("R 4 ok 1e17 0 7", KTUNE_REQUEST_TRIAL, 1, &b) == 0);
    CHECK(ktune_answer_format(KTUNE_REQUEST_TRIAL, &b, line, sizeof line) > 0 &&
          ktune_answer_parse(line, KTUNE_REQUEST_TRIAL, 1, &b) == 0);

    /* a failure reads the same whatever the request; a TRIAL's is its config's */
    ktune_answer_fail(&a, 3, KTUNE_TRIAL_WRONG, "12 of %d elements out of tolerance\nsecond", 64);
    CHECK(ktune_answer_format(KTUNE_REQUEST_TRIAL, &a, line, sizeof line) > 0);
    CHECK(strcmp(line, "R 3 wrong 0 0 0 12 of 64 elements out of tolerance second\n") == 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_TRIAL, 1, &b) == 0);
    CHECK(b.status == KTUNE_TRIAL_WRONG && b.n == 1 && b.entries[0].status == KTUNE_TRIAL_WRONG);
    CHECK(strcmp(b.detail, "12 of 64 elements out of tolerance second") == 0 && !b.context_lost);
    CHECK(ktune_answer_parse("R 1 failed 0 0 0 timing: illegal address " KTUNE_CONTEXT_LOST,
                             KTUNE_REQUEST_SCREEN, 2, &b) == 0);
    CHECK(b.status == KTUNE_TRIAL_FAILED && b.context_lost && b.n == 0);

    memset(&a, 0, sizeof a);
    a.status = KTUNE_TRIAL_OK;
    a.n = 2;
    a.entries[0] = (ktune_answer_entry){KTUNE_TRIAL_OK, 1, 0.001, 7};
    a.entries[1] = (ktune_answer_entry){KTUNE_TRIAL_INVALID, 0, 0, 0};
    CHECK(ktune_answer_format(KTUNE_REQUEST_SCREEN, &a, line, sizeof line) > 0);
    CHECK(strcmp(line, "R 0 ok ok 1.0000 0.00100 7 invalid 0.0000 0.00000 0\n") == 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_SCREEN, 2, &b) == 0);
    CHECK(b.n == 2 && b.entries[1].status == KTUNE_TRIAL_INVALID);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_SCREEN, 3, &b) == -1); /* one short */
    CHECK(b.status == KTUNE_TRIAL_FAILED && strncmp(b.detail, "unexpected answer", 17) == 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_SCREEN, 1, &b) == -1); /* one too many */

    CHECK(ktune_answer_format(KTUNE_REQUEST_INTERLEAVE, &a, line, sizeof line) > 0);
    CHECK(strcmp(line, "R 0 ok 1.0000 0.00100 0.0000 0.00000\n") == 0);

    memset(&a, 0, sizeof a);
    a.id = 4;
    a.status = KTUNE_TRIAL_OK;
    a.bench = (ktune_bench_answer){10,     0.001,        12,    0.001, 9, 0.001, 3000, 1048576,
                                   2147483648.0, 989e12, 2,
                                   {{"cublaslt_int8", 8, 0.001}, {"cublas_bf16", 20, 0.002}}};
    CHECK(ktune_answer_format(KTUNE_REQUEST_BENCH, &a, line, sizeof line) > 0);
    CHECK(strcmp(line, "R 4 ok 10.0000 0.00100 12.0000 0.00100 9.0000 0.00100 3000.00 1048576 "
                       "2147483648 989000000000000 2 cublaslt_int8 8.0000 0.00100 cublas_bf16 "
                       "20.0000 0.00200\n") == 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_BENCH, 2, &b) == 0);
    CHECK(b.bench.bytes == 1048576 && b.bench.vendor_flops_per_s == 989e12 &&
          b.bench.nvendors == 2 && strcmp(b.bench.vendors[0].name, "cublaslt_int8") == 0 &&
          b.bench.vendors[1].us == 20 && b.bench.vendors[1].spread == 0.002);
    /* a path short of its spread, a count beyond the most, a name with a space */
    CHECK(ktune_answer_parse("R 4 ok 1 1 1 1 1 1 1 1 1 1 1 cublas 8.0", KTUNE_REQUEST_BENCH, 2,
                             &b) == -1);
    CHECK(ktune_answer_parse("R 4 ok 1 1 1 1 1 1 1 1 1 1 5 a 1 1 b 1 1 c 1 1 d 1 1 e 1 1",
                             KTUNE_REQUEST_BENCH, 2, &b) == -1);
    CHECK(ktune_answer_parse("R 4 ok 1 1 1 1 1 1 1 1 1 1 0", KTUNE_REQUEST_BENCH, 2, &b) == 0 &&
          b.bench.nvendors == 0);
    strcpy(a.bench.vendors[1].name, "cu blas");
    CHECK(ktune_answer_format(KTUNE_REQUEST_BENCH, &a, line, sizeof line) == -1);

    memset(&a, 0, sizeof a);
    a.status = KTUNE_TRIAL_OK;
    a.stats.timed = 1.5;
    a.stats.wait = 0.25;
    CHECK(ktune_answer_format(KTUNE_REQUEST_STATS, &a, line, sizeof line) > 0);
    CHECK(ktune_answer_parse(line, KTUNE_REQUEST_STATS, 0, &b) == 0);
    CHECK(b.stats.timed == 1.5 && b.stats.wait == 0.25 && b.stats.busy == 0);

    const char *bad[] = {"", "R", "R x ok", "R 1", "R 1 timeout 0 0 0 x", "R 1 fine 1 2 3",
                         "R 1 ok 1.0 0.1", "R 1 ok 1.0 0.1 7 extra", "R 1 ok inf 0.1 7",
                         "Q 1 ok 1 2 3", "R 1 failed 0 0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(ktune_answer_parse(bad[i], KTUNE_REQUEST_TRIAL, 1, &b) == -1);
}

static void test_hello(void)
{
    char line[KTUNE_PROTOCOL_LINE], why[512];
    ktune_hello h = {"NVIDIA H100 80GB HBM3", 132, 90, 1024, 232448, 52428800, 1, "13.0", "13.0", ""};
    CHECK(ktune_hello_format(&h, line, sizeof line) > 0);
    CHECK(strcmp(line, "H 132 90 1024 232448 52428800 1 13.0 13.0 - NVIDIA H100 80GB HBM3\n") == 0);
    ktune_hello g;
    CHECK(ktune_hello_parse(line, &g, why, sizeof why) == 0);
    CHECK(strcmp(g.name, h.name) == 0 && g.sms == 132 && g.l2_bytes == 52428800 && g.sm90a == 1 &&
          g.uuid[0] == '\0');
    snprintf(h.uuid, sizeof h.uuid, "GPU-1f0c2a3b-4d5e-6f70-8192-a3b4c5d6e7f8");
    CHECK(ktune_hello_format(&h, line, sizeof line) > 0);
    CHECK(ktune_hello_parse(line, &g, why, sizeof why) == 0);
    CHECK(strcmp(g.uuid, h.uuid) == 0 && strcmp(g.name, h.name) == 0);
    /* a UUID that is not one is not passed on (it reaches nvidia-smi's command line) */
    const char *not_uuids[] = {"GPU-1f0c2a3b-4d5e-6f70-8192-a3b4c5d6e7f", "GPU-$(reboot)",
                               "GPU-1f0c2a3b-4d5e-6f70-8192-a3b4c5d6e7f8;x", "1f0c2a3b",
                               "XPU-1f0c2a3b-4d5e-6f70-8192-a3b4c5d6e7f8"};
    for (size_t i = 0; i < sizeof not_uuids / sizeof *not_uuids; i++) {
        CHECK(!ktune_gpu_uuid_valid(not_uuids[i]));
        snprintf(line, sizeof line, "H 132 90 1024 232448 52428800 1 13.0 13.0 %s name",
                 not_uuids[i]);
        CHECK(ktune_hello_parse(line, &g, why, sizeof why) == -1);
    }
    CHECK(ktune_gpu_uuid_valid("MIG-1f0c2a3b-4d5e-6f70-8192-a3b4c5d6e7f8"));
    CHECK(ktune_no_device_format("no usable CUDA device 0: none", line, sizeof line) > 0);
    CHECK(ktune_hello_parse(line, &g, why, sizeof why) == 1);
    CHECK(strcmp(why, "no usable CUDA device 0: none") == 0);
    CHECK(ktune_hello_parse("H 132 90 1024 13.0 13.0 short", &g, why, sizeof why) == -1);
    CHECK(ktune_hello_parse("H 132 90 1024 232448 52428800 1 13.0 13.0 -", &g, why, sizeof why) ==
          -1); /* no name */
    CHECK(ktune_hello_parse("H -1 90 1024 232448 52428800 1 13.0 13.0 - x", &g, why, sizeof why) ==
          -1);
    CHECK(strstr(why, "unexpected first line") != NULL);
}

int main(void)
{
    test_requests();
    test_answers();
    test_hello();
    for (int k = 1; k < KTUNE_REQUEST_COUNT; k++)
        CHECK((int)ktune_request_kind_of(ktune_request_letter((ktune_request_kind)k)) == k);
    return check_report("protocol");
}
