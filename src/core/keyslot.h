/* SPDX-License-Identifier: BSD-3-Clause */
/* keyslot.h -- Redis Cluster hash slots, computed here because Redis 7.0's
 * module API has no RedisModule_ClusterKeySlot (7.4+).
 *
 * The slot of a key is CRC16-XMODEM (poly 0x1021, init 0) of the key, or of
 * its hash tag -- the bytes between the first '{' and the next '}' when that
 * span is non-empty -- modulo 16384 (Redis Cluster specification, "Hash tags").
 * Pure C, unit-tested against the slots the specification lists. */
#ifndef MC_KEYSLOT_H
#define MC_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

#define KEYSLOT_COUNT 16384

/* CRC16-XMODEM of len bytes. */
uint16_t keyslot_crc16(const char *buf, size_t len);

/* The hash slot (0..16383) of a key of len bytes. */
unsigned keyslot_of(const char *key, size_t len);

#endif
