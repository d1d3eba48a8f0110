/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha.c -- captcha config parsing and validation, difficulty selection, and
 * the challenge JSON. See captcha.h for the contracts. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "captcha.h"

#define MSG_NO_LEVELS "invalid config: at least one level is required"
#define MSG_TOO_MANY_LEVELS "invalid config: too many levels"
#define MSG_DUP "invalid config: duplicate visitor_threshold"
#define MSG_DF_ZERO "invalid config: difficulty_factor must be greater than zero"
#define MSG_DUR_ZERO "invalid config: duration must be greater than zero"
#define MSG_DECREASE "invalid config: difficulty_factor must not decrease as visitor_threshold increases"
#define MSG_SHAPE "invalid config: expected {\"levels\":[{\"visitor_threshold\":N,\"difficulty_factor\":N},...],\"duration\":N}"
#define MSG_U32(field) "invalid config: " field " must be an integer from 0 to 4294967295"
#define MSG_DF_RANGE "invalid config: difficulty_factor must be an integer from 1 to 4294967295"
#define MSG_DUR_RANGE "invalid config: duration must be an integer from 1 to 9223372036854775807 (seconds; above 4294967295 it is kept as 4294967295)"
#define MSG_NOMEM "out of memory"

static captcha_limits limits = {CAPTCHA_MAX_CONFIG_BYTES, CHALLENGE_MAX_JSON_BYTES, CHALLENGE_MAX_STRING_BYTES};

void captcha_set_limits(const captcha_limits *l) {
    limits = *l;
}

captcha_limits captcha_get_limits(void) {
    return limits;
}

/* Read obj[field] as an unsigned 32-bit integer into *v. Returns 0 on success. */
static int get_u32(json_t *obj, const char *field, uint32_t *v) {
    json_t *n = json_object_get(obj, field);
    if (!json_is_integer(n)) return -1;
    json_int_t x = json_integer_value(n);
    if (x < 0 || x > (json_int_t)UINT32_MAX) return -1;
    *v = (uint32_t)x;
    return 0;
}

/* Read obj[field] as a non-negative integer (jansson holds up to 2^63 - 1). */
static int get_u64(json_t *obj, const char *field, uint64_t *v) {
    json_t *n = json_object_get(obj, field);
    if (!json_is_integer(n) || json_integer_value(n) < 0) return -1;
    *v = (uint64_t)json_integer_value(n);
    return 0;
}

static int level_cmp(const void *a, const void *b) {
    uint32_t x = ((const captcha_level *)a)->visitor_threshold;
    uint32_t y = ((const captcha_level *)b)->visitor_threshold;
    return x < y ? -1 : x > y;
}

/* Parse JSON text of `len` bytes, rejecting NUL bytes and reporting failures. */
static json_t *parse_json(const char *text, size_t len, int *json_error, char *errbuf,
                          size_t errbuf_len, const char **err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        *json_error = 1;
        snprintf(errbuf, errbuf_len, "invalid JSON: %s at position %d", jerr.text, jerr.position);
        *err = errbuf;
    }
    return root;
}

captcha_err captcha_new(uint32_t duration_s, const captcha_level *levels, uint32_t nlevels,
                        captcha **out) {
    if (nlevels == 0) return MSG_NO_LEVELS;
    if (nlevels > CAPTCHA_MAX_LEVELS) return MSG_TOO_MANY_LEVELS;
    if (duration_s == 0) return MSG_DUR_ZERO;
    captcha_level *sorted = mc_malloc(nlevels * sizeof(*sorted));
    if (sorted == NULL) return MSG_NOMEM;
    memcpy(sorted, levels, nlevels * sizeof(*levels));
    qsort(sorted, nlevels, sizeof(*sorted), level_cmp);
    captcha_err err = NULL;
    for (uint32_t i = 0; i < nlevels && !err; i++) {
        if (sorted[i].difficulty_factor == 0) err = MSG_DF_ZERO;
        else if (i > 0 && sorted[i].visitor_threshold == sorted[i - 1].visitor_threshold) err = MSG_DUP;
    }
    for (uint32_t i = 1; i < nlevels && !err; i++) {
        if (sorted[i].difficulty_factor < sorted[i - 1].difficulty_factor) err = MSG_DECREASE;
    }
    /* One allocation for the captcha and its levels (read together on every visit). */
    captcha *c = err ? NULL : mc_calloc(1, sizeof(*c) + nlevels * sizeof(*sorted));
    if (c == NULL) {
        mc_free(sorted);
        return err ? err : MSG_NOMEM;
    }
    c->levels = (captcha_level *)(c + 1);
    memcpy(c->levels, sorted, nlevels * sizeof(*sorted));
    mc_free(sorted);
    c->nlevels = nlevels;
    c->duration_s = duration_s;
    lb_init(&c->visits, (uint64_t)duration_s * 1000); /* always in range for u32 seconds */
    *out = c;
    return NULL;
}

captcha_err captcha_parse_config(const char *json, size_t len, captcha **out, int *json_error,
                                 char *errbuf, size_t errbuf_len) {
    *json_error = 0;
    if (len > limits.max_config_bytes) {
        snprintf(errbuf, errbuf_len, "invalid config: the JSON is larger than %zu bytes", limits.max_config_bytes);
        return errbuf;
    }
    const char *err = NULL;
    json_t *root = parse_json(json, len, json_error, errbuf, errbuf_len, &err);
    if (root == NULL) return err;

    captcha_level *levels = NULL;
    uint64_t duration = 0;
    json_t *jl = json_object_get(root, "levels");
    if (!json_is_object(root) || !json_is_array(jl)) {
        err = MSG_SHAPE;
        goto done;
    }
    if (get_u64(root, "duration", &duration) != 0) {
        err = MSG_DUR_RANGE;
        goto done;
    }
    size_t n = json_array_size(jl);
    if (n == 0) {
        err = MSG_NO_LEVELS;
        goto done;
    }
    if (n > CAPTCHA_MAX_LEVELS) {
        err = MSG_TOO_MANY_LEVELS;
        goto done;
    }
    levels = mc_malloc(n * sizeof(*levels));
    if (levels == NULL) {
        err = MSG_NOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *lv = json_array_get(jl, i);
        if (!json_is_object(lv)) {
            err = MSG_SHAPE;
            goto done;
        }
        if (get_u32(lv, "visitor_threshold", &levels[i].visitor_threshold) != 0) {
            err = MSG_U32("visitor_threshold");
            goto done;
        }
        if (get_u32(lv, "difficulty_factor", &levels[i].difficulty_factor) != 0) {
            err = MSG_DF_RANGE;
            goto done;
        }
    }
    /* The original took any u64 number of seconds: beyond u32, the longest we keep. */
    err = captcha_new(duration > CAPTCHA_MAX_DURATION_S ? (uint32_t)CAPTCHA_MAX_DURATION_S : (uint32_t)duration,
                      levels, (uint32_t)n, out);
done:
    mc_free(levels);
    json_decref(root);
    return err;
}

void captcha_free(captcha *c) {
    if (c == NULL) return;
    lb_free(&c->visits);
    mc_free(c->legacy); /* the levels live in c's own allocation */
    mc_free(c);
}

captcha *captcha_unreadable(const char *bytes, size_t len) {
    captcha *c = mc_calloc(1, sizeof(*c));
    if (c == NULL) return NULL;
    c->legacy = mc_malloc(len ? len : 1);
    if (c->legacy == NULL) {
        mc_free(c);
        return NULL;
    }
    memcpy(c->legacy, bytes, len);
    c->legacy_len = len;
    lb_init(&c->visits, 1000);
    return c;
}

captcha *captcha_dup(const captcha *c) {
    if (c->legacy) return captcha_unreadable(c->legacy, c->legacy_len);
    captcha *d = mc_malloc(sizeof(*d) + c->nlevels * sizeof(*c->levels));
    if (d == NULL) return NULL;
    *d = *c;
    d->levels = (captcha_level *)(d + 1);
    memcpy(d->levels, c->levels, c->nlevels * sizeof(*c->levels));
    if (lb_copy(&d->visits, &c->visits) != LB_OK) {
        mc_free(d);
        return NULL;
    }
    return d;
}

uint32_t captcha_difficulty(const captcha *c, uint64_t count) {
    /* Binary search for the number of levels whose threshold is < count. */
    uint32_t lo = 0, hi = c->nlevels;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)c->levels[mid].visitor_threshold < count)
            lo = mid + 1;
        else
            hi = mid;
    }
    return c->levels[lo == 0 ? 0 : lo - 1].difficulty_factor;
}

size_t captcha_mem_usage(const captcha *c) {
    return sizeof(*c) - sizeof(c->visits) + c->nlevels * sizeof(*c->levels) + c->legacy_len +
           lb_mem_usage(&c->visits);
}

#define CMSG_DUR_RANGE "invalid challenge: duration must be an integer from 1 to 9223372036854775807 (seconds; above 4294967295 it is kept as 4294967295)"
#define CMSG_SHAPE "invalid challenge: expected {\"difficulty\":N,\"duration\":N,\"challenge\":\"...\"}"

captcha_err challenge_parse(const char *json, size_t len, challenge *out, const char **str,
                            size_t *str_len, void **holder, int *json_error, char *errbuf,
                            size_t errbuf_len) {
    *json_error = 0;
    if (len > limits.max_challenge_json_bytes) {
        snprintf(errbuf, errbuf_len, "invalid challenge: the JSON is larger than %zu bytes",
                 limits.max_challenge_json_bytes);
        return errbuf;
    }
    const char *err = NULL;
    json_t *root = parse_json(json, len, json_error, errbuf, errbuf_len, &err);
    if (root == NULL) return err;
    json_t *js = json_object_get(root, "challenge");
    uint32_t df;
    uint64_t dur;
    if (!json_is_object(root) || !json_is_string(js)) {
        err = CMSG_SHAPE;
    } else if (get_u32(root, "difficulty", &df) != 0) {
        err = "invalid challenge: difficulty must be an integer from 0 to 4294967295";
    } else if (get_u64(root, "duration", &dur) != 0 || dur == 0) {
        err = CMSG_DUR_RANGE;
    } else if (json_string_length(js) > limits.max_challenge_string_bytes) {
        snprintf(errbuf, errbuf_len, "invalid challenge: the challenge string is longer than %zu bytes",
                 limits.max_challenge_string_bytes);
        err = errbuf;
    } else {
        out->difficulty_factor = df;
        /* As ADD_CAPTCHA's duration: any u64 the original took, kept as at most u32 seconds. */
        out->duration_s = dur > CAPTCHA_MAX_DURATION_S ? (uint32_t)CAPTCHA_MAX_DURATION_S : (uint32_t)dur;
        *str = json_string_value(js);
        *str_len = json_string_length(js);
        *holder = root;
        return NULL;
    }
    json_decref(root);
    return err;
}

void challenge_json_release(void *holder) {
    json_decref((json_t *)holder);
}

/* Append `what` to the note (", "-separated), within `len` bytes. */
static void note_add(char *note, size_t len, const char *what) {
    size_t used = strlen(note);
    if (used + 2 < len) snprintf(note + used, len - used, "%s%s", used ? ", " : "", what);
}

static uint32_t clamp_u32(uint64_t v) {
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

captcha_err captcha_parse_legacy(const char *json, size_t len, captcha **out, uint32_t *live, char *note,
                                 size_t note_len) {
    note[0] = '\0';
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (root == NULL) return "legacy captcha: not JSON (or a number beyond 2^63)";
    captcha_err err = NULL;
    captcha_level *levels = NULL;
    json_t *m = json_object_get(root, "m");
    json_t *jl = json_object_get(json_object_get(m, "defense"), "levels");
    uint64_t duration, count;
    size_t n = json_array_size(jl);
    if (!json_is_object(m) || !json_is_array(jl)) {
        err = "legacy captcha: no m.defense.levels array";
    } else if (n == 0) {
        err = "legacy captcha: no levels (no difficulty can be chosen)";
    } else if (n > CAPTCHA_MAX_LEVELS) {
        err = "legacy captcha: more levels than this module keeps";
    } else if (get_u64(m, "duration", &duration) != 0) {
        err = "legacy captcha: m.duration is not a non-negative integer";
    } else if (get_u64(m, "visitor_threshold", &count) != 0) {
        err = "legacy captcha: m.visitor_threshold (the live count) is not a non-negative integer";
    } else if ((levels = mc_malloc(n * sizeof(*levels))) == NULL) {
        err = MSG_NOMEM;
    }
    for (size_t i = 0; i < n && !err; i++) {
        json_t *lv = json_array_get(jl, i);
        uint64_t th, df;
        if (get_u64(lv, "visitor_threshold", &th) != 0 || get_u64(lv, "difficulty_factor", &df) != 0) {
            err = "legacy captcha: a level without integer visitor_threshold and difficulty_factor";
            break;
        }
        if (th > UINT32_MAX || df > UINT32_MAX) note_add(note, note_len, "a level value above 4294967295 clamped");
        if (df == 0) note_add(note, note_len, "difficulty_factor 0 raised to 1");
        levels[i].visitor_threshold = clamp_u32(th);
        levels[i].difficulty_factor = df == 0 ? 1 : clamp_u32(df);
    }
    if (err) goto done;
    /* Sorted by threshold; a repeated threshold keeps its highest difficulty;
     * difficulty never falls as the threshold rises (each level takes at least
     * the difficulty below it): never easier than any level the original had. */
    qsort(levels, n, sizeof(*levels), level_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && levels[i].visitor_threshold == levels[k - 1].visitor_threshold) {
            note_add(note, note_len, "duplicate visitor_threshold merged");
            if (levels[i].difficulty_factor > levels[k - 1].difficulty_factor)
                levels[k - 1].difficulty_factor = levels[i].difficulty_factor;
            continue;
        }
        levels[k++] = levels[i];
    }
    for (size_t i = 1; i < k; i++)
        if (levels[i].difficulty_factor < levels[i - 1].difficulty_factor) {
            note_add(note, note_len, "decreasing difficulty_factor raised");
            levels[i].difficulty_factor = levels[i - 1].difficulty_factor;
        }
    if (duration == 0) note_add(note, note_len, "duration 0 s raised to 1 s");
    if (duration > CAPTCHA_MAX_DURATION_S) note_add(note, note_len, "duration above 4294967295 s clamped");
    if (count > UINT32_MAX) note_add(note, note_len, "live count above 4294967295 clamped");
    err = captcha_new(duration == 0 ? 1 : clamp_u32(duration), levels, (uint32_t)k, out);
    if (err == NULL) *live = clamp_u32(count);
done:
    mc_free(levels);
    json_decref(root);
    return err;
}

captcha_err challenge_parse_legacy(const char *json, size_t len, challenge *out, char *note, size_t note_len) {
    note[0] = '\0';
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (root == NULL) return "legacy challenge: not JSON (or a number beyond 2^63)";
    uint64_t df, dur;
    captcha_err err = "legacy challenge: no integer difficulty_factor and duration";
    if (get_u64(root, "difficulty_factor", &df) == 0 && get_u64(root, "duration", &dur) == 0) {
        if (df > UINT32_MAX) note_add(note, note_len, "difficulty_factor above 4294967295 clamped");
        if (dur == 0) note_add(note, note_len, "duration 0 s raised to 1 s");
        if (dur > UINT32_MAX) note_add(note, note_len, "duration above 4294967295 s clamped");
        out->difficulty_factor = clamp_u32(df);
        out->duration_s = dur == 0 ? 1 : clamp_u32(dur);
        err = NULL;
    }
    json_decref(root);
    return err;
}
