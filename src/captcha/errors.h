/* SPDX-License-Identifier: BSD-3-Clause */
/* errors.h -- the error replies of the captcha family.
 *
 * Each starts with an error code (ERR, WRONGTYPE, TRYAGAIN), except the three
 * bare messages whose exact bytes the mCaptcha protocol fixes: its client
 * compares them (docs/protocol.md, "Error replies"). */
#ifndef MC_CAPTCHA_ERRORS_H
#define MC_CAPTCHA_ERRORS_H

#include "server/errors.h"

/* Bare, fixed by the mCaptcha protocol. */
#define ERR_CAPTCHA_NOT_FOUND "Captcha not found"
#define ERR_CHALLENGE_NOT_FOUND "Challenge not found"
#define ERR_CHALLENGE_EXISTS "Challenge already exists"

#define ERR_CAPTCHA_EXISTS "ERR captcha already exists"
#define ERR_TARGET_EXISTS "ERR target captcha already exists"
#define ERR_NAME_SLOT \
    "ERR the captcha name maps to another hash slot than its key; use a name without '{' and '}'"
#define ERR_COUNT_FULL "ERR visitor count limit reached (4294967295 visits in one time slot)"
#define ERR_TRYAGAIN "TRYAGAIN the captcha's hash slot is being migrated to this node; retry"
#define ERR_NOMEM "ERR out of memory"
#define ERR_NO_CAPTCHA_KEY "ERR no captcha at this key"
#define ERR_BAD_TIME "ERR time must be an integer number of Unix milliseconds from 0 to 2^48"
#define ERR_BAD_STATE "ERR invalid captcha state: "
#define ERR_UNREADABLE_CAPTCHA \
    "ERR this captcha was stored by the original module in a form that cannot be read; it is kept " \
    "unchanged (DELETE_CAPTCHA removes it, then ADD_CAPTCHA it again)"
#define ERR_UNREADABLE_CHALLENGE \
    "ERR this challenge was stored by the original module in a form that cannot be read; it is kept " \
    "unchanged (DELETE_CHALLENGE removes it)"

#endif
