/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_challenge_json.c -- challenge_parse (ADD_CHALLENGE's JSON) and
 * challenge_json_release; and the encver-0 legacy parsers captcha_parse_legacy
 * and challenge_parse_legacy on the same bytes. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *json = (const char *)data;

    /* ADD_CHALLENGE */
    challenge ch = {0xdeadbeef, 0xdeadbeef};
    const char *str = NULL;
    size_t slen = 12345;
    void *holder = NULL;
    int json_error = -1;
    char errbuf[160];
    const char *err = challenge_parse(json, size, &ch, &str, &slen, &holder, &json_error, errbuf, sizeof(errbuf));
    CHECK(json_error == 0 || json_error == 1);
    if (err == NULL) {
        CHECK(json_error == 0);
        CHECK(ch.duration_s >= 1);
        CHECK(str != NULL && holder != NULL);
        CHECK(slen <= CHALLENGE_MAX_STRING_BYTES);
        CHECK(memchr(str, '\0', slen) == NULL); /* jansson rejects \u0000 without JSON_ALLOW_NUL */
        CHECK(str[slen] == '\0');
        /* Touch every byte: the string must be readable until released. */
        volatile unsigned sum = 0;
        for (size_t i = 0; i < slen; i++) sum += (unsigned char)str[i];
        (void)sum;
        challenge_json_release(holder);
    } else {
        CHECK(holder == NULL);
        CHECK(strlen(err) < 512);
        CHECK(ch.difficulty_factor == 0xdeadbeef && ch.duration_s == 0xdeadbeef); /* untouched */
    }

    /* encver 0: the original module's captcha */
    captcha *c = NULL;
    uint32_t live = 0xdeadbeef;
    char note[200];
    err = captcha_parse_legacy(json, size, &c, &live, note, sizeof(note));
    if (err == NULL) {
        CHECK(c != NULL);
        CHECK(c->duration_s >= 1 && c->nlevels >= 1 && c->nlevels <= CAPTCHA_MAX_LEVELS);
        for (uint32_t i = 1; i < c->nlevels; i++) {
            CHECK(c->levels[i].visitor_threshold > c->levels[i - 1].visitor_threshold);
            CHECK(c->levels[i].difficulty_factor >= c->levels[i - 1].difficulty_factor);
        }
        CHECK(c->levels[0].difficulty_factor > 0);
        CHECK(c->visits.window_ms == (uint64_t)c->duration_s * 1000);
        /* What captcha_type.c does next: re-add the live count as visits now. */
        uint64_t count = 0;
        if (live > 0) {
            CHECK(lb_add(&c->visits, 1700000000000ULL, live, &count) == LB_OK);
            CHECK(count == live);
            CHECK(lb_count(&c->visits, 1700000000000ULL + (uint64_t)c->duration_s * 1000) == live);
            CHECK(captcha_difficulty(c, count) > 0);
        }
        CHECK(captcha_mem_usage(c) <= 4096 + c->nlevels * sizeof(captcha_level));
        captcha_free(c);
    } else {
        CHECK(c == NULL);
        CHECK(live == 0xdeadbeef);
    }

    /* encver 0: the original module's challenge */
    challenge lc = {0xdeadbeef, 0xdeadbeef, NULL, 0};
    err = challenge_parse_legacy(json, size, &lc, note, sizeof(note));
    if (err != NULL) CHECK(lc.difficulty_factor == 0xdeadbeef && lc.duration_s == 0xdeadbeef);
    else CHECK(lc.duration_s >= 1);
    return 0;
}
