/* SPDX-License-Identifier: BSD-3-Clause */
/* keyslot.c -- Redis Cluster hash slot of a key; see keyslot.h. */
#include "keyslot.h"

uint16_t keyslot_crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned keyslot_of(const char *key, size_t len) {
    size_t open, close;
    for (open = 0; open < len && key[open] != '{'; open++) {}
    if (open < len) {
        for (close = open + 1; close < len && key[close] != '}'; close++) {}
        if (close < len && close != open + 1)
            return keyslot_crc16(key + open + 1, close - open - 1) & (KEYSLOT_COUNT - 1);
    }
    return keyslot_crc16(key, len) & (KEYSLOT_COUNT - 1);
}
