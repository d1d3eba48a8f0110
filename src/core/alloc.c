/* SPDX-License-Identifier: BSD-3-Clause */
/* alloc.c -- allocator hooks for the pure cores; see alloc.h. */
#include <stdlib.h>
#include "alloc.h"

void *(*mc_malloc)(size_t size) = malloc;
void *(*mc_calloc)(size_t nmemb, size_t size) = calloc;
void (*mc_free)(void *ptr) = free;

void mc_set_allocator(void *(*m)(size_t), void *(*c)(size_t, size_t), void (*f)(void *)) {
    mc_malloc = m;
    mc_calloc = c;
    mc_free = f;
}
