/* SPDX-License-Identifier: BSD-3-Clause */
/* bucket.c -- the leaky-bucket counter: slotted ring with lazy sweeping.
 * See bucket.h for the algorithm, its precision and its memory bound. */
#include <string.h>

#include "alloc.h"
#include "bucket.h"

/* The time at which the hits of slot s stop counting. */
static inline uint64_t slot_expiry(const lbucket *b, uint64_t s) {
    return (s + 1) * b->slot_ms + b->window_ms;
}

static inline uint64_t effective_now(const lbucket *b, uint64_t now_ms) {
    return now_ms > b->last_ms ? now_ms : b->last_ms;
}

lb_status lb_init(lbucket *b, uint64_t window_ms) {
    memset(b, 0, sizeof(*b));
    if (window_ms < LB_MIN_WINDOW_MS || window_ms > LB_MAX_WINDOW_MS) return LB_ERR_RANGE;
    uint64_t w = window_ms / LB_SLOT_DIVISOR;
    if (w == 0) w = 1;
    uint64_t n = window_ms / w + 2;
    if (n > LB_MAX_SLOTS) return LB_ERR_RANGE;
    b->window_ms = window_ms;
    b->slot_ms = w;
    b->nslots = (uint32_t)n;
    return LB_OK;
}

void lb_free(lbucket *b) {
    if (b->ring) mc_free(b->ring);
    b->ring = NULL;
    b->total = 0;
    b->tail = b->head = 0;
}

/* Drop every slot that has expired at `now` (already effective). Keeps the
 * invariant: ring entries outside [tail, head] are zero; total is their sum. */
static void sweep(lbucket *b, uint64_t now) {
    if (b->total == 0) return;
    if (slot_expiry(b, b->head) <= now) {
        /* Everything left: clear only the live span, at most nslots entries. */
        for (uint64_t s = b->tail; s <= b->head; s++) b->ring[s % b->nslots] = 0;
        b->total = 0;
        b->tail = b->head + 1;
        return;
    }
    while (slot_expiry(b, b->tail) <= now) {
        uint32_t *slot = &b->ring[b->tail % b->nslots];
        b->total -= *slot;
        *slot = 0;
        b->tail++;
    }
}

/* The sum of ring slots first..last (absolute slot numbers, last - first <
 * nslots), walking the ring with one division instead of one per slot. */
static uint64_t sum_slots(const lbucket *b, uint64_t first, uint64_t last) {
    uint64_t sum = 0;
    uint32_t i = (uint32_t)(first % b->nslots);
    for (uint64_t s = first; s <= last; s++) {
        sum += b->ring[i];
        if (++i == b->nslots) i = 0;
    }
    return sum;
}

uint64_t lb_count(const lbucket *b, uint64_t now_ms) {
    if (b->total == 0) return 0;
    uint64_t now = effective_now(b, now_ms);
    if (slot_expiry(b, b->head) <= now) return 0;
    if (slot_expiry(b, b->tail) > now) return b->total; /* nothing expired yet */
    /* The newest expired slot: the largest s with (s + 1) * w + D <= now (the
     * tail is one, so now >= D + w). Sum whichever span is shorter. */
    uint64_t last_gone = (now - b->window_ms) / b->slot_ms - 1;
    if (last_gone - b->tail + 1 <= b->head - last_gone) return b->total - sum_slots(b, b->tail, last_gone);
    return sum_slots(b, last_gone + 1, b->head);
}

lb_status lb_add(lbucket *b, uint64_t now_ms, uint32_t n, uint64_t *count) {
    if (now_ms > LB_MAX_TIME_MS) return LB_ERR_RANGE;
    uint64_t now = effective_now(b, now_ms);
    uint64_t s = now / b->slot_ms;
    if (b->ring == NULL) {
        b->ring = mc_calloc(b->nslots, sizeof(uint32_t));
        if (b->ring == NULL) return LB_ERR_NOMEM;
    }
    /* Check before changing anything, so an error leaves the counter as it was. */
    if (n > 0) {
        uint32_t cur = 0;
        if (b->total != 0 && s <= b->head && slot_expiry(b, s) > now) cur = b->ring[s % b->nslots];
        if ((uint64_t)cur + n > UINT32_MAX) return LB_ERR_FULL;
    }
    sweep(b, now);
    b->last_ms = now;
    if (n > 0) {
        if (b->total == 0) {
            b->tail = b->head = s;
        } else if (s > b->head) {
            /* Live slots satisfy tail > (now - window)/w - 1, so s - tail <=
             * window/w + 1 < nslots: the new slot never aliases a live one. */
            b->head = s;
        }
        b->ring[s % b->nslots] += n;
        b->total += n;
    }
    if (count) *count = b->total;
    return LB_OK;
}

uint64_t lb_remove(lbucket *b, uint64_t now_ms, uint64_t n) {
    if (now_ms > LB_MAX_TIME_MS) now_ms = LB_MAX_TIME_MS;
    uint64_t now = effective_now(b, now_ms);
    sweep(b, now);
    b->last_ms = now;
    uint64_t removed = 0;
    while (removed < n && b->total > 0) {
        uint32_t *slot = &b->ring[b->head % b->nslots];
        uint64_t take = n - removed;
        if (take > *slot) take = *slot;
        *slot -= (uint32_t)take;
        b->total -= take;
        removed += take;
        if (*slot == 0) {
            if (b->head == b->tail) {
                b->tail = b->head + 1;
                break;
            }
            /* Walk the head back to the newest non-zero slot. */
            do { b->head--; } while (b->head > b->tail && b->ring[b->head % b->nslots] == 0);
        }
    }
    return removed;
}

uint64_t lb_next_expiry(const lbucket *b, uint64_t now_ms) {
    if (b->total == 0) return 0;
    uint64_t now = effective_now(b, now_ms);
    if (slot_expiry(b, b->head) <= now) return 0;
    for (uint64_t s = b->tail; s <= b->head; s++) {
        if (b->ring[s % b->nslots] != 0 && slot_expiry(b, s) > now) return slot_expiry(b, s);
    }
    return 0;
}

uint64_t lb_empty_at(const lbucket *b, uint64_t now_ms) {
    if (b->total == 0) return 0;
    uint64_t now = effective_now(b, now_ms);
    uint64_t e = slot_expiry(b, b->head);
    return e <= now ? 0 : e;
}

uint64_t lb_fits_at(const lbucket *b, uint64_t now_ms, uint64_t limit, uint64_t cost) {
    if (cost > limit) return UINT64_MAX;
    uint64_t now = effective_now(b, now_ms);
    uint64_t count = lb_count(b, now);
    if (count <= limit - cost) return now; /* cost <= limit: no overflow */
    uint64_t need = count - (limit - cost), freed = 0;
    for (uint64_t s = b->tail; s <= b->head; s++) {
        uint64_t e = slot_expiry(b, s);
        if (e <= now) continue; /* already gone from count */
        freed += b->ring[s % b->nslots];
        if (freed >= need) return e;
    }
    return slot_expiry(b, b->head); /* not reached: everything leaves by then */
}

size_t lb_mem_usage(const lbucket *b) {
    return sizeof(*b) + (b->ring ? (size_t)b->nslots * sizeof(uint32_t) : 0);
}

lb_status lb_copy(lbucket *dst, const lbucket *src) {
    *dst = *src;
    if (src->ring) {
        dst->ring = mc_malloc((size_t)src->nslots * sizeof(uint32_t));
        if (dst->ring == NULL) {
            dst->ring = NULL;
            return LB_ERR_NOMEM;
        }
        memcpy(dst->ring, src->ring, (size_t)src->nslots * sizeof(uint32_t));
    }
    return LB_OK;
}

void lb_foreach_slot(const lbucket *b, void (*cb)(uint64_t, uint32_t, void *), void *priv) {
    if (b->total == 0) return;
    for (uint64_t s = b->tail; s <= b->head; s++) {
        uint32_t c = b->ring[s % b->nslots];
        if (c) cb(s, c, priv);
    }
}

lb_status lb_restore_begin(lbucket *b, uint64_t last_ms) {
    if (last_ms > LB_MAX_TIME_MS) return LB_ERR_RANGE;
    b->last_ms = last_ms;
    b->total = 0;
    b->tail = b->head = 0;
    return LB_OK;
}

lb_status lb_restore_slot(lbucket *b, uint64_t slot, uint32_t count) {
    if (count == 0) return LB_ERR_CORRUPT;
    if (slot > b->last_ms / b->slot_ms) return LB_ERR_CORRUPT; /* newer than the clock */
    if (b->total != 0) {
        if (slot <= b->head) return LB_ERR_CORRUPT;              /* not ascending */
        if (slot - b->tail >= b->nslots) return LB_ERR_CORRUPT;  /* does not fit the ring */
    }
    if (b->ring == NULL) {
        b->ring = mc_calloc(b->nslots, sizeof(uint32_t));
        if (b->ring == NULL) return LB_ERR_NOMEM;
    }
    if (b->total == 0) b->tail = slot;
    b->head = slot;
    b->ring[slot % b->nslots] = count;
    b->total += count;
    return LB_OK;
}

lb_status lb_restore_end(lbucket *b) {
    /* Slots that had already expired at last_ms would have been swept by the
     * writer; a span wider than the live window means the input is not ours. */
    if (b->total != 0 && b->head - b->tail > b->window_ms / b->slot_ms + 1) return LB_ERR_CORRUPT;
    return LB_OK;
}
