/* SPDX-License-Identifier: BSD-3-Clause */
/* window.c -- the sparse sliding-window counter of the rate limiters; see
 * window.h for the algorithm, its precision and its memory bound.
 */
#include <string.h>

#include "alloc.h"
#include "window.h"

#define SW_MIN_CAP 4u
#define SW_REBASE_AT (1ULL << 31) /* offsets are rebased before they pass this */

static inline uint64_t slot_expiry(const swindow *b, uint64_t s) {
    return (s + 1) * b->slot_ms + b->window_ms;
}

static inline uint64_t eff_now(const swindow *b, uint64_t now_ms) {
    return now_ms > b->last_ms ? now_ms : b->last_ms;
}

static inline uint64_t slot_at(const swindow *b, uint32_t i) {
    return b->base + b->e[b->start + i].off;
}

uint64_t sw_legacy_width(uint64_t window_ms) {
    uint64_t w = window_ms / 256;
    return w ? w : 1;
}

uint64_t sw_fine_width(uint64_t window_ms) {
    uint64_t w = sw_legacy_width(window_ms);
    if (w <= SW_FINE_MS) return w;
    uint64_t span_w = (window_ms + SW_MAX_SPAN - 1) / SW_MAX_SPAN;
    return span_w > SW_FINE_MS ? span_w : SW_FINE_MS;
}

sw_status sw_init(swindow *b, uint64_t window_ms, uint64_t slot_ms) {
    memset(b, 0, sizeof(*b));
    if (window_ms < SW_MIN_WINDOW_MS || window_ms > SW_MAX_WINDOW_MS || slot_ms == 0 || slot_ms > window_ms + 1 ||
        window_ms / slot_ms > SW_MAX_SPAN)
        return SW_ERR_RANGE;
    b->window_ms = window_ms;
    b->slot_ms = slot_ms;
    return SW_OK;
}

void sw_free(swindow *b) {
    if (b->e) mc_free(b->e);
    b->e = NULL;
    b->start = b->len = b->cap = 0;
    b->total = 0;
}

/* Resize the array to `cap` entries (>= len), moving the live ones to the front. */
static sw_status resize(swindow *b, uint32_t cap) {
    sw_entry *n = mc_malloc((size_t)cap * sizeof(sw_entry));
    if (n == NULL) return SW_ERR_NOMEM;
    if (b->len) memcpy(n, b->e + b->start, (size_t)b->len * sizeof(sw_entry));
    if (b->e) mc_free(b->e);
    b->e = n;
    b->cap = cap;
    b->start = 0;
    return SW_OK;
}

/* Drop the slots expired at `now` (effective): from the front. Shrinks the
 * array when it is at most a quarter full (a failed shrink keeps the old one). */
static void sweep(swindow *b, uint64_t now) {
    while (b->len && slot_expiry(b, slot_at(b, 0)) <= now) {
        b->total -= b->e[b->start].count;
        b->start++;
        b->len--;
    }
    if (b->len == 0) {
        b->start = 0;
        b->total = 0;
        if (b->e) {
            mc_free(b->e);
            b->e = NULL;
            b->cap = 0;
        }
        return;
    }
    if (b->cap > SW_MIN_CAP && b->len <= b->cap / 4) (void)resize(b, b->len * 2 > SW_MIN_CAP ? b->len * 2 : SW_MIN_CAP);
}

uint64_t sw_count(const swindow *b, uint64_t now_ms) {
    uint64_t now = eff_now(b, now_ms), c = b->total;
    for (uint32_t i = 0; i < b->len && slot_expiry(b, slot_at(b, i)) <= now; i++) c -= b->e[b->start + i].count;
    return c;
}

/* The most slots that can be live at once: window/w + 2. */
static inline uint32_t max_live(const swindow *b) {
    return (uint32_t)(b->window_ms / b->slot_ms + 2);
}

/* Make room for one more entry at the back: compact when at most half full,
 * else double, never beyond max_live (so the array stays within the bound). */
static sw_status room_for_one(swindow *b) {
    if (b->start + b->len < b->cap) return SW_OK;
    if (b->len < b->cap / 2) return resize(b, b->cap); /* compact */
    uint32_t cap = b->cap ? b->cap * 2 : SW_MIN_CAP;
    if (cap > max_live(b)) cap = max_live(b);
    if (cap < b->len + 1) cap = b->len + 1;
    return resize(b, cap);
}

/* Keep offsets below 2^31: rebase onto the oldest live slot. */
static void rebase(swindow *b, uint64_t s) {
    if (b->len == 0) {
        b->base = s;
        return;
    }
    if (s - b->base < SW_REBASE_AT) return;
    uint32_t shift = b->e[b->start].off;
    for (uint32_t i = 0; i < b->len; i++) b->e[b->start + i].off -= shift;
    b->base += shift;
}

sw_status sw_add(swindow *b, uint64_t now_ms, uint32_t n, uint64_t *count) {
    if (now_ms > SW_MAX_TIME_MS) return SW_ERR_RANGE;
    uint64_t now = eff_now(b, now_ms);
    uint64_t s = now / b->slot_ms;
    int same = 0;
    if (n > 0 && b->len) {
        sw_entry *last = &b->e[b->start + b->len - 1];
        if (b->base + last->off == s && slot_expiry(b, s) > now) {
            if ((uint64_t)last->count + n > UINT32_MAX) return SW_ERR_FULL;
            same = 1;
        }
    }
    sweep(b, now);
    if (n > 0 && !same) {
        /* Checked before anything visible changes: only the clock and the sweep
         * (which changes no count) have been applied. */
        sw_status st = room_for_one(b);
        if (st != SW_OK) return st;
        rebase(b, s);
        b->e[b->start + b->len].off = (uint32_t)(s - b->base);
        b->e[b->start + b->len].count = n;
        b->len++;
    } else if (n > 0) {
        b->e[b->start + b->len - 1].count += n;
    }
    b->total += n;
    b->last_ms = now;
    if (count) *count = b->total;
    return SW_OK;
}

uint64_t sw_remove(swindow *b, uint64_t now_ms, uint64_t n) {
    if (now_ms > SW_MAX_TIME_MS) now_ms = SW_MAX_TIME_MS;
    uint64_t now = eff_now(b, now_ms);
    sweep(b, now);
    b->last_ms = now;
    uint64_t removed = 0;
    while (removed < n && b->len) {
        sw_entry *last = &b->e[b->start + b->len - 1];
        uint64_t take = n - removed;
        if (take > last->count) take = last->count;
        last->count -= (uint32_t)take;
        b->total -= take;
        removed += take;
        if (last->count == 0) b->len--;
    }
    if (b->len == 0) sweep(b, now); /* frees the array */
    return removed;
}

uint64_t sw_empty_at(const swindow *b, uint64_t now_ms) {
    if (b->len == 0) return 0;
    uint64_t e = slot_expiry(b, slot_at(b, b->len - 1));
    return e <= eff_now(b, now_ms) ? 0 : e;
}

uint64_t sw_hit_expiry(const swindow *b, uint64_t now_ms) {
    return slot_expiry(b, eff_now(b, now_ms) / b->slot_ms);
}

uint64_t sw_fits_at(const swindow *b, uint64_t now_ms, uint64_t limit, uint64_t cost) {
    if (cost > limit) return UINT64_MAX;
    uint64_t now = eff_now(b, now_ms);
    uint64_t count = sw_count(b, now);
    if (count <= limit - cost) return now;
    uint64_t need = count - (limit - cost), freed = 0;
    for (uint32_t i = 0; i < b->len; i++) {
        uint64_t e = slot_expiry(b, slot_at(b, i));
        if (e <= now) continue;
        freed += b->e[b->start + i].count;
        if (freed >= need) return e;
    }
    return sw_empty_at(b, now); /* not reached */
}

size_t sw_mem_usage(const swindow *b) {
    return sizeof(*b) + (size_t)b->cap * sizeof(sw_entry);
}

sw_status sw_copy(swindow *dst, const swindow *src) {
    *dst = *src;
    dst->e = NULL;
    dst->cap = dst->start = 0;
    if (src->len == 0) {
        dst->len = 0;
        dst->total = 0;
        return SW_OK;
    }
    /* The same capacity, so that MEMORY USAGE of a COPY equals its source's. */
    dst->e = mc_malloc((size_t)src->cap * sizeof(sw_entry));
    if (dst->e == NULL) {
        dst->len = 0;
        dst->total = 0;
        return SW_ERR_NOMEM;
    }
    memcpy(dst->e, src->e + src->start, (size_t)src->len * sizeof(sw_entry));
    dst->cap = src->cap;
    return SW_OK;
}

void sw_foreach_slot(const swindow *b, void (*cb)(uint64_t, uint32_t, void *), void *priv) {
    for (uint32_t i = 0; i < b->len; i++) cb(slot_at(b, i), b->e[b->start + i].count, priv);
}

size_t sw_slots(const swindow *b) {
    return b->len;
}

sw_status sw_restore_begin(swindow *b, uint64_t last_ms) {
    if (last_ms > SW_MAX_TIME_MS) return SW_ERR_RANGE;
    sw_free(b);
    b->last_ms = last_ms;
    b->base = 0;
    return SW_OK;
}

sw_status sw_restore_slot(swindow *b, uint64_t slot, uint32_t count) {
    if (count == 0) return SW_ERR_CORRUPT;
    if (slot > b->last_ms / b->slot_ms) return SW_ERR_CORRUPT;
    if (b->len) {
        uint64_t first = slot_at(b, 0), prev = slot_at(b, b->len - 1);
        if (slot <= prev) return SW_ERR_CORRUPT;
        if (slot - first > b->window_ms / b->slot_ms + 1) return SW_ERR_CORRUPT;
    }
    sw_status st = room_for_one(b);
    if (st != SW_OK) return st;
    rebase(b, slot);
    b->e[b->start + b->len].off = (uint32_t)(slot - b->base);
    b->e[b->start + b->len].count = count;
    b->len++;
    b->total += count;
    return SW_OK;
}

sw_status sw_restore_end(swindow *b) {
    (void)b; /* every slot was checked against the first as it came */
    return SW_OK;
}

sw_status sw_rewidth(swindow *dst, const swindow *src, uint64_t new_window, uint64_t new_slot, uint64_t now_ms) {
    sw_status st = sw_init(dst, new_window, new_slot);
    if (st != SW_OK) return st;
    uint64_t now = eff_now(src, now_ms);
    dst->last_ms = src->last_ms;
    for (uint32_t i = 0; i < src->len; i++) {
        uint64_t s = slot_at(src, i);
        if (slot_expiry(src, s) <= now) continue; /* already gone */
        uint64_t latest = (s + 1) * src->slot_ms - 1;
        if (latest > src->last_ms) latest = src->last_ms;
        uint64_t f = latest / new_slot;
        if ((f + 1) * new_slot + new_window <= now) continue; /* gone under the new window */
        uint32_t c = src->e[src->start + i].count;
        if (dst->len && slot_at(dst, dst->len - 1) == f) {
            sw_entry *last = &dst->e[dst->start + dst->len - 1];
            uint64_t sum = (uint64_t)last->count + c;
            uint32_t nc = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum; /* a slot holds 2^32-1 at most */
            dst->total += nc - last->count;
            last->count = nc;
            continue;
        }
        st = room_for_one(dst);
        if (st != SW_OK) {
            sw_free(dst);
            return st;
        }
        rebase(dst, f);
        dst->e[dst->start + dst->len].off = (uint32_t)(f - dst->base);
        dst->e[dst->start + dst->len].count = c;
        dst->len++;
        dst->total += c;
    }
    return SW_OK;
}
