/* SPDX-License-Identifier: BSD-3-Clause */
/* fixed.c -- the fixed-window counter's rules (fixed.h): parsing a stored
 * count the way INCRBY does, and one hit. */
#include "fixed.h"

int fw_parse_count(const char *s, size_t len, int64_t *out) {
    if (len == 0 || len > 20) return FW_ERR_NOT_INTEGER;
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
        if (len == 1) return FW_ERR_NOT_INTEGER;
    }
    if (s[i] == '0' && len > i + 1) return FW_ERR_NOT_INTEGER; /* leading zero */
    if (neg && s[i] == '0') return FW_ERR_NOT_INTEGER;          /* "-0" */
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return FW_ERR_NOT_INTEGER;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return FW_ERR_NOT_INTEGER;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return FW_ERR_NOT_INTEGER;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX) return FW_ERR_NOT_INTEGER;
        *out = (int64_t)v;
    }
    return FW_OK;
}

int fw_hit(int exists, int64_t count, int64_t end_ms, uint64_t cost, uint64_t window_ms, uint64_t now_ms,
           int elastic, int64_t *count_out, int64_t *end_out) {
    exists = fw_live(exists, end_ms, now_ms);
    int64_t have = exists ? count : 0;
    if (cost > (uint64_t)INT64_MAX || have > INT64_MAX - (int64_t)cost) return FW_ERR_OVERFLOW;
    *count_out = have + (int64_t)cost;
    *end_out = (!exists || elastic || end_ms == FW_NO_END) ? (int64_t)(now_ms + window_ms) : end_ms;
    return FW_OK;
}
