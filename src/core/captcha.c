/* captcha.c -- captcha config parsing and validation, difficulty selection, and
 * the challenge JSON. See captcha.h for the contracts. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "captcha.h"

#define MSG_NO_LEVELS "invalid config: at least one level is required"
#define MSG_TOO_MANY_LEVELS "invalid config: at most 128 levels are allowed"
#define MSG_DUP "invalid config: duplicate visitor_threshold"
#define MSG_DF_ZERO "invalid config: difficulty_factor must be greater than zero"
#define MSG_DUR_ZERO "invalid config: duration must be greater than zero"
#define MSG_DECREASE "invalid config: difficulty_factor must not decrease as visitor_threshold increases"
#define MSG_SHAPE "invalid config: expected {\"levels\":[{\"visitor_threshold\":N,\"difficulty_factor\":N},...],\"duration\":N}"
#define MSG_U32(field) "invalid config: " field " must be an integer from 0 to 4294967295"
#define MSG_TOO_BIG "invalid config: the JSON is larger than 16384 bytes"
#define MSG_NOMEM "out of memory"

/* Read obj[field] as an unsigned 32-bit integer into *v. Returns 0 on success. */
static int get_u32(json_t *obj, const char *field, uint32_t *v) {
    json_t *n = json_object_get(obj, field);
    if (!json_is_integer(n)) return -1;
    json_int_t x = json_integer_value(n);
    if (x < 0 || x > (json_int_t)UINT32_MAX) return -1;
    *v = (uint32_t)x;
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
    captcha_level sorted[CAPTCHA_MAX_LEVELS];
    memcpy(sorted, levels, nlevels * sizeof(*levels));
    qsort(sorted, nlevels, sizeof(*sorted), level_cmp);
    for (uint32_t i = 0; i < nlevels; i++) {
        if (sorted[i].difficulty_factor == 0) return MSG_DF_ZERO;
        if (i > 0 && sorted[i].visitor_threshold == sorted[i - 1].visitor_threshold) return MSG_DUP;
    }
    for (uint32_t i = 1; i < nlevels; i++) {
        if (sorted[i].difficulty_factor < sorted[i - 1].difficulty_factor) return MSG_DECREASE;
    }
    captcha *c = mc_calloc(1, sizeof(*c));
    if (c == NULL) return MSG_NOMEM;
    c->levels = mc_malloc(nlevels * sizeof(*c->levels));
    if (c->levels == NULL) {
        mc_free(c);
        return MSG_NOMEM;
    }
    memcpy(c->levels, sorted, nlevels * sizeof(*sorted));
    c->nlevels = nlevels;
    c->duration_s = duration_s;
    lb_init(&c->visits, (uint64_t)duration_s * 1000); /* always in range for u32 seconds */
    *out = c;
    return NULL;
}

captcha_err captcha_parse_config(const char *json, size_t len, captcha **out, int *json_error,
                                 char *errbuf, size_t errbuf_len) {
    *json_error = 0;
    if (len > CAPTCHA_MAX_CONFIG_BYTES) return MSG_TOO_BIG;
    const char *err = NULL;
    json_t *root = parse_json(json, len, json_error, errbuf, errbuf_len, &err);
    if (root == NULL) return err;

    captcha_level levels[CAPTCHA_MAX_LEVELS];
    uint32_t duration = 0;
    json_t *jl = json_object_get(root, "levels");
    if (!json_is_object(root) || !json_is_array(jl)) {
        err = MSG_SHAPE;
        goto done;
    }
    if (get_u32(root, "duration", &duration) != 0) {
        err = MSG_U32("duration");
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
            err = MSG_U32("difficulty_factor");
            goto done;
        }
    }
    err = captcha_new(duration, levels, (uint32_t)n, out);
done:
    json_decref(root);
    return err;
}

void captcha_free(captcha *c) {
    if (c == NULL) return;
    lb_free(&c->visits);
    mc_free(c->levels);
    mc_free(c);
}

captcha *captcha_dup(const captcha *c) {
    captcha *d = mc_malloc(sizeof(*d));
    if (d == NULL) return NULL;
    *d = *c;
    d->levels = mc_malloc(c->nlevels * sizeof(*c->levels));
    if (d->levels == NULL) {
        mc_free(d);
        return NULL;
    }
    memcpy(d->levels, c->levels, c->nlevels * sizeof(*c->levels));
    if (lb_copy(&d->visits, &c->visits) != LB_OK) {
        mc_free(d->levels);
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
    return sizeof(*c) - sizeof(c->visits) + c->nlevels * sizeof(*c->levels) +
           lb_mem_usage(&c->visits);
}

#define CMSG_SHAPE "invalid challenge: expected {\"difficulty\":N,\"duration\":N,\"challenge\":\"...\"}"

captcha_err challenge_parse(const char *json, size_t len, challenge *out, const char **str,
                            size_t *str_len, void **holder, int *json_error, char *errbuf,
                            size_t errbuf_len) {
    *json_error = 0;
    if (len > CHALLENGE_MAX_JSON_BYTES) return "invalid challenge: the JSON is larger than 4096 bytes";
    const char *err = NULL;
    json_t *root = parse_json(json, len, json_error, errbuf, errbuf_len, &err);
    if (root == NULL) return err;
    json_t *js = json_object_get(root, "challenge");
    uint32_t df, dur;
    if (!json_is_object(root) || !json_is_string(js)) {
        err = CMSG_SHAPE;
    } else if (get_u32(root, "difficulty", &df) != 0) {
        err = "invalid challenge: difficulty must be an integer from 0 to 4294967295";
    } else if (get_u32(root, "duration", &dur) != 0 || dur == 0) {
        err = "invalid challenge: duration must be an integer from 1 to 4294967295";
    } else if (json_string_length(js) > CHALLENGE_MAX_STRING_BYTES) {
        err = "invalid challenge: the challenge string is longer than 512 bytes";
    } else {
        out->difficulty_factor = df;
        out->duration_s = dur;
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

captcha_err captcha_parse_legacy(const char *json, size_t len, captcha **out, uint32_t *live) {
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (root == NULL) return "legacy captcha: not JSON";
    captcha_err err = "legacy captcha: unexpected layout";
    json_t *m = json_object_get(root, "m");
    json_t *defense = json_object_get(m, "defense");
    json_t *jl = json_object_get(defense, "levels");
    uint32_t duration, count;
    captcha_level levels[CAPTCHA_MAX_LEVELS];
    size_t n = json_array_size(jl);
    if (!json_is_array(jl) || n == 0 || n > CAPTCHA_MAX_LEVELS) goto done;
    if (get_u32(m, "duration", &duration) != 0 || get_u32(m, "visitor_threshold", &count) != 0)
        goto done;
    for (size_t i = 0; i < n; i++) {
        json_t *lv = json_array_get(jl, i);
        if (get_u32(lv, "visitor_threshold", &levels[i].visitor_threshold) != 0 ||
            get_u32(lv, "difficulty_factor", &levels[i].difficulty_factor) != 0)
            goto done;
    }
    err = captcha_new(duration, levels, (uint32_t)n, out);
    if (err == NULL) *live = count;
done:
    json_decref(root);
    return err;
}

captcha_err challenge_parse_legacy(const char *json, size_t len, challenge *out) {
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr);
    if (root == NULL) return "legacy challenge: not JSON";
    uint32_t df, dur;
    captcha_err err = "legacy challenge: unexpected layout";
    if (get_u32(root, "difficulty_factor", &df) == 0 && get_u32(root, "duration", &dur) == 0) {
        out->difficulty_factor = df;
        out->duration_s = dur;
        err = NULL;
    }
    json_decref(root);
    return err;
}
