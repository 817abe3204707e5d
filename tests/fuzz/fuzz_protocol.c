/* libFuzzer target: arbitrary bytes as lines of the parent-worker protocol, read as a request
 * (keys of 0 to 3 values), as the answer to every kind of request and as a hello. What parses
 * must format to a line that parses back to the same line. */
#include "fuzz_common.h"

#include "protocol.h"

static void request_round_trip(const char *text, int nkey)
{
    static char line[KTUNE_PROTOCOL_LINE], again[KTUNE_PROTOCOL_LINE], copy[KTUNE_PROTOCOL_LINE],
        third[KTUNE_PROTOCOL_LINE];
    char why[256];
    ktune_request r, r2;
    snprintf(line, sizeof line, "%s", text);
    if (ktune_request_parse(line, nkey, &r, why, sizeof why) != 0) {
        if (!why[0])
            abort(); /* a rejection says why */
        return;
    }
    if (r.nconfigs < 0 || r.nconfigs > KTUNE_PROTOCOL_MAX_CONFIGS)
        abort();
    if (ktune_request_format(&r, again, sizeof again) < 0)
        return; /* a time written longer than it came: may not fit */
    snprintf(copy, sizeof copy, "%s", again);
    if (ktune_request_parse(copy, nkey, &r2, why, sizeof why) != 0 || r2.kind != r.kind ||
        r2.nconfigs != r.nconfigs)
        abort();
    if (ktune_request_format(&r2, third, sizeof third) < 0 || strcmp(third, again) != 0)
        abort();
}

static void answer_round_trip(const char *text, ktune_request_kind kind, int n)
{
    static ktune_answer a, a2;
    static char again[KTUNE_PROTOCOL_LINE], third[KTUNE_PROTOCOL_LINE];
    if (ktune_answer_parse(text, kind, n, &a) != 0) {
        if (a.status != KTUNE_TRIAL_FAILED || strncmp(a.detail, "unexpected answer", 17) != 0)
            abort();
        return;
    }
    if (a.n < 0 || a.n > KTUNE_PROTOCOL_MAX_CONFIGS)
        abort();
    if (ktune_answer_format(kind, &a, again, sizeof again) < 0)
        return;
    if (ktune_answer_parse(again, kind, n, &a2) != 0 || a2.status != a.status || a2.n != a.n)
        abort();
    if (ktune_answer_format(kind, &a2, third, sizeof third) < 0 || strcmp(third, again) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strlen(line) >= KTUNE_PROTOCOL_LINE - 1)
            continue;
        for (int nkey = 0; nkey <= 3; nkey++)
            request_round_trip(line, nkey);
        for (int k = KTUNE_REQUEST_NONE; k < KTUNE_REQUEST_COUNT; k++)
            for (int n = 0; n <= 3; n++)
                answer_round_trip(line, (ktune_request_kind)k, n);
        ktune_hello h, h2;
        char why[512];
        static char again[KTUNE_PROTOCOL_LINE], third[KTUNE_PROTOCOL_LINE];
        if (ktune_hello_parse(line, &h, why, sizeof why) == 0 &&
            ktune_hello_format(&h, again, sizeof again) > 0) {
            if (ktune_hello_parse(again, &h2, why, sizeof why) != 0 ||
                ktune_hello_format(&h2, third, sizeof third) < 0 || strcmp(third, again) != 0)
                abort();
        }
    }
    free(text);
    return 0;
}
