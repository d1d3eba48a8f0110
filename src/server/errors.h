/* SPDX-License-Identifier: BSD-3-Clause */
/* errors.h -- error replies every family may use. A family's own errors live in
 * its folder (captcha/errors.h: the ones the mCaptcha protocol fixes). There is
 * no bare "syntax error": an unknown option or a missing value is named
 * (server/args.h, mc_reply_unknown_option, mc_reply_needs_value). */
#ifndef MC_SERVER_ERRORS_H
#define MC_SERVER_ERRORS_H

/* Redis Cluster's own text, also given standalone where a command's keys must share a slot. */
#define ERR_CROSSSLOT "CROSSSLOT Keys in request don't hash to the same slot"

#endif
