/* SPDX-License-Identifier: BSD-3-Clause */
/* lock.c -- leased locks, semaphores and fencing tokens; see lock.h. */
#include <string.h>

#include "alloc.h"
#include "lock.h"

lockv *lock_new(uint32_t permits) {
    lockv *l = mc_calloc(1, sizeof(*l));
    if (l) l->permits = permits;
    return l;
}

static void holder_clear(lock_holder *h) {
    mc_free(h->owner);
    h->owner = NULL;
}

void lock_free(lockv *l) {
    if (l == NULL) return;
    for (uint32_t i = 0; i < l->nholders; i++) holder_clear(&l->holders[i]);
    mc_free(l->holders);
    mc_free(l);
}

/* Append a holder (copies the owner). 0, or -1 when out of memory. */
static int push_holder(lockv *l, const char *owner, size_t len, uint64_t expires, uint32_t count, uint64_t token,
                       uint64_t client_id, uint64_t delay_ms) {
    lock_holder *hs = mc_malloc((l->nholders + 1) * sizeof(*hs));
    char *o = mc_malloc(len ? len : 1);
    if (hs == NULL || o == NULL) {
        mc_free(hs);
        mc_free(o);
        return -1;
    }
    if (l->nholders) memcpy(hs, l->holders, l->nholders * sizeof(*hs));
    mc_free(l->holders);
    l->holders = hs;
    memcpy(o, owner, len);
    lock_holder *h = &l->holders[l->nholders++];
    h->owner = o;
    h->owner_len = (uint16_t)len;
    h->shared = 0;
    h->count = count;
    h->expires_ms = expires;
    h->token = token;
    h->client_id = client_id;
    h->granted_ms = 0;
    h->delay_ms = delay_ms;
    h->weight = 1;
    return 0;
}

static void remove_holder(lockv *l, uint32_t i) {
    holder_clear(&l->holders[i]);
    memmove(&l->holders[i], &l->holders[i + 1], (l->nholders - i - 1) * sizeof(lock_holder));
    l->nholders--;
}

lockv *lock_dup(const lockv *l) {
    lockv *d = lock_new(l->permits);
    if (d == NULL) return NULL;
    d->last_token = l->last_token;
    d->ephemeral = l->ephemeral;
    d->adjust = l->adjust;
    for (uint32_t i = 0; i < l->nholders; i++) {
        const lock_holder *h = &l->holders[i];
        if (push_holder(d, h->owner, h->owner_len, h->expires_ms, h->count, h->token, h->client_id, h->delay_ms) != 0) {
            lock_free(d);
            return NULL;
        }
        d->holders[i].shared = h->shared;
        d->holders[i].weight = h->weight;
        /* granted_ms stays 0: a copy's holders were not granted here (their hold
         * time is not sampled a second time when the copy is released) */
    }
    return d;
}

void lock_end_hold(lockv *l, uint32_t i, uint64_t end_ms) {
    lock_holder *h = &l->holders[i];
    if (h->delay_ms == 0 || h->count == 0) {
        remove_holder(l, i);
        return;
    }
    h->count = 0;
    h->client_id = 0;
    h->expires_ms = end_ms + h->delay_ms;
}

uint32_t lock_expire(lockv *l, uint64_t now_ms, uint32_t *leases_ended) {
    uint32_t changed = 0, ended = 0;
    for (uint32_t i = 0; i < l->nholders;) {
        lock_holder *h = &l->holders[i];
        if (h->expires_ms > now_ms) {
            i++;
            continue;
        }
        changed++;
        if (h->count > 0) {
            ended++;
            if (h->delay_ms > 0) {
                lock_end_hold(l, i, h->expires_ms); /* in place: the delay runs from the lease end */
                if (h->expires_ms > now_ms) {
                    i++;
                    continue;
                }
            }
        }
        remove_holder(l, i); /* no delay, or a lock-delay slot that ended too */
    }
    if (leases_ended) *leases_ended = ended;
    return changed;
}

int lock_find(const lockv *l, const char *owner, size_t len) {
    for (uint32_t i = 0; i < l->nholders; i++) {
        const lock_holder *h = &l->holders[i];
        if (h->count > 0 && h->owner_len == len && memcmp(h->owner, owner, len) == 0) return (int)i;
    }
    return -1;
}

/* The permits every entry of `l` takes (the caller applied the time first). */
static uint64_t taken_weight(const lockv *l) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < l->nholders; i++) n += l->holders[i].weight;
    return n;
}

/* Whether every entry of `l` is shared (true when there is none). */
static int all_shared(const lockv *l) {
    for (uint32_t i = 0; i < l->nholders; i++)
        if (!l->holders[i].shared) return 0;
    return 1;
}

lock_outcome lock_acquire(lockv *l, const char *owner, size_t len, uint64_t now_ms, const lock_grant *g,
                          uint64_t token_floor, uint64_t *token) {
    int i = lock_find(l, owner, len);
    if (i >= 0) {
        lock_holder *h = &l->holders[i];
        if (!g->reentrant || h->count == UINT32_MAX) return LOCK_OWNED;
        if (h->shared && !g->shared) return LOCK_UPGRADE; /* write inside read */
        if ((g->weight ? g->weight : 1) > h->weight) return LOCK_MORE; /* it would hold fewer than asked */
        h->count++; /* read inside write counts on the exclusive hold */
        if (now_ms + g->lease_ms > h->expires_ms) h->expires_ms = now_ms + g->lease_ms;
        *token = h->token;
        return LOCK_REENTERED;
    }
    uint32_t weight = g->weight ? g->weight : 1;
    if (g->shared ? (l->permits != 1 || l->adjust != 0 || !all_shared(l) || l->nholders >= LOCK_MAX_PERMITS)
                  : (uint64_t)taken_weight(l) + weight > lock_size(l) || l->nholders >= LOCK_MAX_PERMITS)
        return LOCK_BUSY;
    uint64_t t = l->last_token + 1 > token_floor ? l->last_token + 1 : token_floor;
    if (l->last_token >= LOCK_MAX_TOKEN || t > LOCK_MAX_TOKEN) return LOCK_EXHAUSTED;
    if (push_holder(l, owner, len, now_ms + g->lease_ms, 1, t, g->client_id, g->delay_ms) != 0) return LOCK_BUSY;
    l->holders[l->nholders - 1].granted_ms = now_ms;
    l->holders[l->nholders - 1].shared = g->shared ? 1 : 0;
    l->holders[l->nholders - 1].weight = weight;
    l->last_token = t;
    *token = t;
    return LOCK_GRANTED;
}

int lock_release(lockv *l, const char *owner, size_t len) {
    int i = lock_find(l, owner, len);
    if (i < 0) return -1;
    lock_holder *h = &l->holders[i];
    if (--h->count > 0) return (int)(h->count > INT32_MAX ? INT32_MAX : h->count);
    remove_holder(l, (uint32_t)i);
    return 0;
}

int lock_extend(lockv *l, const char *owner, size_t len, uint64_t now_ms, uint64_t lease_ms) {
    int i = lock_find(l, owner, len);
    if (i < 0) return -1;
    l->holders[i].expires_ms = now_ms + lease_ms;
    return 0;
}

int lock_restore_holder(lockv *l, const char *owner, size_t len, uint64_t expires_ms, uint32_t count,
                        uint64_t token, uint64_t delay_ms, int delay_slots_ok) {
    if (len == 0 || len > LOCK_MAX_OWNER_BYTES || (count == 0 && !delay_slots_ok) || token == 0 ||
        token > l->last_token || l->last_token > LOCK_MAX_TOKEN || delay_ms > LOCK_MAX_LEASE_MS ||
        l->nholders >= LOCK_MAX_PERMITS || (count > 0 && lock_find(l, owner, len) >= 0))
        return -1;
    return push_holder(l, owner, len, expires_ms, count, token, 0, delay_ms);
}

uint64_t lock_next_expiry(const lockv *l) {
    uint64_t e = 0;
    for (uint32_t i = 0; i < l->nholders; i++)
        if (e == 0 || l->holders[i].expires_ms < e) e = l->holders[i].expires_ms;
    return e;
}

uint64_t lock_entry_end(const lock_holder *h, uint64_t now_ms) {
    if (h->count > 0 && h->expires_ms <= now_ms && h->delay_ms > 0) return h->expires_ms + h->delay_ms;
    return h->expires_ms;
}

uint32_t lock_live_holders(const lockv *l, uint64_t now_ms) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < l->nholders; i++) n += lock_entry_end(&l->holders[i], now_ms) > now_ms;
    return n;
}

uint32_t lock_taken(const lockv *l, uint64_t now_ms) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < l->nholders; i++)
        if (lock_entry_end(&l->holders[i], now_ms) > now_ms) n += l->holders[i].weight;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

uint32_t lock_size(const lockv *l) {
    int64_t s = (int64_t)l->permits + l->adjust;
    return s < 0 ? 0 : s > LOCK_MAX_PERMITS ? LOCK_MAX_PERMITS : (uint32_t)s;
}

uint32_t lock_available(const lockv *l, uint64_t now_ms) {
    uint32_t size = lock_size(l), taken = lock_taken(l, now_ms);
    return taken >= size ? 0 : size - taken;
}

int lock_add_permits(lockv *l, int64_t delta) {
    int64_t size = (int64_t)lock_size(l) + delta;
    if (delta < -LOCK_MAX_PERMITS || delta > LOCK_MAX_PERMITS || size < 0 || size > LOCK_MAX_PERMITS) return -1;
    l->adjust = (int32_t)(size - (int64_t)l->permits);
    return 0;
}

uint32_t lock_drain(lockv *l, uint64_t now_ms) {
    uint32_t n = lock_available(l, now_ms);
    lock_add_permits(l, -(int64_t)n); /* the size becomes the permits taken: in range */
    return n;
}

int lock_check(const lockv *l) {
    uint32_t shared = 0;
    for (uint32_t i = 0; i < l->nholders; i++) {
        if (l->holders[i].count == 0 && l->holders[i].delay_ms == 0) return LOCK_BAD_DELAY;
        shared += l->holders[i].shared != 0;
    }
    if (l->ephemeral && lock_has_delays(l)) return LOCK_BAD_DELAY;
    if (l->adjust < -LOCK_MAX_PERMITS || l->adjust > LOCK_MAX_PERMITS || (l->adjust != 0 && (l->ephemeral || shared)))
        return LOCK_BAD_ADJUST;
    if (shared && (l->ephemeral || l->permits != 1 || shared != l->nholders)) return LOCK_BAD_SHARED;
    for (uint32_t i = 0; i < l->nholders; i++) {
        uint32_t w = l->holders[i].weight;
        if (w < 1 || w > l->permits || (w > 1 && l->ephemeral)) return LOCK_BAD_WEIGHT;
    }
    return 0;
}

int lock_has_delays(const lockv *l) {
    for (uint32_t i = 0; i < l->nholders; i++)
        if (l->holders[i].delay_ms > 0 || l->holders[i].count == 0) return 1;
    return 0;
}

size_t lock_mem_usage(const lockv *l) {
    size_t n = sizeof(*l) + l->nholders * sizeof(lock_holder);
    for (uint32_t i = 0; i < l->nholders; i++) n += l->holders[i].owner_len;
    return n;
}
