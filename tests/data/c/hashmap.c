/*
 * hashmap.c - a small open-addressing hash map, in ordinary C style.
 *
 * Copyright (c) 2024 Example Authors. Licensed under "MIT" (see 'LICENSE').
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HM_MIN_CAPACITY 16u
#define HM_LOAD_NUM 3u  /* grow at 3/4 full */
#define HM_LOAD_DEN 4u
#define HM_HASH_SEED 0xcbf29ce484222325ull
#define HM_PRIME     0x100000001b3ull

typedef struct hm_entry {
    const char *key;   // owned copy, NULL when empty
    size_t      klen;
    void       *value;
    uint64_t    hash;
} hm_entry;

typedef struct hashmap {
    hm_entry *slots;
    size_t    cap;     /* always a power of two */
    size_t    len;
} hashmap;

/* FNV-1a over the key bytes */
static uint64_t hm_hash(const char *key, size_t len)
{
    uint64_t h = HM_HASH_SEED;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= HM_PRIME;
    }
    return h ? h : 1; /* 0 is reserved */
}

int hm_init(hashmap *m, size_t cap)
{
    size_t c = HM_MIN_CAPACITY;
    while (c < cap)
        c <<= 1;
    m->slots = calloc(c, sizeof *m->slots);
    if (!m->slots)
        return -1;
    m->cap = c;
    m->len = 0;
    return 0;
}

static hm_entry *hm_find_slot(hm_entry *slots, size_t cap, const char *key,
                              size_t klen, uint64_t hash)
{
    size_t mask = cap - 1, i = (size_t)hash & mask;
    for (;;) {
        hm_entry *e = &slots[i];
        if (!e->key)
            return e;
        if (e->hash == hash && e->klen == klen && !memcmp(e->key, key, klen))
            return e;
        i = (i + 1) & mask;   /* linear probing */
    }
}

static int hm_grow(hashmap *m)
{
    size_t ncap = m->cap * 2;
    hm_entry *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        hm_entry *e = &m->slots[i];
        if (e->key)
            *hm_find_slot(ns, ncap, e->key, e->klen, e->hash) = *e;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int hm_put(hashmap *m, const char *key, void *value)
{
    size_t klen = strlen(key);
    uint64_t h = hm_hash(key, klen);
    if ((m->len + 1) * HM_LOAD_DEN > m->cap * HM_LOAD_NUM && hm_grow(m))
        return -1;
    hm_entry *e = hm_find_slot(m->slots, m->cap, key, klen, h);
    if (!e->key) {
        char *copy = malloc(klen + 1);
        if (!copy)
            return -1;
        memcpy(copy, key, klen + 1);
        e->key = copy;
        e->klen = klen;
        e->hash = h;
        m->len++;
    }
    e->value = value;
    return 0;
}

void *hm_get(const hashmap *m, const char *key)
{
    size_t klen = strlen(key);
    hm_entry *e = hm_find_slot(m->slots, m->cap, key, klen, hm_hash(key, klen));
    return e->key ? e->value : NULL;
}

void hm_free(hashmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free((void *)m->slots[i].key);
    free(m->slots);
    m->slots = NULL;
    m->cap = m->len = 0;
}

#ifdef HM_DEMO
#include <stdio.h>
int main(void)
{
    hashmap m;
    static int vals[] = {1, 2, 3};
    hm_init(&m, 4);
    hm_put(&m, "one", &vals[0]);
    hm_put(&m, "two", &vals[1]);
    hm_put(&m, "three // not a comment", &vals[2]);
    printf("%d %d\n", *(int *)hm_get(&m, "one"),
           *(int *)hm_get(&m, "three // not a comment"));
    hm_free(&m);
    return 0;
}
#endif /* HM_DEMO */
