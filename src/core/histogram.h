/* SPDX-License-Identifier: BSD-3-Clause */
/* histogram.h -- a fixed log-scale histogram of durations in milliseconds, for
 * latency percentiles in INFO (lock wait and hold times).
 *
 * Constant memory: HIST_BUCKETS counters, a count and the exact maximum (528
 * bytes). Buckets grow by a factor of sqrt(2):
 *   bucket 0:        0 ms
 *   bucket i, 1..62: [2^((i-1)/2), 2^(i/2)) ms   (1, 1.41, 2, 2.83, 4, 5.66, 8, ...)
 *   bucket 63:       2^31 ms (about 24.9 days) and above
 * so a percentile read from it is at most sqrt(2) times the true value (never
 * below it): hist_percentile answers the largest whole number of ms its bucket
 * can hold, capped at the largest value recorded.
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_histogram.c. */
#ifndef MC_HISTOGRAM_H
#define MC_HISTOGRAM_H

#include <stdint.h>

#define HIST_BUCKETS 64

typedef struct histogram {
    uint64_t counts[HIST_BUCKETS];
    uint64_t total; /* values recorded */
    uint64_t max;   /* the largest value recorded (0 when none) */
} histogram;

/* The bucket that holds v (0..HIST_BUCKETS-1). */
unsigned hist_bucket(uint64_t v);

/* The smallest and the largest whole value bucket i holds (the last bucket's
 * largest is UINT64_MAX). A bucket that holds no whole value (bucket 2,
 * [1.41, 2)) has min > max. */
uint64_t hist_bucket_min(unsigned i);
uint64_t hist_bucket_max(unsigned i);

/* Count one value. */
void hist_record(histogram *h, uint64_t v);

/* The per_mille-th percentile (500: median, 990: p99; 1..1000): the largest
 * value of the bucket where the ceil(per_mille * total / 1000)-th smallest
 * value lies, capped at h->max. 0 when nothing was recorded. */
uint64_t hist_percentile(const histogram *h, unsigned per_mille);

void hist_reset(histogram *h);

#endif
