/* SPDX-License-Identifier: BSD-3-Clause */
/* histogram.c -- the log-scale duration histogram; see histogram.h. */
#include "histogram.h"

#include <string.h>

/* floor(2^k * sqrt(2)) = isqrt(2^(2k+1)) for k = 0..30: the largest whole value
 * of bucket 2k+1 ([2^k, 2^k * sqrt(2))). tests/unit/test_histogram.c checks it. */
static const uint64_t half_step[31] = {
    1,        2,        5,         11,        22,        45,        90,        181,
    362,      724,      1448,      2896,      5792,      11585,     23170,     46340,
    92681,    185363,   370727,    741455,    1482910,   2965820,   5931641,   11863283,
    23726566, 47453132, 94906265,  189812531, 379625062, 759250124, 1518500249,
};

/* floor(log2 v), v > 0. */
static unsigned log2_floor(uint64_t v) {
    unsigned l = 0;
    while (v >>= 1) l++;
    return l;
}

unsigned hist_bucket(uint64_t v) {
    if (v == 0) return 0;
    unsigned l = log2_floor(v);
    if (l > 30) return HIST_BUCKETS - 1;
    return v <= half_step[l] ? 2 * l + 1 : 2 * l + 2;
}

uint64_t hist_bucket_min(unsigned i) {
    if (i == 0) return 0;
    if (i >= HIST_BUCKETS - 1) return 1ULL << 31;
    unsigned k = (i - 1) / 2;
    return i % 2 ? 1ULL << k : half_step[k] + 1;
}

uint64_t hist_bucket_max(unsigned i) {
    if (i == 0) return 0;
    if (i >= HIST_BUCKETS - 1) return UINT64_MAX;
    unsigned k = (i - 1) / 2;
    return i % 2 ? half_step[k] : (2ULL << k) - 1;
}

void hist_record(histogram *h, uint64_t v) {
    h->counts[hist_bucket(v)]++;
    h->total++;
    if (v > h->max) h->max = v;
}

uint64_t hist_percentile(const histogram *h, unsigned per_mille) {
    if (h->total == 0) return 0;
    if (per_mille == 0) per_mille = 1;
    if (per_mille > 1000) per_mille = 1000;
    /* ceil(per_mille * total / 1000) without overflow for any total */
    uint64_t rank = h->total / 1000 * per_mille + ((h->total % 1000) * per_mille + 999) / 1000;
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t top = hist_bucket_max(i);
            return top < h->max ? top : h->max;
        }
    }
    return h->max;
}

void hist_reset(histogram *h) {
    memset(h, 0, sizeof(*h));
}
