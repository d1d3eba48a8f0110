/* policy_entry.c -- ordering, hashing and the bus form of the policy table's
 * entries (see policy_entry.h): what lets every node of a cluster agree on one
 * table without a coordinator.
 *
 * SPDX-License-Identifier: BSD-3-Clause */
#include "policy_entry.h"

#include <string.h>

static int cmp_u64(uint64_t a, uint64_t b) {
    return a > b ? 1 : a < b ? -1 : 0;
}

int policy_entry_cmp(const policy_entry *a, const policy_entry *b) {
    int c = cmp_u64(a->stamp_ms, b->stamp_ms);
    if (c) return c;
    c = memcmp(a->node, b->node, POLICY_NODE_ID_LEN);
    if (c) return c > 0 ? 1 : -1;
    if ((c = cmp_u64(a->deleted, b->deleted)) != 0) return c;
    if ((c = cmp_u64((uint64_t)a->def.kind, (uint64_t)b->def.kind)) != 0) return c;
    if ((c = cmp_u64(a->def.rate, b->def.rate)) != 0) return c;
    if ((c = cmp_u64(a->def.period_ms, b->def.period_ms)) != 0) return c;
    return cmp_u64(a->def.burst, b->def.burst);
}

int policy_entry_valid(const policy_entry *e) {
    for (int i = 0; i < POLICY_NODE_ID_LEN; i++)
        if (e->node[i] < 0x21 || e->node[i] > 0x7e) return 0;
    if (e->deleted > 1) return 0;
    if (e->deleted)
        return e->def.kind == 0 && e->def.rate == 0 && e->def.period_ms == 0 && e->def.burst == 0;
    return policy_check(&e->def) == POLICY_OK;
}

/* FNV-1a over the bytes, then a splitmix64 finaliser so that sums of hashes
 * spread well. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t policy_entry_hash(const char *name, size_t len, const policy_entry *e) {
    unsigned char w[POLICY_WIRE_MAX];
    size_t n = policy_wire_put(w, name, len, e);
    uint64_t h = fnv(0xcbf29ce484222325ULL, w, n);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

static unsigned char *put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

size_t policy_wire_put(unsigned char *out, const char *name, size_t len, const policy_entry *e) {
    unsigned char *p = out;
    *p++ = (unsigned char)(len & 0xff);
    *p++ = (unsigned char)(len >> 8);
    memcpy(p, name, len);
    p += len;
    p = put_u64(p, e->stamp_ms);
    memcpy(p, e->node, POLICY_NODE_ID_LEN);
    p += POLICY_NODE_ID_LEN;
    *p++ = e->deleted;
    *p++ = (unsigned char)e->def.kind;
    p = put_u64(p, e->def.rate);
    p = put_u64(p, e->def.period_ms);
    p = put_u64(p, e->def.burst);
    return (size_t)(p - out);
}

int policy_wire_get(const unsigned char *in, size_t avail, const char **name, size_t *len, policy_entry *e,
                    size_t *used) {
    if (avail < 2) return -1;
    size_t n = (size_t)in[0] | ((size_t)in[1] << 8);
    if (n < 1 || n > POLICY_NAME_MAX || avail < POLICY_WIRE_FIXED + n) return -1;
    const unsigned char *p = in + 2;
    *name = (const char *)p;
    *len = n;
    p += n;
    memset(e, 0, sizeof(*e));
    e->stamp_ms = get_u64(p);
    p += 8;
    memcpy(e->node, p, POLICY_NODE_ID_LEN);
    p += POLICY_NODE_ID_LEN;
    e->deleted = *p++;
    unsigned kind = *p++;
    if (kind > POLICY_WINDOW) return -1;
    e->def.kind = (policy_kind)kind;
    e->def.rate = get_u64(p);
    e->def.period_ms = get_u64(p + 8);
    e->def.burst = get_u64(p + 16);
    p += 24;
    if (!policy_entry_valid(e)) return -1;
    *used = (size_t)(p - in);
    return 0;
}
