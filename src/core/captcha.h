/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha.h -- an mCaptcha captcha: difficulty levels, a duration and a
 * leaky-bucket visitor count; and the one-shot proof-of-work challenge.
 *
 * Pure C (jansson for JSON, no Redis include), unit-tested in tests/unit.
 *
 * Difficulty rule (stateless, docs/protocol.md, "Difficulty rule"):
 * the difficulty_factor of the highest level whose visitor_threshold is strictly
 * below the count after this visit; when there is none, the lowest level's.
 *
 * Memory per captcha: sizeof(captcha) + 8 bytes per level (a 16 KiB config
 * holds about 330 levels, so under 3 KiB) + the bucket ring (at most 1,340
 * bytes for durations of 1 s and up, see bucket.h).
 */
#ifndef MC_CAPTCHA_H
#define MC_CAPTCHA_H

#include <stddef.h>
#include <stdint.h>

#include "bucket.h"

/* No cap of its own on ADD_CAPTCHA (the JSON size limit bounds it, as
 * CAPTCHA_MAX_CONFIG_BYTES); this sanity bound (8 MiB of levels) only guards the
 * loaders and CAPTCHA_SET against absurd counts. */
#define CAPTCHA_MAX_LEVELS (1u << 20)
#define CAPTCHA_MAX_DURATION_S 4294967295ULL /* u32 seconds (~136 years) */
/* The input limits' defaults (captcha_set_limits changes them). */
#define CAPTCHA_MAX_CONFIG_BYTES (16 * 1024)
#define CHALLENGE_MAX_JSON_BYTES 4096
#define CHALLENGE_MAX_STRING_BYTES 512

/* The limits on ADD_CAPTCHA's and ADD_CHALLENGE's input, process-wide (the
 * module sets them from its configs, server/config.c; tests keep the defaults
 * above). Only captcha_parse_config and challenge_parse read them: the loaders
 * and the internal commands (replication, AOF) take what was accepted before. */
typedef struct captcha_limits {
    size_t max_config_bytes;           /* captcha_parse_config: the JSON, bytes */
    size_t max_challenge_json_bytes;   /* challenge_parse: the JSON, bytes */
    size_t max_challenge_string_bytes; /* challenge_parse: the challenge string, bytes */
} captcha_limits;

void captcha_set_limits(const captcha_limits *limits);
captcha_limits captcha_get_limits(void);

typedef struct captcha_level {
    uint32_t visitor_threshold; /* the level applies once the count passes this */
    uint32_t difficulty_factor; /* proof-of-work difficulty, > 0 */
} captcha_level;

typedef struct captcha {
    uint32_t duration_s;    /* how long each visit counts, seconds (>= 1) */
    uint32_t nlevels;       /* 1..CAPTCHA_MAX_LEVELS */
    captcha_level *levels;  /* sorted by visitor_threshold, strictly increasing; stored
                             * right after the struct, in its allocation */
    lbucket visits;         /* window = duration_s * 1000 ms */
    char *legacy;           /* non-NULL: an unreadable value of the original, kept as
                             * its bytes (nlevels 0, duration_s 0); see below */
    size_t legacy_len;
} captcha;

typedef struct challenge {
    uint32_t difficulty_factor; /* as given by ADD_CHALLENGE */
    uint32_t duration_s;        /* seconds (>= 1); the key expires this long after ADD_CHALLENGE */
    char *legacy;               /* non-NULL: an unreadable value of the original, kept as its bytes */
    size_t legacy_len;
} challenge;

/* Result of a parse/validate: NULL on success, else a static message (no code prefix). */
typedef const char *captcha_err;

/* Parse and validate an ADD_CAPTCHA JSON config of `len` bytes:
 *   {"levels":[{"visitor_threshold":u32,"difficulty_factor":u32},...],"duration":u32}
 * Unknown fields are ignored; numbers must be JSON integers in range; at most
 * max_config_bytes (captcha_limits) long. On success
 * *out is a new captcha with an empty count (free with captcha_free) and NULL is
 * returned. On failure *out is untouched and the reason is returned;
 * *json_error is set to 1 when the input is not JSON at all (else 0).
 * `errbuf` (>= 160 bytes) may receive the parser's detail, then the return points to it. */
captcha_err captcha_parse_config(const char *json, size_t len, captcha **out, int *json_error,
                                 char *errbuf, size_t errbuf_len);

/* Build a captcha from parts that have been validated by the caller or not:
 * levels need not be sorted; the same checks as the JSON config are applied.
 * Copies the levels. */
captcha_err captcha_new(uint32_t duration_s, const captcha_level *levels, uint32_t nlevels,
                        captcha **out);

void captcha_free(captcha *c);

/* A value of the original that cannot be interpreted (captcha_parse_legacy
 * failed), kept as a copy of its `len` bytes so that nothing is lost: it is
 * saved, restored and copied as is, answers an error on use, and can be
 * deleted. NULL when out of memory. */
captcha *captcha_unreadable(const char *bytes, size_t len);

/* Deep copy; NULL when out of memory. */
captcha *captcha_dup(const captcha *c);

/* The difficulty that applies at `count` (the rule above). */
uint32_t captcha_difficulty(const captcha *c, uint64_t count);

/* Bytes of memory used by c, its levels and its bucket. */
size_t captcha_mem_usage(const captcha *c);

/* Parse an ADD_CHALLENGE JSON {"difficulty":u32,"duration":1..2^63-1,"challenge":"…"};
 * a duration above CAPTCHA_MAX_DURATION_S is kept as CAPTCHA_MAX_DURATION_S (as a
 * captcha's config duration is).
 * On success fills *out, points *str and *str_len at the challenge string inside
 * *holder (free it with challenge_json_release) and returns NULL. */
captcha_err challenge_parse(const char *json, size_t len, challenge *out, const char **str,
                            size_t *str_len, void **holder, int *json_error, char *errbuf,
                            size_t errbuf_len);
void challenge_json_release(void *holder);

/* The original Rust module's RDB payloads (encver 0), for in-place upgrades.
 * Captcha: {"m":{"visitor_threshold":<live count>,"defense":{"levels":[...],
 * "current_visitor_threshold":i},"duration":s}}: returns a captcha with an
 * empty count and the live count in *live (the caller re-adds it as visits).
 * Challenge: {"duration":s,"difficulty_factor":n}. NULL on success.
 *
 * The original validated little and stored u64 numbers, so what it could
 * write is normalised, never refused (docs/protocol.md, "Upgrading in place"):
 * numbers above u32 are clamped; duration 0 becomes 1 s; difficulty 0 becomes
 * 1; levels are sorted, a repeated threshold keeps its highest difficulty, and
 * a difficulty lower than the one below it is raised to it. `note` (>= 160
 * bytes) receives what was changed ("" when nothing). An error (a static
 * message) means the value cannot be interpreted at all (not JSON, a number
 * beyond 2^63, a missing field, no levels): the caller keeps its bytes. */
captcha_err captcha_parse_legacy(const char *json, size_t len, captcha **out, uint32_t *live, char *note,
                                 size_t note_len);
captcha_err challenge_parse_legacy(const char *json, size_t len, challenge *out, char *note, size_t note_len);

#endif
