// SPDX-License-Identifier: BSD-3-Clause
// Redis Cluster hash slots, computed in the client: CRC16 (XMODEM: polynomial 0x1021, initial
// value 0) of the key's hash tag -- the bytes between the first '{' and the first '}' after it,
// when that span is not empty -- or else of the whole key, modulo 16384, as the Cluster
// specification defines it. The multi-key commands (LOCK.*_ALL, RENAME_CAPTCHA in a cluster)
// are checked here so that a CrossSlot error is raised before anything is sent.
// SPDX-License-Identifier: BSD-3-Clause
'use strict';

const { CrossSlot } = require('./errors');

const NSLOTS = 16384;

// The CRC16-XMODEM table, computed once.
const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c = i << 8;
  for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  TABLE[i] = c;
}

/** CRC16-XMODEM of a byte array (Buffer or Uint8Array). */
function crc16(bytes) {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]) & 0xff];
  return crc;
}

function toBytes(key) {
  if (Buffer.isBuffer(key) || key instanceof Uint8Array) return key;
  return Buffer.from(String(key), 'utf8');
}

/** The hash slot (0..16383) of a key (string, number or Buffer), hash tags included. */
function keySlot(key) {
  let k = toBytes(key);
  const open = k.indexOf(0x7b); // '{'
  if (open >= 0) {
    const close = k.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) k = k.subarray(open + 1, close);
  }
  return crc16(k) % NSLOTS;
}

/**
 * The one slot of `keys`, or a CrossSlot error thrown when they do not share one (nothing is
 * sent: the caller checks before building its command).
 */
function assertSameSlot(keys, command) {
  const slot = keySlot(keys[0]);
  for (let i = 1; i < keys.length; i++) {
    const s = keySlot(keys[i]);
    if (s !== slot) {
      const err = new CrossSlot(
        `CROSSSLOT ${command}: keys ${JSON.stringify(String(keys[0]))} (slot ${slot}) and ` +
          `${JSON.stringify(String(keys[i]))} (slot ${s}) do not hash to the same slot; ` +
          'give them a common hash tag, e.g. "{acct}:1" and "{acct}:2"');
      err.slots = keys.map(keySlot);
      throw err;
    }
  }
  return slot;
}

module.exports = { NSLOTS, crc16, keySlot, assertSameSlot };
