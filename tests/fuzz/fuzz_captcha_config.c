/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_captcha_config.c -- captcha_parse_config (ADD_CAPTCHA's JSON) on
 * arbitrary bytes; on success check the config's invariants and exercise
 * captcha_difficulty, captcha_dup, captcha_mem_usage and captcha_free. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/captcha.h"

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* The rule, by linear scan: the highest level whose threshold is < count, else the lowest. */
static uint32_t ref_difficulty(const captcha *c, uint64_t count) {
    uint32_t df = c->levels[0].difficulty_factor;
    for (uint32_t i = 0; i < c->nlevels; i++)
        if ((uint64_t)c->levels[i].visitor_threshold < count) df = c->levels[i].difficulty_factor;
    return df;
}

static void check_captcha(const captcha *c) {
    CHECK(c->duration_s >= 1);
    CHECK(c->nlevels >= 1 && c->nlevels <= CAPTCHA_MAX_LEVELS);
    CHECK(c->levels != NULL);
    for (uint32_t i = 0; i < c->nlevels; i++) {
        CHECK(c->levels[i].difficulty_factor > 0);
        if (i) {
            CHECK(c->levels[i].visitor_threshold > c->levels[i - 1].visitor_threshold);
            CHECK(c->levels[i].difficulty_factor >= c->levels[i - 1].difficulty_factor);
        }
    }
    CHECK(c->visits.window_ms == (uint64_t)c->duration_s * 1000);
    CHECK(c->visits.ring == NULL && c->visits.total == 0);
    CHECK(lb_count(&c->visits, 0) == 0);
    /* README: 4 KiB plus 8 bytes per level, under any traffic. */
    CHECK(captcha_mem_usage(c) <= 4096 + c->nlevels * sizeof(captcha_level));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    captcha *c = NULL;
    int json_error = -1;
    char errbuf[160]; /* the documented minimum */
    memset(errbuf, 0x5a, sizeof(errbuf));
    const char *err = captcha_parse_config((const char *)data, size, &c, &json_error, errbuf, sizeof(errbuf));
    CHECK(json_error == 0 || json_error == 1);
    if (err) {
        CHECK(c == NULL);
        CHECK(strlen(err) < 512); /* NUL-terminated, fits reply_err's buffer */
        if (json_error) CHECK(err == errbuf);
        return 0;
    }
    CHECK(c != NULL && json_error == 0);
    check_captcha(c);

    uint64_t counts[] = {0, 1, 2, 49, 50, 51, 499, 500, 501, UINT32_MAX - 1ULL, UINT32_MAX,
                         (uint64_t)UINT32_MAX + 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        CHECK(captcha_difficulty(c, counts[i]) == ref_difficulty(c, counts[i]));
    for (uint32_t i = 0; i < c->nlevels; i++) {
        uint64_t th = c->levels[i].visitor_threshold;
        CHECK(captcha_difficulty(c, th) == ref_difficulty(c, th));
        CHECK(captcha_difficulty(c, th + 1) == c->levels[i].difficulty_factor);
    }

    /* Give it some visits, then duplicate: the copy must be deep and equal. */
    uint64_t now = 1700000000000ULL, count = 0;
    CHECK(lb_add(&c->visits, now, 3, &count) == LB_OK && count == 3);
    CHECK(lb_add(&c->visits, now + c->visits.slot_ms * 5, 2, &count) == LB_OK && count == 5);
    CHECK(captcha_mem_usage(c) <= 4096 + c->nlevels * sizeof(captcha_level));
    captcha *d = captcha_dup(c);
    CHECK(d != NULL);
    CHECK(d->levels != c->levels && d->visits.ring != c->visits.ring);
    CHECK(d->duration_s == c->duration_s && d->nlevels == c->nlevels);
    CHECK(memcmp(d->levels, c->levels, c->nlevels * sizeof(*c->levels)) == 0);
    CHECK(captcha_mem_usage(d) == captcha_mem_usage(c));
    uint64_t end = lb_empty_at(&c->visits, now);
    CHECK(end > now);
    CHECK(lb_count(&d->visits, end - 1) == lb_count(&c->visits, end - 1));
    CHECK(lb_count(&d->visits, end) == 0 && lb_count(&c->visits, end) == 0);
    captcha_free(c);
    CHECK(lb_count(&d->visits, now) == 5); /* still readable after the original is gone */
    captcha_free(d);
    return 0;
}
