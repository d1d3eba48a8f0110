/* SPDX-License-Identifier: BSD-3-Clause */
/* alloc.h -- the allocator the pure cores use.
 *
 * The pure C files (bucket.c, captcha.c) never include redismodule.h, so they
 * allocate through these hooks. They default to libc (unit tests); the module
 * points them at RedisModule_Alloc/Free in RedisModule_OnLoad so that every
 * byte is counted by Redis (used_memory, maxmemory, MEMORY USAGE). */
#ifndef MC_ALLOC_H
#define MC_ALLOC_H

#include <stddef.h>

extern void *(*mc_malloc)(size_t size);
extern void *(*mc_calloc)(size_t nmemb, size_t size);
extern void (*mc_free)(void *ptr);

/* Install another allocator. All three must come from the same family. */
void mc_set_allocator(void *(*m)(size_t), void *(*c)(size_t, size_t), void (*f)(void *));

#endif
