/* Strings for status codes and selection reasons. */
#include "ktune/ktune.h"

const char *ktune_status_string(ktune_status status)
{
    switch (status) {
#define KTUNE_STATUS_CASE(name, text)                                                              \
    case name:                                                                                     \
        return text;
        KTUNE_STATUS_MAP(KTUNE_STATUS_CASE)
#undef KTUNE_STATUS_CASE
    default:
        return "unknown status";
    }
}

const char *ktune_reason_string(ktune_reason reason)
{
    switch (reason) {
#define KTUNE_REASON_CASE(name, text)                                                              \
    case name:                                                                                     \
        return text;
        KTUNE_REASON_MAP(KTUNE_REASON_CASE)
#undef KTUNE_REASON_CASE
    default:
        return "unknown reason";
    }
}
