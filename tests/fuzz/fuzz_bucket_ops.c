/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_bucket_ops.c -- the leaky bucket (src/core/bucket.c) driven by a sequence of
 * operations read from the input, checked after every step against the
 * documented invariants and against an exact reference model.
 *
 * Input: [mode u8][window u64][clock mode u8][start u64] then ops, each
 *   [op u8][time step u8 + its operand][op operands].
 * The clock moves forwards and backwards (and past LB_MAX_TIME_MS); the bucket
 * must use max(now, highest time seen) as the time.
 *
 * Reference model (bucket.h): a hit at effective time t goes to slot s = t/w and
 * counts while now < (s+1)*w + window. The model keeps (slot, count) pairs in
 * ascending slot order and drops expired ones when the bucket writes.
 *
 * Invariants checked with abort():
 *   - lb_count == model count, and never above (hits added - hits removed);
 *   - lb_count never increases with the query time while nothing is added;
 *   - lb_mem_usage <= 4096;
 *   - lb_next_expiry / lb_empty_at agree with the model;
 *   - lb_foreach_slot gives ascending, non-zero slots summing to >= the count,
 *     and restoring them into a fresh bucket (lb_restore_*) succeeds and gives
 *     the same lb_count / lb_next_expiry / lb_empty_at at several times;
 *   - an arbitrary restore sequence is accepted iff it is well-formed
 *     (non-zero, ascending, not after last_ms, spanning <= window/w + 1 slots);
 *   - lb_copy is deep and equal;
 *   - lb_fits_at (when the tree has it) agrees with the model;
 *   - every error (LB_ERR_RANGE, LB_ERR_FULL, injected LB_ERR_NOMEM) leaves the
 *     bucket unchanged.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/core/alloc.h"
#include "../../src/core/bucket.h"

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* lb_fits_at (used by the rate limiters) is checked when the tree has it. */
uint64_t lb_fits_at(const lbucket *b, uint64_t now_ms, uint64_t limit, uint64_t cost);
#pragma weak lb_fits_at

/* Set FUZZ_SKIP_KNOWN=1 to skip the checks of findings already reported (README.md). */
static int skip_known(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("FUZZ_SKIP_KNOWN");
        v = e && *e && *e != '0';
    }
    return v;
}

/* ---- input reader ---- */
typedef struct rd {
    const uint8_t *p;
    size_t n, pos;
} rd;
static int rd_more(const rd *r) { return r->pos < r->n; }
static uint64_t rd_bytes(rd *r, int k) {
    uint64_t v = 0;
    for (int i = 0; i < k; i++) v |= (uint64_t)(r->pos < r->n ? r->p[r->pos++] : 0) << (8 * i);
    return v;
}
static uint8_t rd_u8(rd *r) { return (uint8_t)rd_bytes(r, 1); }
static uint16_t rd_u16(rd *r) { return (uint16_t)rd_bytes(r, 2); }
static uint32_t rd_u32(rd *r) { return (uint32_t)rd_bytes(r, 4); }
static uint64_t rd_u64(rd *r) { return rd_bytes(r, 8); }

/* ---- allocator with failure injection ---- */
static int g_fail_allocs; /* fail the next this-many allocations */
static void *f_malloc(size_t n) {
    if (g_fail_allocs > 0) {
        g_fail_allocs--;
        return NULL;
    }
    return malloc(n);
}
static void *f_calloc(size_t a, size_t b) {
    if (g_fail_allocs > 0) {
        g_fail_allocs--;
        return NULL;
    }
    return calloc(a, b);
}

/* ---- reference model ---- */
#define MAXE 4096
typedef struct model {
    uint64_t W, w, last;
    size_t n;
    uint64_t slot[MAXE];
    uint64_t cnt[MAXE];
} model;

static uint64_t m_exp(const model *m, uint64_t s) { return (s + 1) * m->w + m->W; }
static uint64_t m_eff(const model *m, uint64_t now) { return now > m->last ? now : m->last; }
static uint64_t m_count(const model *m, uint64_t now) {
    uint64_t e = m_eff(m, now), c = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m_exp(m, m->slot[i]) > e) c += m->cnt[i];
    return c;
}
static void m_sweep(model *m, uint64_t eff) {
    size_t k = 0;
    while (k < m->n && m_exp(m, m->slot[k]) <= eff) k++;
    memmove(m->slot, m->slot + k, (m->n - k) * sizeof(uint64_t));
    memmove(m->cnt, m->cnt + k, (m->n - k) * sizeof(uint64_t));
    m->n -= k;
}
static uint64_t m_next_expiry(const model *m, uint64_t now) {
    uint64_t e = m_eff(m, now);
    for (size_t i = 0; i < m->n; i++)
        if (m_exp(m, m->slot[i]) > e) return m_exp(m, m->slot[i]);
    return 0;
}
static uint64_t m_empty_at(const model *m, uint64_t now) {
    if (m->n == 0) return 0;
    uint64_t x = m_exp(m, m->slot[m->n - 1]);
    return x > m_eff(m, now) ? x : 0;
}

/* The earliest time >= the effective now at which count + cost <= limit;
 * UINT64_MAX when cost > limit. */
static uint64_t m_fits_at(const model *m, uint64_t now, uint64_t limit, uint64_t cost) {
    if (cost > limit) return UINT64_MAX;
    uint64_t e = m_eff(m, now);
    if (m_count(m, e) <= limit - cost) return e;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t x = m_exp(m, m->slot[i]);
        if (x > e && m_count(m, x) <= limit - cost) return x;
    }
    return UINT64_MAX; /* not reached: the count is 0 after the last expiry */
}

/* ---- comparing a bucket with the model / another bucket ---- */
static void check_at(const lbucket *b, const model *m, uint64_t t) {
    CHECK(lb_count(b, t) == m_count(m, t));
    CHECK(lb_next_expiry(b, t) == m_next_expiry(m, t));
    CHECK(lb_empty_at(b, t) == m_empty_at(m, t));
}

static void check_all(const lbucket *b, const model *m, uint64_t now, uint64_t net_added) {
    CHECK(b->last_ms == m->last);
    CHECK(b->window_ms == m->W && b->slot_ms == m->w);
    CHECK(lb_mem_usage(b) <= 4096);
    CHECK(lb_count(b, now) <= net_added);
    CHECK(lb_count(b, now) <= b->total);
    check_at(b, m, now);
    check_at(b, m, m->last);
    if (m->n) {
        uint64_t x = m_exp(m, m->slot[0]);
        check_at(b, m, x - 1);
        check_at(b, m, x);
        x = m_exp(m, m->slot[m->n - 1]);
        check_at(b, m, x - 1);
        check_at(b, m, x);
    }
}

typedef struct slotlist {
    size_t n;
    uint64_t slot[MAXE];
    uint32_t cnt[MAXE];
} slotlist;
static void collect(uint64_t slot, uint32_t count, void *priv) {
    slotlist *l = priv;
    CHECK(l->n < MAXE);
    CHECK(count != 0);
    CHECK(l->n == 0 || slot > l->slot[l->n - 1]);
    l->slot[l->n] = slot;
    l->cnt[l->n] = count;
    l->n++;
}

/* Field by field (the struct has padding). */
static int same_state(const lbucket *a, const lbucket *b) {
    return a->window_ms == b->window_ms && a->slot_ms == b->slot_ms && a->last_ms == b->last_ms &&
           a->total == b->total && a->tail == b->tail && a->head == b->head && a->nslots == b->nslots &&
           a->ring == b->ring;
}

static int same_bucket(const lbucket *a, const lbucket *b, const uint64_t *times, size_t nt) {
    for (size_t i = 0; i < nt; i++) {
        if (lb_count(a, times[i]) != lb_count(b, times[i])) return 0;
        if (lb_next_expiry(a, times[i]) != lb_next_expiry(b, times[i])) return 0;
        if (lb_empty_at(a, times[i]) != lb_empty_at(b, times[i])) return 0;
    }
    return 1;
}

static uint64_t step_time(rd *r, uint64_t now, uint64_t w) {
    uint8_t k = rd_u8(r);
    switch (k % 8) {
    case 0: return now;
    case 1: return now + rd_u8(r);
    case 2: return now + (uint64_t)rd_u8(r) * w;             /* whole slots */
    case 3: return now + (uint64_t)rd_u8(r) * w - 1;         /* just before a boundary */
    case 4: return now + rd_u32(r);
    case 5: { uint64_t d = rd_u16(r); return d > now ? 0 : now - d; } /* backwards */
    case 6: { uint64_t d = rd_u32(r); return d > now ? 0 : now - d; }
    default: return rd_u64(r) % (LB_MAX_TIME_MS + 4096); /* anywhere, beyond the max too */
    }
}

static model g_m, g_m2;
static slotlist g_l;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rd r = {data, size, 0};
    mc_set_allocator(f_malloc, f_calloc, free);
    g_fail_allocs = 0;

    uint8_t mode = rd_u8(&r);
    uint64_t raw = rd_u64(&r), W;
    switch (mode % 4) {
    case 0: W = 1 + raw % 600; break;
    case 1: W = 1000 * (1 + raw % 86400); break;
    case 2: W = 1 + raw % LB_MAX_WINDOW_MS; break;
    default: W = raw; break;
    }
    lbucket b;
    lb_status st = lb_init(&b, W);
    if (W < LB_MIN_WINDOW_MS || W > LB_MAX_WINDOW_MS) {
        CHECK(st == LB_ERR_RANGE);
        return 0;
    }
    CHECK(st == LB_OK);
    CHECK(b.ring == NULL && b.total == 0 && b.last_ms == 0);
    CHECK(b.slot_ms >= 1 && b.nslots >= 3 && b.nslots <= LB_MAX_SLOTS);
    CHECK(b.nslots == b.window_ms / b.slot_ms + 2);
    CHECK(lb_mem_usage(&b) + (size_t)b.nslots * 4 <= 4096);

    model *m = &g_m;
    memset(m, 0, sizeof(*m));
    m->W = W;
    m->w = b.slot_ms;

    uint8_t cm = rd_u8(&r);
    uint64_t now = rd_u64(&r);
    now = (cm & 1) ? now % (LB_MAX_TIME_MS + 1) : 1700000000000ULL + now % 100000;

    uint64_t net_added = 0; /* hits added minus hits removed */
    /* for the "non-increasing while nothing is added" check */
    int have_q = 0;
    uint64_t q_time = 0, q_count = 0;

    int ops = 0;
    while (rd_more(&r) && ops++ < 2000) {
        uint8_t op = rd_u8(&r);
        now = step_time(&r, now, m->w);
        switch (op % 11) {
        case 0:
        case 1: { /* add */
            uint8_t k = rd_u8(&r);
            uint32_t n = (k & 0x80) ? rd_u32(&r) : (k & 7);
            if ((k & 0x70) == 0x70) g_fail_allocs = 1;
            lbucket before = b;
            uint64_t count = 0xdeadbeef;
            int had_ring = b.ring != NULL;
            st = lb_add(&b, now, n, &count);
            int injected = g_fail_allocs == 0 && (k & 0x70) == 0x70;
            g_fail_allocs = 0;
            if (now > LB_MAX_TIME_MS) {
                CHECK(st == LB_ERR_RANGE);
                CHECK(same_state(&before, &b) && count == 0xdeadbeef);
                break;
            }
            if (injected && !had_ring) {
                CHECK(st == LB_ERR_NOMEM);
                CHECK(same_state(&before, &b) && count == 0xdeadbeef);
                break;
            }
            uint64_t eff = m_eff(m, now), s = eff / m->w;
            uint64_t cur = (m->n && m->slot[m->n - 1] == s) ? m->cnt[m->n - 1] : 0;
            if (n > 0 && cur + n > UINT32_MAX) {
                CHECK(st == LB_ERR_FULL);
                CHECK(same_state(&before, &b) && count == 0xdeadbeef);
                break;
            }
            CHECK(st == LB_OK);
            m_sweep(m, eff);
            m->last = eff;
            if (n > 0) {
                if (m->n && m->slot[m->n - 1] == s) {
                    m->cnt[m->n - 1] += n;
                } else {
                    CHECK(m->n < MAXE);
                    CHECK(m->n == 0 || m->slot[m->n - 1] < s);
                    m->slot[m->n] = s;
                    m->cnt[m->n] = n;
                    m->n++;
                }
            }
            net_added += n;
            CHECK(count == m_count(m, eff));
            CHECK(count <= net_added);
            have_q = 0;
            break;
        }
        case 2: { /* count at increasing query times: never increases */
            uint64_t t = now;
            for (int i = 0; i < 4; i++) {
                uint64_t c = lb_count(&b, t);
                CHECK(c == m_count(m, t));
                CHECK(c <= net_added);
                if (have_q && t >= q_time) CHECK(c <= q_count);
                if (!have_q || t >= q_time) {
                    have_q = 1;
                    q_time = t;
                    q_count = c;
                }
                t += (uint64_t)rd_u8(&r) * m->w + rd_u8(&r);
            }
            break;
        }
        case 3: { /* remove */
            uint8_t k = rd_u8(&r);
            uint64_t n = (k & 0x80) ? rd_u64(&r) : (k & 7);
            uint64_t removed = lb_remove(&b, now, n);
            uint64_t t = now > LB_MAX_TIME_MS ? LB_MAX_TIME_MS : now;
            uint64_t eff = m_eff(m, t);
            m_sweep(m, eff);
            m->last = eff;
            uint64_t want = n, got = 0;
            while (want > got && m->n) {
                uint64_t take = want - got;
                if (take > m->cnt[m->n - 1]) take = m->cnt[m->n - 1];
                m->cnt[m->n - 1] -= take;
                got += take;
                if (m->cnt[m->n - 1] == 0) m->n--;
            }
            CHECK(removed == got);
            CHECK(net_added >= removed);
            net_added -= removed;
            break;
        }
        case 4: /* next expiry, empty-at */
            check_at(&b, m, now);
            if (m->n) {
                uint64_t x = lb_next_expiry(&b, now);
                if (x) {
                    CHECK(x > m_eff(m, now));
                    CHECK(lb_count(&b, x) < lb_count(&b, x - 1) || x - 1 < m->last);
                }
                x = lb_empty_at(&b, now);
                if (x) CHECK(lb_count(&b, x) == 0 && (x - 1 < m->last || lb_count(&b, x - 1) > 0));
            }
            break;
        case 5: { /* foreach -> restore into a fresh bucket -> same behaviour */
            slotlist *l = &g_l;
            l->n = 0;
            lb_foreach_slot(&b, collect, l);
            uint64_t sum = 0;
            for (size_t i = 0; i < l->n; i++) sum += l->cnt[i];
            CHECK(sum == b.total);
            CHECK(sum >= lb_count(&b, now));
            lbucket c;
            CHECK(lb_init(&c, W) == LB_OK);
            CHECK(lb_restore_begin(&c, b.last_ms) == LB_OK);
            for (size_t i = 0; i < l->n; i++) CHECK(lb_restore_slot(&c, l->slot[i], l->cnt[i]) == LB_OK);
            CHECK(lb_restore_end(&c) == LB_OK);
            CHECK(c.last_ms == b.last_ms && c.total == b.total);
            uint64_t times[8] = {now, b.last_ms, b.last_ms + 1, b.last_ms + m->W,
                                 b.last_ms + m->W + m->w, 0,
                                 lb_next_expiry(&b, now), lb_empty_at(&b, now)};
            times[5] = times[6] ? times[6] - 1 : UINT64_MAX;
            CHECK(same_bucket(&b, &c, times, 8));
            if (rd_u8(&r) & 1) { /* carry on with the restored one */
                lb_free(&b);
                b = c;
            } else {
                lb_free(&c);
            }
            break;
        }
        case 6: { /* arbitrary restore sequence from the input */
            lbucket c;
            CHECK(lb_init(&c, W) == LB_OK);
            uint8_t k = rd_u8(&r);
            uint64_t last = (k & 1) ? rd_u64(&r) % (LB_MAX_TIME_MS + 1024) : now + rd_u16(&r);
            st = lb_restore_begin(&c, last);
            if (last > LB_MAX_TIME_MS) {
                CHECK(st == LB_ERR_RANGE);
                lb_free(&c);
                break;
            }
            CHECK(st == LB_OK);
            model *m2 = &g_m2;
            memset(m2, 0, sizeof(*m2));
            m2->W = W;
            m2->w = m->w;
            m2->last = last;
            size_t nslots = rd_u8(&r) % 40;
            uint64_t slot = last / m->w - rd_u16(&r) % (2 * c.nslots + 1);
            if (slot > last / m->w) slot = 0; /* wrapped */
            int ok = 1;
            for (size_t i = 0; i < nslots && ok; i++) {
                uint8_t how = rd_u8(&r);
                uint32_t cnt = (how & 0x80) ? rd_u32(&r) : (how & 0x0f);
                uint64_t ns = slot;
                switch ((how >> 4) & 7) {
                case 0: ns = slot + 1; break;
                case 1: ns = slot + 1 + rd_u8(&r) % 8; break;
                case 2: ns = slot + rd_u16(&r) % (c.nslots + 2); break;
                case 3: ns = slot; break;                            /* repeat */
                case 4: ns = slot - (slot ? 1 : 0); break;             /* backwards */
                case 5: ns = last / m->w + rd_u8(&r) % 3; break;     /* at/after the clock */
                default: ns = slot + 1; break;
                }
                /* Well-formed so far? */
                int good = cnt != 0 && ns <= last / m->w &&
                           (m2->n == 0 || (ns > m2->slot[m2->n - 1] && ns - m2->slot[0] <= m->W / m->w + 1));
                if (how == 0x7f) g_fail_allocs = 1;
                int injected = how == 0x7f;
                st = lb_restore_slot(&c, ns, cnt);
                int consumed = g_fail_allocs == 0;
                g_fail_allocs = 0;
                if (injected && consumed) {
                    CHECK(st == LB_ERR_NOMEM);
                    ok = 0;
                    break;
                }
                CHECK((st == LB_OK) == good);
                if (!good) {
                    CHECK(st == LB_ERR_CORRUPT);
                    ok = 0;
                    break;
                }
                m2->slot[m2->n] = ns;
                m2->cnt[m2->n] = cnt;
                m2->n++;
                slot = ns;
            }
            if (!ok) {
                lb_free(&c);
                break;
            }
            st = lb_restore_end(&c);
            CHECK(st == LB_OK); /* the span was checked slot by slot */
            check_all(&c, m2, now, UINT64_MAX);
            if (rd_u8(&r) & 1) { /* carry on with it */
                lb_free(&b);
                b = c;
                memcpy(m, m2, sizeof(*m));
                net_added = 0;
                for (size_t i = 0; i < m->n; i++) net_added += m->cnt[i];
                have_q = 0;
            } else {
                lb_free(&c);
            }
            break;
        }
        case 7: { /* deep copy */
            lbucket c;
            int fail = rd_u8(&r) == 0xff;
            g_fail_allocs = fail;
            st = lb_copy(&c, &b);
            g_fail_allocs = 0;
            if (fail && b.ring) {
                CHECK(st == LB_ERR_NOMEM && c.ring == NULL);
                break;
            }
            CHECK(st == LB_OK);
            CHECK(b.ring == NULL || c.ring != b.ring);
            uint64_t times[4] = {now, b.last_ms, b.last_ms + m->W, lb_next_expiry(&b, now)};
            CHECK(same_bucket(&b, &c, times, 4));
            /* Writing to the copy must not change the original. */
            uint64_t before = lb_count(&b, now);
            if (now <= LB_MAX_TIME_MS && lb_add(&c, now, 1, NULL) == LB_OK) CHECK(lb_count(&b, now) == before);
            lb_free(&c);
            break;
        }
        case 9: { /* lb_fits_at */
            if (!lb_fits_at) break;
            uint8_t k = rd_u8(&r);
            uint64_t limit, cost;
            if (k & 1) { /* the commands' range: u32 */
                limit = rd_u32(&r);
                cost = rd_u32(&r);
            } else if (k & 2) { /* around the current count */
                uint64_t c = lb_count(&b, now);
                limit = c + rd_u8(&r) - 128;
                cost = rd_u8(&r) & 15;
            } else { /* anything: the contract has no range */
                limit = rd_u64(&r);
                cost = rd_u64(&r);
                uint64_t c = lb_count(&b, now);
                /* Finding F2 (README): count + cost wraps around 2^64. */
                if (skip_known() && cost <= limit && c > 0 && cost > UINT64_MAX - c) break;
            }
            uint64_t got = lb_fits_at(&b, now, limit, cost);
            uint64_t want = m_fits_at(m, now, limit, cost);
            if (got != want)
                fprintf(stderr, "lb_fits_at(now=%llu limit=%llu cost=%llu) = %llu, want %llu (count %llu)\n",
                        (unsigned long long)now, (unsigned long long)limit, (unsigned long long)cost,
                        (unsigned long long)got, (unsigned long long)want,
                        (unsigned long long)lb_count(&b, now));
            CHECK(got == want);
            break;
        }
        case 8: /* free and reuse (the bucket stays empty and usable) */
            if ((rd_u8(&r) & 15) == 0) {
                lb_free(&b);
                CHECK(lb_count(&b, now) == 0 && lb_mem_usage(&b) == sizeof(lbucket));
                m->n = 0;
                net_added = 0;
                have_q = 0;
            }
            break;
        default: /* clock step only */
            break;
        }
        check_all(&b, m, now, net_added);
    }
    lb_free(&b);
    mc_set_allocator(malloc, calloc, free);
    return 0;
}
