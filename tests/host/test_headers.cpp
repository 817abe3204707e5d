#include "test_headers.c"
