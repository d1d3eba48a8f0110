/* SPDX-License-Identifier: BSD-3-Clause */
/* policy_entry.h -- one entry of the cluster-wide policy table: a definition
 * (or a deletion, a tombstone) with the version that orders it against the same
 * name's other versions, the hash that sums into the table's digest, and its
 * form on the cluster bus.
 *
 * The table is a last-writer-wins map: of two versions of a name, the one with
 * the larger (stamp_ms, node id, deleted, kind, rate, period_ms, burst) tuple
 * wins, compared field by field (node ids bytewise). Every node applies the
 * same rule, so merging in any order and any number of times gives the same
 * table (commutative, idempotent), and two tables that saw the same versions
 * have the same digest: the sum (mod 2^64) of the entries' hashes.
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_policy_entry.c.
 *
 * SPDX-License-Identifier: BSD-3-Clause */
#ifndef MC_POLICY_ENTRY_H
#define MC_POLICY_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define POLICY_NODE_ID_LEN 40 /* a cluster node id; 40 '0' outside cluster mode */

typedef struct policy_entry {
    policy_def def;                 /* all zero for a tombstone */
    uint64_t stamp_ms;              /* Unix ms of the write, at least 1 more than the version it replaced */
    char node[POLICY_NODE_ID_LEN];  /* the primary that wrote it */
    uint8_t deleted;                /* 1: a tombstone (RL.POLICY_DEL) */
} policy_entry;

/* >0 when a wins over b, <0 when b wins, 0 when they are the same version. */
int policy_entry_cmp(const policy_entry *a, const policy_entry *b);

/* Whether `e` is well formed: a live entry with policy_check OK, or a
 * tombstone with an all-zero definition; a node id of printable ASCII. */
int policy_entry_valid(const policy_entry *e);

/* 64-bit hash of (name, entry), the unit of the table's digest. */
uint64_t policy_entry_hash(const char *name, size_t len, const policy_entry *e);

/* ---- the cluster bus form of an entry (little-endian) ----
 *   u16 name length (1..POLICY_NAME_MAX), name, u64 stamp_ms, node id (40 bytes),
 *   u8 deleted, u8 kind (0 for a tombstone), u64 rate, u64 period_ms, u64 burst */
#define POLICY_WIRE_FIXED (2 + 8 + POLICY_NODE_ID_LEN + 1 + 1 + 8 + 8 + 8)
#define POLICY_WIRE_MAX (POLICY_WIRE_FIXED + POLICY_NAME_MAX)

/* Append the entry at out (room for POLICY_WIRE_MAX bytes); the bytes written. */
size_t policy_wire_put(unsigned char *out, const char *name, size_t len, const policy_entry *e);

/* Read one entry at in[0..avail): 0 with *name pointing into `in`, *len, *e and
 * *used set; -1 when truncated, a length or field is out of range, or the entry
 * is not policy_entry_valid. */
int policy_wire_get(const unsigned char *in, size_t avail, const char **name, size_t *len, policy_entry *e,
                    size_t *used);

#endif
