/* errors.h -- error replies every family uses. A family's own errors live in
 * its folder (captcha/errors.h: the ones the mCaptcha protocol fixes). */
#ifndef MC_SERVER_ERRORS_H
#define MC_SERVER_ERRORS_H

#define ERR_SYNTAX "ERR syntax error"

#endif
